"""``guildlore``: one entry point, one subcommand per job.

Each subcommand lives in ``bot/commands/<name>.py`` and exposes
``add_arguments(parser)`` and ``run(args) -> int``; imports happen only when a
subcommand runs, so ``guildlore --help`` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

COMMANDS: dict[str, str] = {
    "run": "Run the Discord bot (with the dashboard).",
    "dashboard": "Serve the dashboard alone against the database (beside bot processes).",
    "demo": "Offline demo: import a bundled sample guild and serve the dashboard.",
    "import": "Import DiscordChatExporter JSON exports or raw Discord API message arrays.",
    "search": "Search a guild's memory from the terminal.",
    "forget": "Erase everything remembered about a member of a guild (or of every guild).",
    "receipt": "Show a deletion receipt and check that what it erased is still gone.",
    "purge-guild": "Erase everything remembered about a guild (all of its memory).",
    "snapshot": "Regenerate and print MEMORY.md.",
    "reindex": "Embed every fact and message that has no vector for its guild's model.",
    "consolidate": "Merge duplicate facts and close contradicted ones now (--dry-run, --undo).",
    "retry": "Process again the messages whose processing failed (--list: show why).",
    "bench": "Run a retrieval benchmark (locomo or longmemeval).",
    "migrate-db": "Copy a SQLite memory into PostgreSQL (streamed, resumable, verified).",
    "doctor": "Check the installation and configuration, and explain what is wrong.",
}

DEFAULT_DATA_DIR = Path("data")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="guildlore",
        description="A Discord bot with long-term, guild-scoped memory and an operator dashboard.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument(
            "--data-dir",
            type=Path,
            default=None,
            help="folder holding the database and the memory_journal folder "
            "(default: GUILDLORE_DATA_DIR or ./data)",
        )
        module = _module(name)
        module.add_arguments(p)
    return parser


def _module(name: str):  # type: ignore[no-untyped-def]
    # "import" is a keyword, so that command's module is bot/commands/import_.py;
    # "purge-guild" is bot/commands/purge_guild.py, "migrate-db" migrate_db.py.
    module = "import_" if name == "import" else name.replace("-", "_")
    return importlib.import_module(f"bot.commands.{module}")


def _database_gone_in_one_line(record: logging.LogRecord) -> bool:
    """Once the process has given up on its database (``DatabaseUnavailable``:
    unreachable past the limit, or damaged), it says why in one line and
    exits; whatever else fails on the way out for the same reason is one
    line too, without a traceback."""
    exc = record.exc_info[1] if record.exc_info else None
    if exc is not None and not record.levelno < logging.WARNING:
        from memory import DatabaseUnavailable

        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, DatabaseUnavailable):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            record.msg, record.args = f"{record.getMessage()}: {cause}", ()
            record.exc_info, record.exc_text = None, None
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for handler in logging.getLogger().handlers:
        handler.addFilter(_database_gone_in_one_line)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return int(_module(args.command).run(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
