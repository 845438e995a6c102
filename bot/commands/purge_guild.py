"""``guildlore purge-guild GUILD_ID``: erase all of a guild's memory at once,
as a due ``guild_leave_policy`` of ``purge:Nd`` does.

``Memory.retention.purge_guild`` deletes the guild's messages, facts, vectors,
FTS rows, traces, history, settings and timers, removes its journal lines,
regenerates MEMORY.md and rewrites the database file so no byte of it is
left; one ``guild_purged`` action-log row (counts only) records it. It asks
before erasing unless ``--yes`` is given (or stdin is not a terminal, where
it refuses instead).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from typing import Any

from bot.commands._common import (
    CliError,
    add_config_argument,
    load_cli_settings,
    open_memory,
    reports_errors,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("guild", metavar="GUILD_ID", help="the guild whose memory goes")
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_config_argument(parser)


@reports_errors
def run(args: argparse.Namespace) -> int:
    guild = str(args.guild).strip()
    if not (guild.isascii() and guild.isdigit() and len(guild) <= 20):
        raise CliError(f"guildlore purge-guild: GUILD_ID must be a Discord id, got {guild!r}", 2)
    settings = load_cli_settings(args)
    if not settings.database_exists:
        raise CliError(f"guildlore purge-guild: no database at {settings.database_label}", 1)
    if not args.yes:
        if not sys.stdin.isatty():
            raise CliError(
                "guildlore purge-guild: refusing to erase without --yes (stdin is not a terminal)",
                2,
            )
        answer = input(
            f"Erase ALL memory of guild {guild} (messages, facts, journals, settings)? "
            "This cannot be undone. [y/N] "
        )
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing erased")
            return 1
    return asyncio.run(_main(args, settings, guild))


async def _main(args: argparse.Namespace, settings: Any, guild: str) -> int:
    async with open_memory(settings, ingest=False) as memory:
        report = await memory.retention.purge_guild(guild, actor="operator:cli")
    if args.json:
        print(json.dumps(asdict(report), indent=2))
    else:
        print(
            f"Purged guild {guild}: {report.messages} messages, {report.facts} facts, "
            f"{sum(report.rows.values())} rows in all, {report.journal_lines} journal lines. "
            "MEMORY.md regenerated, database file rewritten."
        )
    return 0
