"""Migration m009: procedures. Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # How a guild wants the bot to behave, set by its moderators: guild-wide
    # (channel_id NULL) or for one channel. A table of their own, never in the
    # facts' FTS or vectors, so search can never return one.
    con.executescript(
        """
        CREATE TABLE procedures (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            guild_id TEXT NOT NULL,
            channel_id TEXT,
            text TEXT NOT NULL,
            author TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX procedures_scope ON procedures (guild_id, channel_id, id);
        """
    )
