"""``guildlore reindex``: embed every fact and message that has no vector yet.

Missing vectors appear after a crash mid-import, after changing a guild's
embedding model (vectors of different models never mix), or after running
with embeddings turned off. Safe to interrupt and run again.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from bot.commands._common import (
    CliError,
    add_config_argument,
    load_cli_settings,
    open_memory,
    reports_errors,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--embeddings",
        choices=("local", "openai"),
        default=None,
        help="embedding provider (default: the embedding.provider setting)",
    )
    add_config_argument(parser)


@reports_errors
def run(args: argparse.Namespace) -> int:
    settings = load_cli_settings(args, {"embedding_provider": args.embeddings})
    if settings.embedding_provider == "none":
        raise CliError(
            "guildlore reindex: embeddings are turned off (embedding.provider = none)", 2
        )
    if not settings.database_exists:
        raise CliError(f"guildlore reindex: no database at {settings.database_label}", 1)
    return asyncio.run(_main(settings))


async def _main(settings: Any) -> int:
    err = sys.stderr
    tty = err.isatty()
    started = time.monotonic()
    last = [0.0]
    counts = {"facts": 0, "messages": 0}

    def progress(kind: str, done: int) -> None:
        counts[kind] = done
        now = time.monotonic()
        if now - last[0] < (0.2 if tty else 5.0):
            return
        last[0] = now
        rate = (counts["facts"] + counts["messages"]) / max(1e-6, now - started)
        line = (
            f"reindexing: {counts['facts']} facts, {counts['messages']} messages embedded "
            f"({rate:,.0f}/s)"
        )
        err.write(("\r" + line) if tty else line + "\n")
        err.flush()

    from memory import GuildloreError

    async with open_memory(settings, ingest=False) as memory:
        try:
            # A foreground command: nothing to yield the cores to.
            report = await memory.admin.reindex(progress=progress, foreground=True)
        except GuildloreError as exc:
            raise CliError(f"guildlore reindex: {exc} (run it again to continue)", 1) from exc
    if tty and last[0]:
        err.write("\n")
    took = time.monotonic() - started
    print(
        f"Reindexed in {took:.1f} s: {report.facts} fact vectors and "
        f"{report.messages} message vectors written."
    )
    if report.errors:
        print(
            f"guildlore reindex: {report.errors} embedding errors; last: {report.last_error}",
            file=err,
        )
        return 1
    return 0
