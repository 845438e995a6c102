"""``guildlore search QUERY --guild ID``: the strict hybrid search, from a terminal.

The same search as ``/memory search`` and ``GET /api/memory/search``:
only hits that pass the relevance gate, possibly none. Operators see every
channel (no visibility filter). ``--json`` prints the hits in the API's shape.
Exit status 1 for a guild the database does not know (with the known ones
listed), 2 for bad arguments; no hits is not an error (0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import textwrap
from typing import TYPE_CHECKING, Any

from bot.commands._common import (
    CliError,
    add_config_argument,
    load_cli_settings,
    open_memory,
    reports_errors,
)

if TYPE_CHECKING:
    from memory import Hit

MAX_LINES = 3  # of a hit's text in the table (--json has it whole)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", metavar="QUERY", help="what to look for")
    parser.add_argument("--guild", required=True, metavar="ID", help="guild id to search")
    parser.add_argument("--channel", default=None, metavar="ID", help="rank this channel first")
    parser.add_argument(
        "--scope",
        choices=("facts", "messages", "all"),
        default=None,
        help="facts, past messages, or both (default: both, merged by score)",
    )
    parser.add_argument("--limit", type=int, default=10, help="at most this many hits (1-50)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--explain", action="store_true", help="show the score parts of each hit in the table"
    )
    add_config_argument(parser)


def hit_json(hit: Hit) -> dict[str, Any]:
    """A hit in the field names of ``GET /api/memory/search`` (the dashboard API)."""
    parts = hit.parts.as_dict()
    return {
        "kind": hit.kind,
        "id": hit.id,
        "created_at": hit.created_at,
        "guild_id": hit.guild_id,
        "channel_id": hit.channel_id,
        "subject": hit.subject,
        "author_name": hit.author_name,
        "fact": hit.text,
        "fact_type": hit.fact_type,
        "evidence_text": hit.evidence_text,
        "source_message_id": hit.source_message_id,
        "confidence": hit.confidence,
        "score": hit.score,
        "semanticScore": parts.get("semantic"),
        "lexicalScore": parts.get("lexical"),
        "parts": parts,
    }


def format_table(hits: list[Hit], names: dict[str, str], *, explain: bool = False) -> str:
    width = max(60, shutil.get_terminal_size((100, 20)).columns)
    rows = []
    for h in hits:
        kind = h.fact_type if h.kind == "fact" else "message"
        who = (
            "lore"
            if h.subject == "__lore__"
            else (h.author_name or names.get(h.subject) or h.subject)
        )
        rows.append((f"{h.score:.3f}", kind or "", who, h.text))
    head = ("score", "kind", "who", "text")
    w0 = max(len(head[0]), *(len(r[0]) for r in rows))
    w1 = max(len(head[1]), *(len(r[1]) for r in rows))
    w2 = min(24, max(len(head[2]), *(len(r[2]) for r in rows)))
    text_w = max(20, width - w0 - w1 - w2 - 6)
    out = [f"{head[0]:>{w0}}  {head[1]:<{w1}}  {head[2]:<{w2}}  {head[3]}"]
    out.append(f"{'-' * w0}  {'-' * w1}  {'-' * w2}  {'-' * min(text_w, 40)}")
    for h, (score, kind, who, text) in zip(hits, rows, strict=True):
        who = who if len(who) <= w2 else who[: w2 - 1] + "…"
        wrapped = textwrap.wrap(" ".join(text.split()), text_w) or [""]
        if len(wrapped) > MAX_LINES:
            wrapped = wrapped[:MAX_LINES]
            wrapped[-1] = wrapped[-1][: text_w - 1] + "…"
        out.append(f"{score:>{w0}}  {kind:<{w1}}  {who:<{w2}}  {wrapped[0]}")
        pad = " " * (w0 + w1 + w2 + 6)
        out.extend(pad + line for line in wrapped[1:])
        if explain:
            p = h.parts
            sem = "-" if p.semantic is None else f"{p.semantic:.2f}"
            out.append(
                f"{pad}sem {sem}  lex {p.lexical:.2f}  bm25 {p.bm25:.2f}  conf {p.confidence:.2f}"
                f"  rec {p.recency:.2f}  chan {p.channel:.2f}"
            )
    return "\n".join(out)


@reports_errors
def run(args: argparse.Namespace) -> int:
    if not (args.guild.isascii() and args.guild.isdigit()):
        raise CliError(f"guildlore search: --guild must be a Discord id, got {args.guild!r}", 2)
    if not 1 <= args.limit <= 50:
        raise CliError("guildlore search: --limit must be between 1 and 50", 2)
    settings = load_cli_settings(args)
    if not settings.database_exists:
        raise CliError(
            f"guildlore search: no database at {settings.database_label} "
            "(import something first, or pass --data-dir)",
            1,
        )
    return asyncio.run(_main(args, settings))


async def _main(args: argparse.Namespace, settings: Any) -> int:
    from memory import DEFAULT_SEARCH_SCOPE

    args.scope = args.scope or DEFAULT_SEARCH_SCOPE
    async with open_memory(settings, ingest=False) as memory:
        known = {str(g["guild_id"]): g.get("name") for g in await memory.guilds.overview()}
        if args.guild not in known:
            # Not "no hits": a mistyped id must not look like an empty memory.
            listed = ", ".join(
                f"{gid} ({name})" if name else gid for gid, name in sorted(known.items())
            )
            raise CliError(
                f"guildlore search: no guild {args.guild} in this database "
                f"(known: {listed or 'none'})",
                1,
            )
        hits = await memory.search(
            args.guild, args.query, channel_id=args.channel, limit=args.limit, scope=args.scope
        )
        names = {
            m["user_id"]: m.get("display_name") or ""
            for m in await memory.guilds.members(args.guild)
        }
    if args.json:
        print(
            json.dumps(
                {"query": args.query, "guildId": args.guild, "hits": [hit_json(h) for h in hits]},
                indent=2,
                ensure_ascii=False,
            )
        )
        return 0
    if not hits:
        print(f"no hits for {args.query!r} in guild {args.guild} (scope {args.scope})")
        return 0
    print(format_table(hits, names, explain=args.explain))
    return 0
