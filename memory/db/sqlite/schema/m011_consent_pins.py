"""Migration m011: consent pins. Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # consent_queue: sensitive facts about a member that wait for their
    # answer (accept stores the fact, reject or expiry deletes the row: a
    # pending text is never kept past its decision). A pending fact whose
    # source message is deleted or edited goes with it. canon_pins: the lore
    # fact each pinned message became. messages.edited_at: when Discord (or
    # an imported export) says the message was last edited.
    con.executescript(
        """
        CREATE TABLE consent_queue (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            guild_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            channel_id TEXT,
            message_id TEXT NOT NULL,
            fact TEXT NOT NULL,
            fact_type TEXT NOT NULL,
            evidence_text TEXT,
            confidence REAL NOT NULL,
            category TEXT NOT NULL,
            observed_at TEXT,
            created_at TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            prompted_at TEXT,
            UNIQUE (guild_id, user_id, fact)
        );
        CREATE INDEX consent_member ON consent_queue (guild_id, user_id);
        CREATE INDEX consent_expiry ON consent_queue (expires_at);
        CREATE TRIGGER consent_message_deleted AFTER DELETE ON messages BEGIN
            DELETE FROM consent_queue WHERE guild_id = old.guild_id AND message_id = old.id;
        END;
        CREATE TRIGGER consent_message_edited AFTER UPDATE OF content ON messages BEGIN
            DELETE FROM consent_queue WHERE guild_id = old.guild_id AND message_id = old.id;
        END;
        CREATE TABLE canon_pins (
            guild_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            channel_id TEXT NOT NULL,
            fact_id INTEGER NOT NULL,
            pinned_at TEXT NOT NULL,
            PRIMARY KEY (guild_id, message_id)
        );
        CREATE INDEX canon_pins_fact ON canon_pins (fact_id);
        CREATE TRIGGER canon_pins_fact_deleted AFTER DELETE ON memory_facts BEGIN
            DELETE FROM canon_pins WHERE fact_id = old.id;
        END;
        ALTER TABLE messages ADD COLUMN edited_at TEXT;
        """
    )
