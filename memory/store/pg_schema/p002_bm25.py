"""Migration p002: what ranking by FTS5's BM25 needs, and words split as
SQLite's tokenizer splits them. Shipped: never edit, add a new migration
instead.

- Each full-text row keeps its length in tokens (``len``), set by a BEFORE
  trigger from its tsvector, and ``fts_stats`` keeps every table's row and
  token totals (what FTS5 keeps for bm25), in 16 slots per table (by rowid)
  so writers of different rows rarely wait for each other's slot.
- ``guildlore_fts_words``: SQLite's ``unicode61 remove_diacritics 2``
  tokenizer makes words of letters and digits only and drops diacritics;
  PostgreSQL's parser keeps hyphenated words, URLs, e-mail addresses and
  decimals whole and keeps accents. So before PostgreSQL parses a text,
  accents are removed and punctuation and symbols (ASCII, Latin-1, general
  punctuation, arrows to dingbats, CJK punctuation, full-width punctuation,
  emoji) become spaces, and both engines see the same words in ordinary
  text. ``guildlore_fts_vector`` indexes through it; queries go through the
  same function, so the two sides always agree with each other.
"""

from __future__ import annotations

from typing import Any

SLOTS = 16

_SEPARATORS = (
    r"[\u0001-\u002f\u003a-\u0040\u005b-\u0060\u007b-\u00a9\u00ab-\u00b4\u00b6-\u00b9"
    r"\u00bb-\u00bf\u00d7\u00f7\u2000-\u206f\u2190-\u2bff\u2e00-\u2e7f\u3000-\u303f"
    r"\ufe10-\ufe1f\ufe30-\ufe6f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65"
    r"\U0001f000-\U0001faff]+"
)

STATEMENTS: tuple[str, ...] = (
    f"""CREATE FUNCTION guildlore_fts_words(t TEXT) RETURNS TEXT
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
        SELECT regexp_replace(
            normalize(regexp_replace(normalize(t, NFD), '[\\u0300-\\u036f]', '', 'g'), NFC),
            '{_SEPARATORS}', ' ', 'g')
    $fn$""",
    """CREATE OR REPLACE FUNCTION guildlore_fts_vector(t TEXT) RETURNS TSVECTOR
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
        SELECT to_tsvector('simple', coalesce(guildlore_fts_words(guildlore_fts_text(t)), ''))
    $fn$""",
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
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            UPDATE fts_stats SET docs = docs - 1, tokens = tokens - OLD.len
            WHERE tbl = TG_TABLE_NAME AND slot = OLD.rowid % {SLOTS};
        END IF;
        IF TG_OP IN ('UPDATE', 'INSERT') THEN
            INSERT INTO fts_stats (tbl, slot, docs, tokens)
            VALUES (TG_TABLE_NAME, NEW.rowid % {SLOTS}, 1, NEW.len)
            ON CONFLICT (tbl, slot) DO UPDATE
            SET docs = fts_stats.docs + 1, tokens = fts_stats.tokens + excluded.tokens;
        END IF;
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
    # Rows indexed before this step: indexed again through the new words,
    # which also sets their length and counts them.
    "UPDATE memory_facts_fts AS x SET tsv = "
    "guildlore_fts_vector(f.fact) || guildlore_fts_vector(f.evidence_text) "
    "FROM memory_facts AS f WHERE f.id = x.rowid",
    "UPDATE messages_fts AS x SET tsv = guildlore_fts_vector(m.content) "
    "FROM messages AS m WHERE m.seq = x.rowid",
)


def apply(cur: Any) -> None:
    for statement in STATEMENTS:
        cur.execute(statement)
