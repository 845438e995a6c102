"""Migration p002: what ranking by FTS5's BM25 needs. Shipped: never edit,
add a new migration instead.

- Each full-text row keeps its length in tokens (``len``), set by a BEFORE
  trigger from its tsvector, and ``fts_stats`` keeps every table's row and
  token totals (what FTS5 keeps for bm25), in 16 slots per table that add
  up. A connection always writes the slot of its server process id: a
  transaction holds one slot row at most, so two writers can wait for each
  other's slot but never deadlock over two.
"""

from __future__ import annotations

from typing import Any

SLOTS = 16

STATEMENTS: tuple[str, ...] = (
    # Tokens, not distinct words: each lexeme counts as often as it occurs.
    """CREATE FUNCTION guildlore_fts_len(v TSVECTOR) RETURNS INT
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
        SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)::INT
        FROM unnest(v) AS u
    $fn$""",
    "ALTER TABLE memory_facts_fts ADD COLUMN len INT NOT NULL DEFAULT 0",
    "ALTER TABLE messages_fts ADD COLUMN len INT NOT NULL DEFAULT 0",
    """CREATE TABLE fts_stats (
        tbl TEXT NOT NULL,
        slot INT NOT NULL,
        docs BIGINT NOT NULL DEFAULT 0,
        tokens BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (tbl, slot)
    )""",
    """CREATE FUNCTION guildlore_fts_set_len() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    BEGIN
        NEW.len := guildlore_fts_len(NEW.tsv);
        RETURN NEW;
    END
    $fn$""",
    f"""CREATE FUNCTION guildlore_fts_count() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    DECLARE
        d_docs BIGINT := 0;
        d_tokens BIGINT := 0;
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            d_docs := d_docs - 1;
            d_tokens := d_tokens - OLD.len;
        END IF;
        IF TG_OP IN ('UPDATE', 'INSERT') THEN
            d_docs := d_docs + 1;
            d_tokens := d_tokens + NEW.len;
        END IF;
        INSERT INTO fts_stats (tbl, slot, docs, tokens)
        VALUES (TG_TABLE_NAME, pg_backend_pid() % {SLOTS}, d_docs, d_tokens)
        ON CONFLICT (tbl, slot) DO UPDATE
        SET docs = fts_stats.docs + excluded.docs, tokens = fts_stats.tokens + excluded.tokens;
        RETURN NULL;
    END
    $fn$""",
    *(
        sql
        for table in ("memory_facts_fts", "messages_fts")
        for sql in (
            f"CREATE TRIGGER {table}_len BEFORE INSERT OR UPDATE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION guildlore_fts_set_len()",
            f"CREATE TRIGGER {table}_count AFTER INSERT OR UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION guildlore_fts_count()",
        )
    ),
    # Rows indexed before this step: written again, which sets their length
    # and counts them.
    "UPDATE memory_facts_fts AS x SET tsv = "
    "guildlore_fts_vector(f.fact) || guildlore_fts_vector(f.evidence_text) "
    "FROM memory_facts AS f WHERE f.id = x.rowid",
    "UPDATE messages_fts AS x SET tsv = guildlore_fts_vector(m.content) "
    "FROM messages AS m WHERE m.seq = x.rowid",
)


def apply(cur: Any) -> None:
    for statement in STATEMENTS:
        cur.execute(statement)
