"""``guildlore snapshot``: regenerate MEMORY.md from the database and print it."""

from __future__ import annotations

import argparse
import asyncio
import sys
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
        "--quiet", "-q", action="store_true", help="regenerate only; print the file's path"
    )
    add_config_argument(parser)


@reports_errors
def run(args: argparse.Namespace) -> int:
    settings = load_cli_settings(args)
    if not settings.database_exists:
        raise CliError(
            f"guildlore snapshot: no database at {settings.database_label} "
            "(import something first, or pass --data-dir)",
            1,
        )
    return asyncio.run(_main(args, settings))


async def _main(args: argparse.Namespace, settings: Any) -> int:
    async with open_memory(settings, ingest=False) as memory:
        text = await memory.refresh_snapshot()
        path = memory.snapshot_path
    if args.quiet:
        print(path)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        print(f"(written to {path})", file=sys.stderr)
    return 0
