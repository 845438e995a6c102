"""``guildlore demo``: the whole product offline, in one command.

No configuration, no network, no Discord: a fresh data dir, the bundled
pseudonymised sample guild (contiguous stretches of a real channel, every
message in them: ``scripts/make_sample.py``) imported through the live
ingest path with the offline rule extractor and the bundled local embedding
model, then the dashboard on loopback. It prints the URL, what the memory
holds (facts, the members they are about, searchable messages), a few
searches that really return hits (picked from the facts the import produced,
then checked) and "when did we talk about …?" questions answered from the
past messages, and runs until Ctrl-C or SIGTERM.

The environment's LLM and embedding settings are ignored on purpose: the demo
must behave the same on every machine. ``DASHBOARD_TOKEN`` is honoured, since
binding beyond loopback needs it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.commands._common import CliError, Progress, reports_errors

if TYPE_CHECKING:
    from memory import Memory

DEFAULT_PORT = 8080
EXAMPLES = 4
# Asked of the bundled sample; printed only when the answer's first hit is a
# past message (checked at start-up, like the other examples).
WHEN_QUESTIONS = (
    "when did we talk about Plato's grave?",
    "when did we talk about carbon dating the scrolls?",
)
SAMPLE_NAME = "sample_guild.json"
READY_LINE = "guildlore demo: dashboard at"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default: 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"dashboard port (default: {DEFAULT_PORT}; 0 picks a free one)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the temporary data dir at exit (a --data-dir is always kept)",
    )


def sample_path() -> Path:
    """The bundled sample guild export (package data of ``bot``)."""
    return Path(__file__).resolve().parents[1] / "data" / SAMPLE_NAME


@reports_errors
def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    if not 0 <= args.port <= 65535:
        raise CliError(f"guildlore demo: --port must be 0..65535, got {args.port}", 2)
    if args.data_dir is not None:
        data_dir, temporary = Path(args.data_dir), False
    else:
        data_dir, temporary = Path(tempfile.mkdtemp(prefix="guildlore-demo-")), True
    try:
        return asyncio.run(_main(args, data_dir, started))
    finally:
        if temporary and not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
        elif temporary:
            print(f"guildlore demo: data kept in {data_dir}", file=sys.stderr)


async def _main(args: argparse.Namespace, data_dir: Path, started: float) -> int:
    from bot.commands.import_ import stop_on_signals
    from memory import (
        ConfigError,
        ImportStop,
        Memory,
        MemoryConfig,
        RuleExtractor,
        import_files,
        read_header,
    )

    sample = sample_path()
    guild_id = read_header(sample).guild_id or ""
    stop = ImportStop()
    loop = asyncio.get_running_loop()
    err = sys.stderr
    print(
        f"guildlore demo: data dir {data_dir} (offline: rule extractor, local embeddings)", file=err
    )
    with stop_on_signals(stop, loop):
        memory = await Memory.open(MemoryConfig.for_data_dir(data_dir), extractor=RuleExtractor())
        runner: Any = None
        try:
            progress = Progress(sample.stat().st_size, label="loading sample guild")
            report = await import_files(memory, [sample], progress=progress, stop=stop)
            progress.finish()
            if report.errors:
                raise CliError(
                    "guildlore demo: the bundled sample is unreadable: " + report.errors[0]
                )
            if stop.requested.is_set():
                return 130
            await memory.refresh_snapshot()
            holds = await memory_holds(memory, guild_id)
            examples = await example_queries(memory, guild_id)
            examples += await when_examples(memory, guild_id)
            try:
                runner = await _serve(memory, args.host, args.port)
            except ConfigError as exc:
                raise CliError(f"guildlore demo: {exc}", 2) from exc
            except OSError as exc:
                raise CliError(
                    f"guildlore demo: cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); "
                    "pick another port with --port, or --port 0 for any free one",
                    2,
                ) from exc
            from dashboard.server import bound_port

            base = f"http://{_url_host(args.host)}:{bound_port(runner)}"
            _print_ready(
                base, guild_id, data_dir, report, holds, examples, time.monotonic() - started
            )
            await stop.requested.wait()
            print("guildlore demo: shutting down", file=err)
            return 0
        finally:
            if runner is not None:
                with contextlib.suppress(Exception):
                    await runner.cleanup()
            await memory.close(drain_timeout=1.0)


async def _serve(memory: Memory, host: str, port: int) -> Any:
    from dashboard.app import DashboardConfig
    from dashboard.server import start_dashboard

    token = os.environ.get("DASHBOARD_TOKEN") or None
    return await start_dashboard(memory, DashboardConfig(host=host, port=port, token=token))


def _url_host(host: str) -> str:
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _print_ready(
    base: str,
    guild_id: str,
    data_dir: Path,
    report: Any,
    holds: dict[str, int],
    examples: list[tuple[str, int, str]],
    seconds: float,
) -> None:
    out = sys.stdout
    per_100 = 100 * holds["facts"] / max(1, holds["messages"])
    lines = [
        "",
        f"{READY_LINE} {base}/   (ready in {seconds:.1f} s)",
        f"  sample guild {guild_id}: {report.stats.messages} messages imported "
        "(stretches of a real channel, every message in them)",
        f"  the memory holds: {holds['facts']} facts about {holds['members_with_facts']} of "
        f"{holds['members']} members, {holds['lore']} lore lines, "
        f"{holds['messages']} searchable past messages ({per_100:.1f} facts per 100 messages)",
        f"  people and facts:  {base}/guilds/{guild_id}",
        f"  MEMORY.md:         {base}/snapshot   (JSON: {base}/api/memory)",
        f"  daily journals:    {base}/journal",
    ]
    if examples:
        lines.append("  example searches (each returns hits on the sample; facts and messages):")
        for query, hits, top in examples:
            q = urllib.parse.quote(query)
            lines.append(f'    "{query}"  ({hits} hit{"s" if hits != 1 else ""}; top: {top})')
            lines.append(f"      {base}/search?q={q}&guildId={guild_id}")
        first = examples[0][0]
        q = urllib.parse.quote(first)
        lines.append(f"  JSON API:          {base}/api/memory/search?q={q}&guildId={guild_id}")
        lines.append(
            f'  from a terminal:   guildlore search "{first}" --guild {guild_id} '
            f"--data-dir {data_dir}"
        )
    lines.append("Press Ctrl-C to stop.")
    print("\n".join(lines), file=out, flush=True)


# -- example searches -----------------------------------------------------------------------

_LEAD = re.compile(
    r"^(?:is|are|was|has|have|had|works?|working|lives?|loves?|likes?|enjoys?|hates?|"
    r"is\s+working|is\s+learning|learns?|studies|studying|uses?|plays?|speaks?|"
    r"is\s+interested|interested|only|also|a|an|the|on|in|as|at|of|for|to|with|"
    r"starting|being|been|good|huge|real|over)\s+",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W_][\w'-]*", re.UNICODE)


def query_from_fact(fact: str, subject_name: str) -> str | None:
    """A short search phrase from a fact: its object, without the name and the verb."""
    text = fact.strip().rstrip(".!?")
    for name in sorted({subject_name, subject_name.split(" ")[0]}, key=len, reverse=True):
        if name and text.lower().startswith(name.lower()):
            text = text[len(name) :].lstrip()
            break
    text = re.sub(r"^'s\s+", "", text)
    previous = None
    while previous != text:
        previous = text
        text = _LEAD.sub("", text, count=1)
    words = [w for w in _WORD.findall(text) if len(w) >= 3][:3]
    if not words:
        return None
    return " ".join(words).lower()


async def memory_holds(memory: Memory, guild_id: str) -> dict[str, int]:
    """What the guild's memory holds: current facts about members, lore lines,
    members (with facts), searchable messages."""
    from memory import LORE_SUBJECT

    members = await memory.guilds.members(guild_id)
    lore = await memory.facts.find(guild_id, subject=LORE_SUBJECT, limit=1000)
    overview = {g["guild_id"]: g for g in await memory.guilds.overview()}.get(guild_id, {})
    return {
        "facts": sum(int(m.get("facts") or 0) for m in members),
        "lore": len(lore),
        "members": len(members),
        "members_with_facts": sum(1 for m in members if m.get("facts")),
        "messages": int(overview.get("messages") or 0),
    }


async def when_examples(memory: Memory, guild_id: str) -> list[tuple[str, int, str]]:
    """(question, hits, top hit) for the "when did we talk about …?" questions
    whose first hit is a past message: its date and author, then its text."""
    from memory import DEFAULT_SEARCH_SCOPE

    out: list[tuple[str, int, str]] = []
    for question in WHEN_QUESTIONS:
        hits = await memory.search(guild_id, question, limit=10, scope=DEFAULT_SEARCH_SCOPE)
        if hits and hits[0].kind == "message":
            top = hits[0]
            said = f"{top.created_at[:10]}, {top.author_name or 'someone'}: {top.text}"
            out.append((question, len(hits), " ".join(said.split())[:160]))
    return out


def _snowflake(message_id: str | None) -> int:
    return int(message_id) if message_id and message_id.isdigit() else 0


async def example_queries(
    memory: Memory, guild_id: str, wanted: int = EXAMPLES
) -> list[tuple[str, int, str]]:
    """(query, hits, top hit text) for a few queries taken from real facts and checked."""
    from memory import DEFAULT_SEARCH_SCOPE

    facts = await memory.facts.find(guild_id, limit=200)
    names = {
        m["user_id"]: m.get("display_name") or "" for m in await memory.guilds.members(guild_id)
    }
    # Higher confidence first; one example per person and per fact type where possible.
    # Ties by the source message's place in the history, not by fact id: ids
    # follow the order concurrent batches finished in, so the printed examples
    # changed from one run to the next.
    facts.sort(key=lambda f: (-f.confidence, _snowflake(f.source_message_id), f.fact))
    chosen: list[tuple[str, int, str]] = []
    seen_subjects: set[str] = set()
    seen_types: set[str] = set()
    seen_queries: set[str] = set()
    for strict_types in (True, False):
        for fact in facts:
            if len(chosen) >= wanted:
                return chosen
            if fact.subject in seen_subjects or (strict_types and fact.fact_type in seen_types):
                continue
            query = query_from_fact(fact.fact, names.get(fact.subject, ""))
            if query is None or query in seen_queries:
                continue
            hits = await memory.search(guild_id, query, limit=10, scope=DEFAULT_SEARCH_SCOPE)
            if not hits:
                continue
            seen_queries.add(query)
            seen_subjects.add(fact.subject)
            seen_types.add(fact.fact_type)
            chosen.append((query, len(hits), hits[0].text))
    return chosen
