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
character stands alone).

``guildlore_fts_words`` makes of a text the words SQLite's ``unicode61
remove_diacritics 2`` tokenizer sees: lower case, diacritics of Latin letters
and lone diacritic marks removed, the other combining marks (Hebrew points,
Arabic harakat, Indic vowel signs) and every run of characters that are
neither letters nor digits a separator. The tsvector (``guildlore_fts_vector``) is those words of
``guildlore_fts_text(t)`` at their positions, built directly rather than by
PostgreSQL's text search parser, which keeps "3.14", "2024-05-01" ("2024",
"-05", "-01"), "x@y.com" or "a.b/c" as words no query token can match and
splits words that mix scripts. It needs a UTF-8 database whose ctype classifies non-ASCII letters (C.UTF-8,
en_US.UTF-8, ...); the baseline refuses one that does not.

``guildlore_fts_match(expr)`` is the tsquery of an FTS5 MATCH expression of
the form the store writes (``memory.retrieval.query.fts_match_expression``):
quoted phrases, each optionally a prefix (``"paint"*``), joined by OR. A
phrase's text goes through ``guildlore_fts_words`` as FTS5 runs a query
through its tokenizer (not through ``guildlore_fts_text``, which FTS5 does
not apply to queries either), a phrase of several words matches them in a
row, and a prefix applies to its last word. So ``fts MATCH ?`` is
``fts.tsv @@ guildlore_fts_match(?)``. Anything else is refused.
"""

from __future__ import annotations

from memory.db.postgres.schema.p001_marks import DIACRITICS, SEPARATOR_MARKS, bracket

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

_MARK = bracket(DIACRITICS)
_SPLIT = bracket(SEPARATOR_MARKS)

FTS_WORDS_FUNCTION = rf"""
CREATE FUNCTION guildlore_fts_words(t TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
    SELECT CASE WHEN octet_length(t) = char_length(t)
        THEN regexp_replace(lower(t), '[^a-z0-9]+', ' ', 'g')
        ELSE regexp_replace(regexp_replace(regexp_replace(
            normalize(regexp_replace(
                normalize(lower(t), NFD), '([a-z][{_SPLIT}]*)[{_MARK}]+', '\1', 'g'
            ), NFC),
            '[{_MARK}]+', '', 'g'),
            '[{_SPLIT}]+', ' ', 'g'),
            '[^[:alnum:]]+', ' ', 'g')
    END
$fn$
"""

# The indexed form of one text: its words at their positions, written as a
# tsvector literal (words are letters and digits only, so quote_literal needs
# no escapes). NULL indexes nothing, like an FTS5 NULL column. A tsvector
# cannot hold a lexeme of 2 KB or a position past 16383: such a word is left
# out, such a position is the last one.
FTS_VECTOR_FUNCTION = """
CREATE FUNCTION guildlore_fts_vector(t TEXT) RETURNS TSVECTOR
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT coalesce(string_agg(quote_literal(w) || ':' || least(n, 16383), ' ' ORDER BY n), '')
        ::tsvector
    FROM unnest(regexp_split_to_array(
        btrim(coalesce(guildlore_fts_words(guildlore_fts_text(t)), '')), ' '
    )) WITH ORDINALITY AS u(w, n)
    WHERE w <> '' AND octet_length(w) < 2047
$fn$
"""

FTS_MATCH_FUNCTION = """
CREATE FUNCTION guildlore_fts_match(expr TEXT) RETURNS TSQUERY
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
DECLARE
    part TEXT;
    prefix BOOLEAN;
    words TEXT[];
    phrase TEXT;
    q TSQUERY;
BEGIN
    FOREACH part IN ARRAY string_to_array(btrim(expr), ' OR ') LOOP
        part := btrim(part);
        prefix := right(part, 1) = '*';
        IF prefix THEN
            part := left(part, -1);
        END IF;
        IF length(part) < 2 OR left(part, 1) <> '"' OR right(part, 1) <> '"' THEN
            RAISE EXCEPTION 'not a quoted FTS phrase: %', part;
        END IF;
        part := replace(substr(part, 2, length(part) - 2), '""', '"');
        words := regexp_split_to_array(btrim(guildlore_fts_words(part)), ' ');
        IF words = ARRAY[''] THEN
            CONTINUE;  -- no words: the phrase matches nothing
        END IF;
        phrase := array_to_string(ARRAY(
            SELECT quote_literal(w) FROM unnest(words) WITH ORDINALITY AS u(w, n) ORDER BY n
        ), ' <-> ');
        IF prefix THEN
            phrase := phrase || ':*';
        END IF;
        q := CASE WHEN q IS NULL THEN phrase::tsquery ELSE q || phrase::tsquery END;
    END LOOP;
    RETURN q;
END
$fn$
"""

STATEMENTS: tuple[str, ...] = (
    FTS_TEXT_FUNCTION,
    FTS_WORDS_FUNCTION,
    FTS_VECTOR_FUNCTION,
    FTS_MATCH_FUNCTION,
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
