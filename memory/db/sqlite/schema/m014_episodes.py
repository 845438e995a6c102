"""Migration m014: episodes. Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # An episode is a memory_facts row (fact_type 'episode', channel_id its
    # channel), so it is embedded, FTS-indexed, searched and gated by channel
    # like any fact; its source messages are its fact_sources rows. This table
    # holds what only an episode has: its time span and how it was written.
    # episode_marks: per channel, the last message an episode covered (or the
    # summariser passed over), so each message is summarised once.
    # episode_rebuilds: episodes retracted because some of their messages went
    # away, waiting to be written again from the messages that remain.
    con.executescript(
        """
        CREATE TABLE episodes (
            fact_id INTEGER PRIMARY KEY,
            guild_id TEXT NOT NULL,
            channel_id TEXT NOT NULL,
            started_at TEXT NOT NULL,
            ended_at TEXT NOT NULL,
            message_count INTEGER NOT NULL,
            method TEXT NOT NULL CHECK (method IN ('llm', 'extractive')),
            created_at TEXT NOT NULL
        );
        CREATE INDEX episodes_channel ON episodes (guild_id, channel_id, ended_at);
        CREATE TRIGGER episodes_fact_deleted AFTER DELETE ON memory_facts
        WHEN old.fact_type = 'episode' BEGIN
            DELETE FROM episodes WHERE fact_id = old.id;
        END;
        CREATE TABLE episode_marks (
            guild_id TEXT NOT NULL,
            channel_id TEXT NOT NULL,
            last_created_at TEXT NOT NULL,
            last_seq INTEGER NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (guild_id, channel_id)
        );
        CREATE TABLE episode_rebuilds (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            guild_id TEXT NOT NULL,
            channel_id TEXT NOT NULL,
            message_ids TEXT NOT NULL,
            queued_at TEXT NOT NULL
        );
        """
    )
