"""Migration m001: core. Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    con.executescript(
        """
        CREATE TABLE messages (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            guild_id TEXT NOT NULL,
            channel_id TEXT NOT NULL,
            author_id TEXT NOT NULL,
            author_name TEXT NOT NULL,
            content TEXT NOT NULL,
            created_at TEXT NOT NULL,
            source TEXT NOT NULL CHECK (source IN ('text', 'voice', 'import')),
            is_bot INTEGER NOT NULL DEFAULT 0,
            reply_to_id TEXT,
            state TEXT NOT NULL DEFAULT 'pending',
            state_reason TEXT,
            journaled INTEGER NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 0,
            received_at TEXT NOT NULL,
            processed_at TEXT
        );
        CREATE INDEX messages_guild_channel_time ON messages (guild_id, channel_id, created_at);
        CREATE INDEX messages_guild_author ON messages (guild_id, author_id);
        CREATE INDEX messages_unfinished ON messages (state) WHERE state != 'done';

        CREATE TABLE memory_facts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            guild_id TEXT NOT NULL,
            channel_id TEXT,
            subject TEXT NOT NULL,
            fact TEXT NOT NULL,
            fact_type TEXT NOT NULL DEFAULT 'other',
            evidence_text TEXT,
            source_message_id TEXT,
            confidence REAL NOT NULL DEFAULT 0.5,
            is_active INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (guild_id, subject, fact)
        );
        CREATE INDEX facts_subject ON memory_facts (guild_id, subject, is_active, updated_at);
        CREATE INDEX facts_guild ON memory_facts (guild_id, is_active, updated_at);

        CREATE TABLE fact_history (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            guild_id TEXT NOT NULL,
            fact_id INTEGER,
            subject TEXT,
            event TEXT NOT NULL,
            old_text TEXT,
            new_text TEXT,
            actor TEXT NOT NULL,
            source_message_id TEXT,
            reason TEXT,
            created_at TEXT NOT NULL
        );
        CREATE INDEX history_fact ON fact_history (fact_id, id);

        CREATE TABLE action_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            guild_id TEXT,
            subject TEXT,
            kind TEXT NOT NULL,
            message TEXT NOT NULL,
            detail TEXT,
            created_at TEXT NOT NULL
        );
        CREATE INDEX action_log_kind ON action_log (kind, id);

        CREATE TABLE guilds (
            guild_id TEXT PRIMARY KEY,
            name TEXT,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE channels (
            guild_id TEXT NOT NULL,
            channel_id TEXT NOT NULL,
            name TEXT,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (guild_id, channel_id)
        );
        CREATE TABLE members (
            guild_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            display_name TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (guild_id, user_id)
        );
        """
    )
