"""Migration m012: traces. Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # A trace says what kind of memory it was (facts, lore, episodes, ...) and
    # where it came from (extractor, lore, operator, member, import, voice).
    # reply_contexts keeps what one reply's model saw (system prompt with the
    # memory sections, the window, the lookups and their results) as bounded
    # JSON; reply_context_refs names the messages, facts and members it
    # holds, so erasing any of them erases the context too.
    con.executescript(
        """
        ALTER TABLE memory_traces ADD COLUMN memory_type TEXT;
        ALTER TABLE memory_traces ADD COLUMN source TEXT;
        CREATE TABLE reply_contexts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            guild_id TEXT NOT NULL,
            channel_id TEXT,
            message_id TEXT NOT NULL,
            reply_id TEXT,
            context TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX reply_contexts_message ON reply_contexts (guild_id, message_id);
        CREATE TABLE reply_context_refs (
            context_id INTEGER NOT NULL REFERENCES reply_contexts (id) ON DELETE CASCADE,
            guild_id TEXT NOT NULL,
            ref TEXT NOT NULL
        );
        CREATE INDEX reply_context_refs_ref ON reply_context_refs (guild_id, ref);
        CREATE INDEX reply_context_refs_context ON reply_context_refs (context_id);
        """
    )
