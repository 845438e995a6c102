"""Migration m022: the messages whose journal line is owed, found at once.
Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # A message processed ('done') whose journal line could not be written (a
    # full or read-only disk) keeps ``journaled = 0``: its line is owed, and
    # written at the next start. Health and doctor count them; this partial
    # index holds only those rows, so counting them reads nothing else. (With
    # the journal rendered from PostgreSQL nothing is appended, so nothing is
    # owed there: SQLite only.)
    con.execute(
        "CREATE INDEX IF NOT EXISTS messages_journal_owed ON messages (seq) "
        "WHERE state = 'done' AND journaled = 0"
    )
