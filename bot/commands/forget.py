"""``guildlore forget --guild G --user U``: erase a member, as ``/memory forget-me`` does;
``guildlore forget --user U --all-guilds``: erase a user from every guild at once (what
Discord asks of a bot's owner when an account is deleted), with one receipt.

``Memory.forget`` removes the member's facts, vectors, FTS rows, messages and
traces, redacts their journal lines, regenerates MEMORY.md and leaves one
``forget`` history row without content, and a deletion receipt (its id is
printed; ``guildlore receipt ID`` shows it again and checks it). It asks
before erasing unless ``--yes`` is given (or stdin is not a terminal, where
it refuses instead). A guild or member the database does not know is exit
status 1 with a message, and nothing is touched.
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
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--guild", metavar="ID", help="guild id")
    where.add_argument(
        "--all-guilds",
        action="store_true",
        help="erase the user from every guild at once (a deleted Discord account)",
    )
    parser.add_argument("--user", required=True, metavar="ID", help="member's Discord user id")
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_config_argument(parser)


def _snowflake(value: str, flag: str) -> str:
    value = value.strip()
    if not (value.isascii() and value.isdigit() and len(value) <= 20):
        raise CliError(f"guildlore forget: {flag} must be a Discord id, got {value!r}", 2)
    return value


@reports_errors
def run(args: argparse.Namespace) -> int:
    guild = None if args.all_guilds else _snowflake(args.guild, "--guild")
    user = _snowflake(args.user, "--user")
    settings = load_cli_settings(args)
    if not settings.database_exists:
        raise CliError(f"guildlore forget: no database at {settings.database_label}", 1)
    if not args.yes:
        if not sys.stdin.isatty():
            raise CliError(
                "guildlore forget: refusing to erase without --yes (stdin is not a terminal)", 2
            )
        where = "in every guild" if guild is None else f"in guild {guild}"
        answer = input(
            f"Erase everything remembered about user {user} {where}? This cannot be undone. [y/N] "
        )
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing erased")
            return 1
    return asyncio.run(_main(args, settings, guild, user))


async def _main(args: argparse.Namespace, settings: Any, guild: str | None, user: str) -> int:
    async with open_memory(settings, ingest=False) as memory:
        if guild is None:
            report = await memory.erasure.forget_everywhere(user, actor="operator:cli")
        else:
            known = {str(g["guild_id"]) for g in await memory.guilds.overview()}
            if guild not in known:
                raise CliError(
                    f"guildlore forget: no guild {guild} in this database (known: "
                    f"{', '.join(sorted(known)) or 'none'}); nothing erased",
                    1,
                )
            if not await memory.members.known(guild, user):
                # A typo in the id must not read as a successful erase.
                raise CliError(
                    f"guildlore forget: guild {guild} holds nothing of user {user} "
                    "(no messages, facts or member row); nothing erased",
                    1,
                )
            report = await memory.forget(guild, user, actor="operator:cli")
    if args.json:
        print(json.dumps(asdict(report), indent=2))
    else:
        where = f"{report.guilds} guilds" if guild is None else f"guild {guild}"
        print(
            f"Erased user {user} from {where}: {report.facts} facts, {report.vectors} "
            f"vectors, {report.messages} messages, {report.traces} traces, "
            f"{report.journal_lines} journal lines. MEMORY.md regenerated.\n"
            f"Deletion receipt: {report.receipt_id}"
        )
    return 0
