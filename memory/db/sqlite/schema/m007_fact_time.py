"""Migration m007: fact time. Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # Facts are dated by their source message, not by when a batch processed
    # it: observed_at is the first observation, last_observed_at the latest,
    # valid_from/valid_to the span the fact was true (valid_to NULL while
    # current). fact_sources links a fact to every message it was observed in.
    # Existing facts take their source message's time, else their created_at.
    con.executescript(
        """
        ALTER TABLE memory_facts ADD COLUMN observed_at TEXT;
        ALTER TABLE memory_facts ADD COLUMN valid_from TEXT;
        ALTER TABLE memory_facts ADD COLUMN valid_to TEXT;
        ALTER TABLE memory_facts ADD COLUMN last_observed_at TEXT;
        UPDATE memory_facts SET observed_at = coalesce((SELECT m.created_at FROM messages m WHERE m.id = memory_facts.source_message_id AND m.guild_id = memory_facts.guild_id), created_at);
        UPDATE memory_facts SET valid_from = observed_at, last_observed_at = observed_at;
        CREATE TABLE fact_sources (
            fact_id INTEGER NOT NULL,
            message_id TEXT NOT NULL,
            guild_id TEXT NOT NULL,
            observed_at TEXT NOT NULL,
            PRIMARY KEY (fact_id, message_id)
        );
        CREATE INDEX fact_sources_message ON fact_sources (guild_id, message_id);
        INSERT INTO fact_sources (fact_id, message_id, guild_id, observed_at) SELECT id, source_message_id, guild_id, observed_at FROM memory_facts WHERE source_message_id IS NOT NULL;
        CREATE TRIGGER fact_sources_fact_deleted AFTER DELETE ON memory_facts BEGIN
            DELETE FROM fact_sources WHERE fact_id = old.id;
        END;
        CREATE TRIGGER fact_sources_message_deleted AFTER DELETE ON messages BEGIN
            DELETE FROM fact_sources WHERE guild_id = old.guild_id AND message_id = old.id;
        END;
        """
    )
