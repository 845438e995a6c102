"""``guildlore migrate-db --from sqlite:///PATH --to postgresql://…``: copy a
SQLite memory into a PostgreSQL database (``memory.store.copy_db``).

Streamed and resumable: run it again after an interruption and it goes on
from the last batch that committed. At the end it compares every table's
row count and exits 1 if any differ. Stop the bot first: rows written to the
SQLite file during the copy may be missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from bot.commands._common import CliError, reports_errors
from memory import CopyReport, GuildloreError, copy_sqlite_to_postgres


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="sqlite:///PATH",
        help="the SQLite database file to copy (a sqlite:/// URL or a path)",
    )
    parser.add_argument(
        "--to",
        dest="target",
        required=True,
        metavar="postgresql://…",
        help="the PostgreSQL database to copy into (empty, or a copy in progress)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def sqlite_path(source: str) -> Path:
    """``sqlite:///rel/path``, ``sqlite:////abs/path`` or a plain path."""
    if source.startswith("sqlite:///"):
        return Path(source[len("sqlite:///") :])
    if "://" in source:
        raise CliError(f"guildlore migrate-db: --from must be a sqlite:/// URL, got {source!r}", 2)
    return Path(source)


def _progress(table: str, done: int, total: int) -> None:
    print(f"\r{table}: {done}/{total}", end="", file=sys.stderr, flush=True)


@reports_errors
def run(args: argparse.Namespace) -> int:
    path = sqlite_path(str(args.source))
    if not path.is_file():
        raise CliError(f"guildlore migrate-db: no SQLite database at {path}", 1)
    target = str(args.target)
    if target.split(":", 1)[0] not in {"postgresql", "postgres"}:
        raise CliError("guildlore migrate-db: --to must be a postgresql:// URL", 2)
    try:
        report = asyncio.run(asyncio.to_thread(_copy, str(path), target, not args.json))
    except GuildloreError as exc:
        raise CliError(f"guildlore migrate-db: {exc}", 1) from exc
    if args.json:
        print(
            json.dumps(
                {
                    "ok": report.ok,
                    "resumed": report.resumed,
                    "tables": {
                        n: {"source": s, "target": t} for n, (s, t) in report.tables.items()
                    },
                    "vectorIndexes": report.vectors,
                },
                indent=2,
            )
        )
    else:
        print(file=sys.stderr)
        rows = sum(s for s, _ in report.tables.values())
        print(
            f"Copied {len(report.tables)} tables, {rows} rows"
            + (" (resumed)" if report.resumed else "")
            + "; vector indexes: "
            + (", ".join(f"{k} {v}" for k, v in report.vectors.items()) or "none")
        )
        for line in report.mismatches():
            print(f"MISMATCH {line}", file=sys.stderr)
    return 0 if report.ok else 1


def _copy(path: str, target: str, show: bool) -> CopyReport:
    return copy_sqlite_to_postgres(path, target, progress=_progress if show else None)
