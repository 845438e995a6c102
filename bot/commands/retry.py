"""``guildlore retry``: process again the messages whose processing failed.

A message waits in state ``retry`` after a failed attempt (an LLM outage, a
failed batch) and the engine tries it again on its own, with a growing
back-off; after ``ingest.retry_max_attempts`` failures, or when its own data
broke a step, it is ``failed`` and stays so until an operator asks. This
command is that ask: it gives every failed message (of ``--guild``) a fresh
set of attempts, tries them and every message waiting for a retry now, and
waits for the result. ``--list`` only shows them, with the reason.

Exit status: 0 when nothing is left waiting or failed, 3 when some are (the
summary says which), 2 for usage errors, 1 for anything else.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from bot.commands._common import (
    CliError,
    add_config_argument,
    load_cli_settings,
    open_memory,
    reports_errors,
)

EXIT_INCOMPLETE = 3
LIST_LIMIT = 500


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--guild", default=None, metavar="ID", help="only this guild's messages")
    parser.add_argument(
        "--list", action="store_true", help="show the failed and waiting messages; retry nothing"
    )
    parser.add_argument(
        "--extractor",
        choices=("auto", "llm", "rules"),
        default=None,
        help="fact extractor (default: the llm.extractor setting)",
    )
    parser.add_argument(
        "--embeddings",
        choices=("local", "openai", "none"),
        default=None,
        help="embedding provider (default: the embedding.provider setting)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_config_argument(parser)


@reports_errors
def run(args: argparse.Namespace) -> int:
    if args.guild is not None and not (args.guild.isascii() and args.guild.isdigit()):
        raise CliError(f"guildlore retry: --guild must be a Discord id, got {args.guild!r}", 2)
    settings = load_cli_settings(
        args, {"llm_extractor": args.extractor, "embedding_provider": args.embeddings}
    )
    if not settings.database_exists:
        raise CliError(f"guildlore retry: no database at {settings.database_label}", 1)
    return asyncio.run(_main(args, settings))


async def _main(args: argparse.Namespace, settings: Any) -> int:
    guilds = None if args.guild is None else [args.guild]
    async with open_memory(settings, ingest=True, drain_timeout=0.1) as memory:
        inbox = memory.inbox
        if args.list:
            rows = await inbox.failures(args.guild, limit=LIST_LIMIT)
            _print_list(rows, args.json)
            return EXIT_INCOMPLETE if rows else 0
        before = _problems(await inbox.unfinished_counts(guilds))
        requeued = await inbox.retry_failed(args.guild)
        queued = await memory.replay.retry_now()
        await memory.settle(timeout=24 * 3600)
        after = await inbox.unfinished_counts(guilds)
    left = _problems(after)
    result = {
        "failed_before": before["failed"],
        "waiting_before": before["retry"],
        "requeued_failed": requeued,
        "tried": queued,
        "still_waiting": left["retry"],
        "still_failed": left["failed"],
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"Retried {queued} messages ({requeued} of them had failed): "
            f"{left['retry']} still wait for a retry, {left['failed']} failed."
        )
        if left["retry"] or left["failed"]:
            print(
                "guildlore retry: `guildlore retry --list` shows the reasons; the bot keeps "
                "retrying the waiting ones on its own",
                file=sys.stderr,
            )
    return EXIT_INCOMPLETE if left["retry"] or left["failed"] else 0


def _problems(counts: dict[str, int]) -> dict[str, int]:
    return {"retry": counts.get("retry", 0), "failed": counts.get("failed", 0)}


def _print_list(rows: list[Any], as_json: bool) -> None:
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "id": r.id,
                        "guild_id": r.guild_id,
                        "channel_id": r.channel_id,
                        "author": r.author_name,
                        "created_at": r.created_at,
                        "state": r.state,
                        "attempts": r.attempts,
                        "retry_at": r.retry_at,
                        "reason": r.reason,
                        "content": r.content[:200],
                    }
                    for r in rows
                ],
                indent=2,
            )
        )
        return
    if not rows:
        print("No message waits for a retry or has failed.")
        return
    for r in rows:
        when = f"next try {r.retry_at}" if r.state == "retry" else "given up"
        print(
            f"{r.state:<6} {r.id} guild {r.guild_id} channel {r.channel_id}, "
            f"{r.attempts} failed attempt{'s' if r.attempts != 1 else ''}, {when}"
        )
        print(f"       {r.author_name}: {r.content[:100]!r}")
        print(f"       reason: {r.reason}")
    if len(rows) >= LIST_LIMIT:
        print(f"(the first {LIST_LIMIT} shown)")
