"""Migration m002: fts. Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # External-content FTS5 tables kept in step by triggers, so a delete of a
    # base row (forget) removes its index entry in the same transaction.
    con.executescript(
        """
        CREATE VIRTUAL TABLE memory_facts_fts USING fts5(
            fact, evidence_text,
            content='memory_facts', content_rowid='id',
            tokenize='unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER memory_facts_ai AFTER INSERT ON memory_facts BEGIN
            INSERT INTO memory_facts_fts(rowid, fact, evidence_text)
            VALUES (new.id, new.fact, new.evidence_text);
        END;
        CREATE TRIGGER memory_facts_ad AFTER DELETE ON memory_facts BEGIN
            INSERT INTO memory_facts_fts(memory_facts_fts, rowid, fact, evidence_text)
            VALUES ('delete', old.id, old.fact, old.evidence_text);
        END;
        CREATE TRIGGER memory_facts_au AFTER UPDATE OF fact, evidence_text ON memory_facts BEGIN
            INSERT INTO memory_facts_fts(memory_facts_fts, rowid, fact, evidence_text)
            VALUES ('delete', old.id, old.fact, old.evidence_text);
            INSERT INTO memory_facts_fts(rowid, fact, evidence_text)
            VALUES (new.id, new.fact, new.evidence_text);
        END;

        CREATE VIRTUAL TABLE messages_fts USING fts5(
            content,
            content='messages', content_rowid='seq',
            tokenize='unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts(rowid, content) VALUES (new.seq, new.content);
        END;
        CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
            VALUES ('delete', old.seq, old.content);
        END;
        CREATE TRIGGER messages_au AFTER UPDATE OF content ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
            VALUES ('delete', old.seq, old.content);
            INSERT INTO messages_fts(rowid, content) VALUES (new.seq, new.content);
        END;

        INSERT INTO memory_facts_fts(memory_facts_fts) VALUES ('rebuild');
        INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
        """
    )
