"""``guildlore consolidate [--guild GUILD_ID] [--dry-run] [--undo RUN_ID]``:
run the daily consolidation now, preview it, or undo a run. With an LLM
configured, it judges the pairs offline rules cannot.

Without ``--guild`` every guild with active facts gets a run. ``--dry-run``
writes the report of what a run would change and changes nothing.
``--undo RUN_ID`` (with ``--guild``) puts back exactly the facts that run
changed, refused when one of them changed again since."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from bot.commands._common import (
    CliError,
    add_config_argument,
    load_cli_settings,
    open_memory,
    reports_errors,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--guild", metavar="GUILD_ID", help="only this guild")
    parser.add_argument(
        "--dry-run", action="store_true", help="report what would change, change nothing"
    )
    parser.add_argument("--undo", metavar="RUN_ID", type=int, help="undo this run (needs --guild)")
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")
    add_config_argument(parser)


def _guild(value: str | None) -> str | None:
    if value is None:
        return None
    guild = value.strip()
    if not (guild.isascii() and guild.isdigit() and len(guild) <= 20):
        raise CliError(f"guildlore consolidate: --guild must be a Discord id, got {value!r}", 2)
    return guild


@reports_errors
def run(args: argparse.Namespace) -> int:
    guild = _guild(args.guild)
    if args.undo is not None and guild is None:
        raise CliError("guildlore consolidate: --undo needs --guild", 2)
    settings = load_cli_settings(args)
    if not settings.database_exists:
        raise CliError(f"guildlore consolidate: no database at {settings.database_label}", 1)
    return asyncio.run(_main(args, settings, guild))


async def _main(args: argparse.Namespace, settings: Any, guild: str | None) -> int:
    from memory import ChatModel, InvalidInput, PairChecker

    llm = settings.llm_config()
    checker = PairChecker.from_chat(ChatModel.from_config(llm)) if llm.enabled else None
    async with open_memory(settings, ingest=False) as memory:
        if args.undo is not None:
            assert guild is not None
            try:
                restored = await memory.consolidation.undo(guild, args.undo, actor="operator:cli")
            except InvalidInput as exc:
                raise CliError(f"guildlore consolidate: {exc}", 1) from exc
            print(f"Run {args.undo} undone: {len(restored)} facts restored.")
            return 0
        if guild is None:
            reports = await memory.consolidation.run_all(dry_run=args.dry_run, checker=checker)
        else:
            reports = [await memory.consolidation.run(guild, dry_run=args.dry_run, checker=checker)]
    if args.json:
        print(json.dumps([r.report | {"guild_id": r.guild_id} for r in reports], indent=2))
        return 0
    for r in reports:
        rep = r.report
        changes = rep["proposed"] if r.dry_run else rep.get("applied", [])
        verb = "would change" if r.dry_run else "changed"
        print(
            f"guild {r.guild_id}, run {r.run_id}{' (dry run)' if r.dry_run else ''}: "
            f"{rep['candidates']} candidates, {rep['checked']} pairs checked "
            f"({rep['skipped_recent']} skipped, checked in the last 14 days); {verb} {len(changes)}"
        )
        for a in changes:
            print(f"  {a['action']}: fact {a['drop']} -> fact {a['keep']} ({a['reason']})")
    if not reports:
        print("no guild has active facts")
    return 0
