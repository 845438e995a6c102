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

# Combining marks as SQLite's unicode61 tokenizer (remove_diacritics 2, its
# Unicode 6.1 tables) treats them: the diacritics it drops from a word, and
# the marks it splits words at (Hebrew points, Arabic harakat, Indic vowel
# signs ...). Marks newer than its tables it keeps inside words; here the
# database's ctype decides those.
_DIACRITICS: tuple[tuple[int, int], ...] = (
    (0x0300, 0x0304),
    (0x0306, 0x030C),
    (0x030F, 0x030F),
    (0x0311, 0x0311),
    (0x031B, 0x031B),
    (0x0323, 0x0328),
    (0x032D, 0x032E),
    (0x0330, 0x0331),
)
_SEPARATOR_MARKS: tuple[tuple[int, int], ...] = (
    (0x0305, 0x0305),
    (0x030D, 0x030E),
    (0x0310, 0x0310),
    (0x0312, 0x031A),
    (0x031C, 0x0322),
    (0x0329, 0x032C),
    (0x032F, 0x032F),
    (0x0332, 0x036F),
    (0x0483, 0x0489),
    (0x0591, 0x05BD),
    (0x05BF, 0x05BF),
    (0x05C1, 0x05C2),
    (0x05C4, 0x05C5),
    (0x05C7, 0x05C7),
    (0x0610, 0x061A),
    (0x064B, 0x065F),
    (0x0670, 0x0670),
    (0x06D6, 0x06DC),
    (0x06DF, 0x06E4),
    (0x06E7, 0x06E8),
    (0x06EA, 0x06ED),
    (0x0711, 0x0711),
    (0x0730, 0x074A),
    (0x07A6, 0x07B0),
    (0x07EB, 0x07F3),
    (0x0816, 0x0819),
    (0x081B, 0x0823),
    (0x0825, 0x0827),
    (0x0829, 0x082D),
    (0x0859, 0x085B),
    (0x08E4, 0x08FE),
    (0x0900, 0x0903),
    (0x093A, 0x093C),
    (0x093E, 0x094F),
    (0x0951, 0x0957),
    (0x0962, 0x0963),
    (0x0981, 0x0983),
    (0x09BC, 0x09BC),
    (0x09BE, 0x09C4),
    (0x09C7, 0x09C8),
    (0x09CB, 0x09CD),
    (0x09D7, 0x09D7),
    (0x09E2, 0x09E3),
    (0x0A01, 0x0A03),
    (0x0A3C, 0x0A3C),
    (0x0A3E, 0x0A42),
    (0x0A47, 0x0A48),
    (0x0A4B, 0x0A4D),
    (0x0A51, 0x0A51),
    (0x0A70, 0x0A71),
    (0x0A75, 0x0A75),
    (0x0A81, 0x0A83),
    (0x0ABC, 0x0ABC),
    (0x0ABE, 0x0AC5),
    (0x0AC7, 0x0AC9),
    (0x0ACB, 0x0ACD),
    (0x0AE2, 0x0AE3),
    (0x0B01, 0x0B03),
    (0x0B3C, 0x0B3C),
    (0x0B3E, 0x0B44),
    (0x0B47, 0x0B48),
    (0x0B4B, 0x0B4D),
    (0x0B56, 0x0B57),
    (0x0B62, 0x0B63),
    (0x0B82, 0x0B82),
    (0x0BBE, 0x0BC2),
    (0x0BC6, 0x0BC8),
    (0x0BCA, 0x0BCD),
    (0x0BD7, 0x0BD7),
    (0x0C01, 0x0C03),
    (0x0C3E, 0x0C44),
    (0x0C46, 0x0C48),
    (0x0C4A, 0x0C4D),
    (0x0C55, 0x0C56),
    (0x0C62, 0x0C63),
    (0x0C82, 0x0C83),
    (0x0CBC, 0x0CBC),
    (0x0CBE, 0x0CC4),
    (0x0CC6, 0x0CC8),
    (0x0CCA, 0x0CCD),
    (0x0CD5, 0x0CD6),
    (0x0CE2, 0x0CE3),
    (0x0D02, 0x0D03),
    (0x0D3E, 0x0D44),
    (0x0D46, 0x0D48),
    (0x0D4A, 0x0D4D),
    (0x0D57, 0x0D57),
    (0x0D62, 0x0D63),
    (0x0D82, 0x0D83),
    (0x0DCA, 0x0DCA),
    (0x0DCF, 0x0DD4),
    (0x0DD6, 0x0DD6),
    (0x0DD8, 0x0DDF),
    (0x0DF2, 0x0DF3),
    (0x0E31, 0x0E31),
    (0x0E34, 0x0E3A),
    (0x0E47, 0x0E4E),
    (0x0EB1, 0x0EB1),
    (0x0EB4, 0x0EB9),
    (0x0EBB, 0x0EBC),
    (0x0EC8, 0x0ECD),
    (0x0F18, 0x0F19),
    (0x0F35, 0x0F35),
    (0x0F37, 0x0F37),
    (0x0F39, 0x0F39),
    (0x0F3E, 0x0F3F),
    (0x0F71, 0x0F84),
    (0x0F86, 0x0F87),
    (0x0F8D, 0x0F97),
    (0x0F99, 0x0FBC),
    (0x0FC6, 0x0FC6),
    (0x102B, 0x103E),
    (0x1056, 0x1059),
    (0x105E, 0x1060),
    (0x1062, 0x1064),
    (0x1067, 0x106D),
    (0x1071, 0x1074),
    (0x1082, 0x108D),
    (0x108F, 0x108F),
    (0x109A, 0x109D),
    (0x135D, 0x135F),
    (0x1712, 0x1714),
    (0x1732, 0x1734),
    (0x1752, 0x1753),
    (0x1772, 0x1773),
    (0x17B4, 0x17D3),
    (0x17DD, 0x17DD),
    (0x180B, 0x180D),
    (0x18A9, 0x18A9),
    (0x1920, 0x192B),
    (0x1930, 0x193B),
    (0x1A17, 0x1A1B),
    (0x1A55, 0x1A5E),
    (0x1A60, 0x1A7C),
    (0x1A7F, 0x1A7F),
    (0x1B00, 0x1B04),
    (0x1B34, 0x1B44),
    (0x1B6B, 0x1B73),
    (0x1B80, 0x1B82),
    (0x1BA1, 0x1BAD),
    (0x1BE6, 0x1BF3),
    (0x1C24, 0x1C37),
    (0x1CD0, 0x1CD2),
    (0x1CD4, 0x1CE8),
    (0x1CED, 0x1CED),
    (0x1CF4, 0x1CF4),
    (0x1DC0, 0x1DE6),
    (0x1DFC, 0x1DFF),
    (0x20D0, 0x20F0),
    (0x2CEF, 0x2CF1),
    (0x2D7F, 0x2D7F),
    (0x2DE0, 0x2DFF),
    (0x302A, 0x302F),
    (0x3099, 0x309A),
    (0xA66F, 0xA672),
    (0xA674, 0xA67D),
    (0xA69F, 0xA69F),
    (0xA6F0, 0xA6F1),
    (0xA802, 0xA802),
    (0xA806, 0xA806),
    (0xA80B, 0xA80B),
    (0xA823, 0xA827),
    (0xA880, 0xA881),
    (0xA8B4, 0xA8C4),
    (0xA8E0, 0xA8F1),
    (0xA926, 0xA92D),
    (0xA947, 0xA953),
    (0xA980, 0xA983),
    (0xA9B3, 0xA9C0),
    (0xAA29, 0xAA36),
    (0xAA43, 0xAA43),
    (0xAA4C, 0xAA4D),
    (0xAA7B, 0xAA7B),
    (0xAAB0, 0xAAB0),
    (0xAAB2, 0xAAB4),
    (0xAAB7, 0xAAB8),
    (0xAABE, 0xAABF),
    (0xAAC1, 0xAAC1),
    (0xAAEB, 0xAAEF),
    (0xAAF5, 0xAAF6),
    (0xABE3, 0xABEA),
    (0xABEC, 0xABED),
    (0xFB1E, 0xFB1E),
    (0xFE00, 0xFE0F),
    (0xFE20, 0xFE26),
    (0x101FD, 0x101FD),
    (0x10A01, 0x10A03),
    (0x10A05, 0x10A06),
    (0x10A0C, 0x10A0F),
    (0x10A38, 0x10A3A),
    (0x10A3F, 0x10A3F),
    (0x11000, 0x11002),
    (0x11038, 0x11046),
    (0x11080, 0x11082),
    (0x110B0, 0x110BA),
    (0x11100, 0x11102),
    (0x11127, 0x11134),
    (0x11180, 0x11182),
    (0x111B3, 0x111C0),
    (0x116AB, 0x116B7),
    (0x16F51, 0x16F7E),
    (0x16F8F, 0x16F92),
    (0x1D165, 0x1D169),
    (0x1D16D, 0x1D172),
    (0x1D17B, 0x1D182),
    (0x1D185, 0x1D18B),
    (0x1D1AA, 0x1D1AD),
    (0x1D242, 0x1D244),
    (0xE0100, 0xE01EF),
)


def _bracket(ranges: tuple[tuple[int, int], ...]) -> str:
    """The ranges as the inside of a PostgreSQL regex bracket expression."""

    def char(cp: int) -> str:
        return f"\\u{cp:04X}" if cp <= 0xFFFF else f"\\U{cp:08X}"

    return "".join(char(lo) if lo == hi else f"{char(lo)}-{char(hi)}" for lo, hi in ranges)


_MARK = _bracket(_DIACRITICS)
_SPLIT = _bracket(_SEPARATOR_MARKS)

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
