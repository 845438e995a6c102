"""``guildlore run``: the Discord bot with its dashboard and scheduled jobs."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="TOML settings file (default: GUILDLORE_CONFIG; see docs/operating/settings.md)",
    )
    parser.add_argument(
        "--shard-ids",
        default=None,
        metavar="IDS",
        help="Discord shards this process holds, e.g. 0,1 (setting discord.shard_ids); "
        "other processes hold the rest on the same database",
    )
    parser.add_argument(
        "--shard-count",
        type=int,
        default=None,
        metavar="N",
        help="number of Discord shards across all processes (setting discord.shard_count)",
    )


def run(args: argparse.Namespace) -> int:
    from bot import runtime
    from bot.settings import SettingsError, load_settings

    try:
        settings = load_settings(
            config_file=args.config,
            overrides={
                "data_dir": args.data_dir,
                "discord_shard_ids": getattr(args, "shard_ids", None),
                "discord_shard_count": getattr(args, "shard_count", None),
            },
        )
    except SettingsError as exc:
        print(exc.report(), file=sys.stderr)
        return 2
    fake = os.environ.get(runtime.FAKE_GATEWAY_ENV, "").strip() in ("1", "true", "yes")
    if not fake and not settings.discord_token:
        print(runtime.NO_TOKEN_MESSAGE, file=sys.stderr)
        return 2
    from memory import GuildloreError, disk_problem

    try:
        return asyncio.run(runtime.main(settings, fake_gateway=fake))
    except Exception as exc:
        problem = disk_problem(exc)
        if problem is not None:  # a full or read-only disk: what to do, in one line
            where = str(settings.resolved_db_path.parent)
            print(f"guildlore run: {problem.line(where, 'start it again')}", file=sys.stderr)
            return 1
        if not isinstance(exc, GuildloreError):
            raise
        # The engine refused to start (storage, embedding model …).
        print(f"guildlore run: {exc}", file=sys.stderr)
        return 1
