"""Migration p001, part 2: the full-text index. Shipped: never edit, add a new
migration instead.

SQLite keeps two contentless FTS5 tables, ``memory_facts_fts`` (fact,
evidence_text; rowid = the fact's id) and ``messages_fts`` (content; rowid =
the message's seq), filled by triggers with ``guildlore_fts_text`` of the
text. Here each is an ordinary table of the same name: ``rowid`` (the content
row's id, as FTS5's rowid) and ``tsv``, the indexed words as a tsvector under
a GIN index. The triggers mirror SQLite's: a row is indexed on insert,
re-indexed when an UPDATE names one of its indexed columns (SQLite's ``AFTER
UPDATE OF``, which fires even when the value is unchanged), and leaves the
index with its delete. No query filters on an FTS column, so a fact's two
columns are one tsvector (``fact`` then ``evidence_text``).

``guildlore_fts_text`` is ``memory.text.fts_index_text`` in PL/pgSQL: ASCII
text unchanged; otherwise NFKC, and every run of a spaceless script (Thai,
Lao, Myanmar, Khmer, kana, Bopomofo, CJK, Hangul syllables) replaced by its
overlapping character bigrams, each a word, with a space either side (a lone
character stands alone). The tsvector is ``to_tsvector('simple', ...)`` of it.
"""

from __future__ import annotations

# memory.text._NO_SPACE_RANGES, as a regex bracket expression.
_NO_SPACE = (
    r"\u0E00-\u0EFF\u1000-\u109F\u1780-\u17FF\u3040-\u30FF\u3100-\u312F"
    r"\u3400-\u4DBF\u4E00-\u9FFF\uAC00-\uD7AF\uF900-\uFAFF\U00020000-\U0002FA1F"
)

FTS_TEXT_FUNCTION = f"""
CREATE FUNCTION guildlore_fts_text(t TEXT) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
DECLARE
    v TEXT;
    m TEXT[];
    ch TEXT[];
    n INT;
    parts TEXT[] := ARRAY[]::TEXT[];
BEGIN
    -- In a UTF-8 database a text is ASCII exactly when each character is one byte.
    IF octet_length(t) = char_length(t) THEN
        RETURN t;
    END IF;
    v := normalize(t, NFKC);
    FOR m IN SELECT regexp_matches(v, '([{_NO_SPACE}]+)|([^{_NO_SPACE}]+)', 'g') LOOP
        IF m[1] IS NULL THEN
            parts := parts || m[2];
        ELSE
            ch := regexp_split_to_array(m[1], '');
            n := cardinality(ch);
            IF n = 1 THEN
                parts := parts || (' ' || m[1] || ' ');
            ELSE
                parts := parts || (' ' || array_to_string(ARRAY(
                    SELECT ch[i] || ch[i + 1] FROM generate_series(1, n - 1) AS i ORDER BY i
                ), ' ') || ' ');
            END IF;
        END IF;
    END LOOP;
    RETURN array_to_string(parts, '');
END
$fn$
"""

# The indexed form of one text; NULL indexes nothing, like an FTS5 NULL column.
FTS_VECTOR_FUNCTION = """
CREATE FUNCTION guildlore_fts_vector(t TEXT) RETURNS TSVECTOR
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT to_tsvector('simple', coalesce(guildlore_fts_text(t), ''))
$fn$
"""

STATEMENTS: tuple[str, ...] = (
    FTS_TEXT_FUNCTION,
    FTS_VECTOR_FUNCTION,
    """CREATE TABLE memory_facts_fts (
        rowid BIGINT PRIMARY KEY,
        tsv TSVECTOR NOT NULL
    )""",
    "CREATE INDEX memory_facts_fts_tsv ON memory_facts_fts USING GIN (tsv)",
    """CREATE TABLE messages_fts (
        rowid BIGINT PRIMARY KEY,
        tsv TSVECTOR NOT NULL
    )""",
    "CREATE INDEX messages_fts_tsv ON messages_fts USING GIN (tsv)",
    # memory_facts_ai / _ad / _au
    """CREATE FUNCTION guildlore_memory_facts_ai() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    BEGIN
        INSERT INTO memory_facts_fts (rowid, tsv) VALUES (
            NEW.id,
            guildlore_fts_vector(NEW.fact) || guildlore_fts_vector(NEW.evidence_text)
        );
        RETURN NULL;
    END
    $fn$""",
    """CREATE TRIGGER memory_facts_ai AFTER INSERT ON memory_facts
    FOR EACH ROW EXECUTE FUNCTION guildlore_memory_facts_ai()""",
    """CREATE FUNCTION guildlore_memory_facts_ad() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    BEGIN
        DELETE FROM memory_facts_fts WHERE rowid = OLD.id;
        RETURN NULL;
    END
    $fn$""",
    """CREATE TRIGGER memory_facts_ad AFTER DELETE ON memory_facts
    FOR EACH ROW EXECUTE FUNCTION guildlore_memory_facts_ad()""",
    """CREATE FUNCTION guildlore_memory_facts_au() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    BEGIN
        DELETE FROM memory_facts_fts WHERE rowid = OLD.id;
        INSERT INTO memory_facts_fts (rowid, tsv) VALUES (
            NEW.id,
            guildlore_fts_vector(NEW.fact) || guildlore_fts_vector(NEW.evidence_text)
        );
        RETURN NULL;
    END
    $fn$""",
    """CREATE TRIGGER memory_facts_au AFTER UPDATE OF fact, evidence_text ON memory_facts
    FOR EACH ROW EXECUTE FUNCTION guildlore_memory_facts_au()""",
    # messages_ai / _ad / _au
    """CREATE FUNCTION guildlore_messages_ai() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    BEGIN
        INSERT INTO messages_fts (rowid, tsv) VALUES (NEW.seq, guildlore_fts_vector(NEW.content));
        RETURN NULL;
    END
    $fn$""",
    """CREATE TRIGGER messages_ai AFTER INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION guildlore_messages_ai()""",
    """CREATE FUNCTION guildlore_messages_ad() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    BEGIN
        DELETE FROM messages_fts WHERE rowid = OLD.seq;
        RETURN NULL;
    END
    $fn$""",
    """CREATE TRIGGER messages_ad AFTER DELETE ON messages
    FOR EACH ROW EXECUTE FUNCTION guildlore_messages_ad()""",
    """CREATE FUNCTION guildlore_messages_au() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    BEGIN
        DELETE FROM messages_fts WHERE rowid = OLD.seq;
        INSERT INTO messages_fts (rowid, tsv) VALUES (NEW.seq, guildlore_fts_vector(NEW.content));
        RETURN NULL;
    END
    $fn$""",
    """CREATE TRIGGER messages_au AFTER UPDATE OF content ON messages
    FOR EACH ROW EXECUTE FUNCTION guildlore_messages_au()""",
)
