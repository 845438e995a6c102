"""``guildlore doctor``'s storage checks: the SQLite file whole, no journal
line owed, nothing an interrupted write left behind, no process writing to
a database file that is gone. The engine does the probing
(``memory.disk_status``); this module explains the results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.commands.doctor_report import Report


def check_storage(report: Report, settings: Any) -> None:
    from memory import disk_status

    if settings.database_url:
        return  # PostgreSQL keeps its own files; its journal is rendered, nothing is owed
    db: Path = settings.resolved_db_path
    journal: Path = settings.resolved_journal_dir
    status = disk_status(db, journal)
    if status.quick_check is not None:
        if status.quick_check:
            report.add(
                "FAIL",
                "database file",
                f"PRAGMA quick_check finds {db} damaged: {'; '.join(status.quick_check[:3])}",
                "stop guildlore, keep a copy of the file, and restore a backup "
                "(or rebuild it: `sqlite3 FILE .recover | sqlite3 NEW`, then check it again)",
            )
        else:
            report.add("ok", "database file", "PRAGMA quick_check finds it whole")
    for holder in status.stale_holders:
        report.add(
            "FAIL",
            "database file",
            f"process {holder.pid} ({holder.command}) still writes to the database file that "
            f"was {holder.state} at {db}: what it writes now is seen by no one",
            "stop that process; "
            + (
                "it was replaced: start it again to use the new file"
                if holder.state == "replaced"
                else "restore the file from a backup before starting it again"
            ),
        )
    if status.journal_owed:
        report.add(
            "warn",
            "journal",
            f"{status.journal_owed} journal lines are owed: their messages are stored, but the "
            "disk refused the lines (full or read-only)",
            "make room; the next start of the bot or an import writes them (a running bot: "
            "within a minute)",
        )
    elif status.journal_owed == 0:
        report.add("ok", "journal", "no journal line owed")
    if status.leftovers:
        report.add(
            "warn",
            "journal",
            f"{len(status.leftovers)} temp files of interrupted writes in {journal} "
            f"({', '.join(status.leftovers[:3])}{'…' if len(status.leftovers) > 3 else ''}); "
            "they may hold text erased since",
            "the next start of the bot or an import removes them",
        )
    if status.unfinished:
        report.add(
            "warn",
            "journal",
            f"{len(status.unfinished)} daily files end in an unfinished line "
            f"({', '.join(status.unfinished[:3])}{'…' if len(status.unfinished) > 3 else ''})",
            "the next start of the bot or an import cuts it and writes the message's line again",
        )
