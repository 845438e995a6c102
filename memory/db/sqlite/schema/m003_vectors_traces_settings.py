"""Migration m003: vectors traces settings. Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # Vectors are stored as blobs per (row, model) — the source of truth — and
    # mirrored into one sqlite-vec vec0 index per model (created on demand by
    # the store, because its dimension depends on the model), partitioned by
    # guild. Different models never share an index.
    con.executescript(
        """
        CREATE TABLE embedding_models (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            model TEXT NOT NULL UNIQUE,
            dims INTEGER NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE TABLE memory_fact_vectors (
            fact_id INTEGER NOT NULL REFERENCES memory_facts (id) ON DELETE CASCADE,
            model TEXT NOT NULL,
            dims INTEGER NOT NULL,
            guild_id TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            embedding BLOB NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (fact_id, model)
        );
        CREATE INDEX fact_vectors_model ON memory_fact_vectors (model, guild_id);
        CREATE TABLE message_vectors (
            message_seq INTEGER NOT NULL REFERENCES messages (seq) ON DELETE CASCADE,
            model TEXT NOT NULL,
            dims INTEGER NOT NULL,
            guild_id TEXT NOT NULL,
            embedding BLOB NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (message_seq, model)
        );
        CREATE INDEX message_vectors_model ON message_vectors (model, guild_id);

        CREATE TABLE memory_traces (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            guild_id TEXT NOT NULL,
            channel_id TEXT,
            message_id TEXT,
            reply_id TEXT,
            fact_id INTEGER,
            action TEXT NOT NULL CHECK (action IN ('retrieved', 'stored', 'updated')),
            content TEXT NOT NULL,
            score REAL,
            score_parts TEXT,
            created_at TEXT NOT NULL
        );
        CREATE INDEX traces_message ON memory_traces (guild_id, message_id);
        CREATE INDEX traces_channel ON memory_traces (guild_id, channel_id, id);
        CREATE INDEX traces_fact ON memory_traces (fact_id);

        CREATE TABLE guild_settings (
            guild_id TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (guild_id, key)
        );
        CREATE TABLE voice_opt_outs (
            guild_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (guild_id, user_id)
        );
        """
    )
