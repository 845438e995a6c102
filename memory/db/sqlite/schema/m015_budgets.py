"""Migration m015: budgets, memory pins, TTL and purge. Shipped: never edit,
add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # memory_pins: facts an operator or their member pinned; a pinned fact is
    # exempt from budgets and expiry. archived_at: when a fact last left the
    # active set (the purge counts its days from then); triggers keep it, so
    # every archive path sets it and a restore clears it. Facts archived
    # before this migration count from their last update.
    con.executescript(
        """
        CREATE TABLE memory_pins (
            fact_id INTEGER PRIMARY KEY,
            guild_id TEXT NOT NULL,
            pinned_by TEXT NOT NULL,
            pinned_at TEXT NOT NULL
        );
        CREATE INDEX memory_pins_guild ON memory_pins (guild_id);
        CREATE TRIGGER memory_pins_fact_deleted AFTER DELETE ON memory_facts BEGIN
            DELETE FROM memory_pins WHERE fact_id = old.id;
        END;
        ALTER TABLE memory_facts ADD COLUMN archived_at TEXT;
        UPDATE memory_facts SET archived_at = updated_at WHERE is_active = 0;
        CREATE INDEX facts_archived ON memory_facts (archived_at) WHERE archived_at IS NOT NULL;
        CREATE TRIGGER facts_archived_at AFTER UPDATE OF is_active ON memory_facts
        WHEN new.is_active = 0 AND old.is_active = 1 BEGIN
            UPDATE memory_facts SET archived_at = new.updated_at WHERE id = new.id;
        END;
        CREATE TRIGGER facts_restored_at AFTER UPDATE OF is_active ON memory_facts
        WHEN new.is_active = 1 AND old.is_active = 0 BEGIN
            UPDATE memory_facts SET archived_at = NULL WHERE id = new.id;
        END;
        """
    )
