"""Migration m017: multilingual full-text index. Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any

# Scripts written without spaces (Chinese, Japanese, Korean, Thai …) are
# indexed as overlapping character bigrams, the units a query is split into,
# through the SQL function every connection registers (memory.db.sqlite.driver,
# memory.text.fts_index_text). The tables become contentless: what they
# index is no longer the base table's text, so nothing may read it back from
# there ('rebuild' would index the raw text). A delete passes the same
# function's output for the old text, which is what was indexed (the function
# is deterministic), and secure-delete removes those terms from the index
# b-trees at once. (contentless_delete=1 is not used: it marks deleted rows
# with tombstones and leaves their terms in the file until a merge.)
_TOKENIZE = "tokenize='unicode61 remove_diacritics 2'"


def apply(con: Any) -> None:
    con.executescript(
        f"""
        DROP TRIGGER IF EXISTS memory_facts_ai;
        DROP TRIGGER IF EXISTS memory_facts_ad;
        DROP TRIGGER IF EXISTS memory_facts_au;
        DROP TRIGGER IF EXISTS messages_ai;
        DROP TRIGGER IF EXISTS messages_ad;
        DROP TRIGGER IF EXISTS messages_au;
        DROP TABLE IF EXISTS memory_facts_fts;
        DROP TABLE IF EXISTS messages_fts;

        CREATE VIRTUAL TABLE memory_facts_fts USING fts5(
            fact, evidence_text, content='', {_TOKENIZE}
        );
        CREATE TRIGGER memory_facts_ai AFTER INSERT ON memory_facts BEGIN
            INSERT INTO memory_facts_fts(rowid, fact, evidence_text)
            VALUES (new.id, guildlore_fts_text(new.fact), guildlore_fts_text(new.evidence_text));
        END;
        CREATE TRIGGER memory_facts_ad AFTER DELETE ON memory_facts BEGIN
            INSERT INTO memory_facts_fts(memory_facts_fts, rowid, fact, evidence_text)
            VALUES ('delete', old.id, guildlore_fts_text(old.fact),
                    guildlore_fts_text(old.evidence_text));
        END;
        CREATE TRIGGER memory_facts_au AFTER UPDATE OF fact, evidence_text ON memory_facts BEGIN
            INSERT INTO memory_facts_fts(memory_facts_fts, rowid, fact, evidence_text)
            VALUES ('delete', old.id, guildlore_fts_text(old.fact),
                    guildlore_fts_text(old.evidence_text));
            INSERT INTO memory_facts_fts(rowid, fact, evidence_text)
            VALUES (new.id, guildlore_fts_text(new.fact), guildlore_fts_text(new.evidence_text));
        END;

        CREATE VIRTUAL TABLE messages_fts USING fts5(
            content, content='', {_TOKENIZE}
        );
        CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts(rowid, content)
            VALUES (new.seq, guildlore_fts_text(new.content));
        END;
        CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
            VALUES ('delete', old.seq, guildlore_fts_text(old.content));
        END;
        CREATE TRIGGER messages_au AFTER UPDATE OF content ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
            VALUES ('delete', old.seq, guildlore_fts_text(old.content));
            INSERT INTO messages_fts(rowid, content)
            VALUES (new.seq, guildlore_fts_text(new.content));
        END;

        INSERT INTO memory_facts_fts(memory_facts_fts, rank) VALUES ('secure-delete', 1);
        INSERT INTO messages_fts(messages_fts, rank) VALUES ('secure-delete', 1);
        INSERT INTO memory_facts_fts(rowid, fact, evidence_text)
            SELECT id, guildlore_fts_text(fact), guildlore_fts_text(evidence_text)
            FROM memory_facts;
        INSERT INTO messages_fts(rowid, content)
            SELECT seq, guildlore_fts_text(content) FROM messages;
        INSERT INTO memory_facts_fts(memory_facts_fts) VALUES ('optimize');
        INSERT INTO messages_fts(messages_fts) VALUES ('optimize');
        """
    )
