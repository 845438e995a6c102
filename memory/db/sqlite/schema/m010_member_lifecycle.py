"""Migration m010: member lifecycle. Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # lifecycle_events: a message delete or edit from Discord, written before
    # it is applied and removed in the transaction that applies it, so one
    # received before a crash is applied at the next start, and only once;
    # a 'compact' row, written with an erase, stays until the rewrite of the
    # file that drops the erased bytes has run.
    # retention_timers: a scheduled forget of a member who left (user_id set)
    # or purge of a guild that removed the bot (user_id ''); a re-join
    # deletes the row.
    con.executescript(
        """
        CREATE TABLE lifecycle_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL CHECK (kind IN ('delete', 'edit', 'compact')),
            guild_id TEXT NOT NULL,
            message_ids TEXT NOT NULL DEFAULT '[]',
            content TEXT,
            edited_at TEXT,
            received_at TEXT NOT NULL
        );
        CREATE TABLE retention_timers (
            guild_id TEXT NOT NULL,
            user_id TEXT NOT NULL DEFAULT '',
            action TEXT NOT NULL CHECK (action IN ('forget', 'purge')),
            due_at TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (guild_id, user_id)
        );
        CREATE INDEX retention_timers_due ON retention_timers (due_at);
        """
    )
