"""Migration m019: journal days rendered from the database.
Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # A journal day is read as a range of ``created_at`` (fixed-width ISO UTC
    # text, so text order is time order).
    con.execute("CREATE INDEX IF NOT EXISTS messages_created_at ON messages (created_at)")
    # UTC dates (``YYYY-MM-DD``) whose messages were written, deleted, edited,
    # forgotten or purged since the journal files were last rendered; marked
    # in the transaction that made the change.
    con.execute("CREATE TABLE IF NOT EXISTS journal_dirty (day TEXT PRIMARY KEY)")
