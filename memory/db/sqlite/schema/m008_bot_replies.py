"""Migration m008: bot replies. Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # The bot's own posted replies, kept only as the conversation window's
    # assistant turns: a table of their own (no FTS, no vectors, no
    # extraction), so a reply can never come back as searchable memory.
    con.executescript(
        """
        CREATE TABLE bot_replies (
            message_id TEXT PRIMARY KEY,
            guild_id TEXT NOT NULL,
            channel_id TEXT NOT NULL,
            reply_to_id TEXT,
            to_user_id TEXT NOT NULL,
            content TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX bot_replies_channel ON bot_replies (guild_id, channel_id, created_at);
        CREATE INDEX bot_replies_user ON bot_replies (guild_id, to_user_id);
        """
    )
