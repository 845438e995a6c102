"""Migration p001: the PostgreSQL baseline, the SQLite schema after m001..m017
in native PostgreSQL (≥ 15; pgvector for the KNN indexes). Shipped: never
edit, add a new migration instead.

Its parts: ``p001_tables`` (the ordinary tables and indexes), ``p001_fts``
(``memory_facts_fts`` and ``messages_fts`` as tsvector tables, their
triggers, ``guildlore_fts_text`` and ``guildlore_fts_words`` for what is
indexed, ``guildlore_fts_match`` for the store's MATCH expressions),
``p001_vectors`` (pgvector; the KNN tables are made per model at run time)
and ``p001_triggers`` (every other SQLite trigger). The runner's
``_migrations`` table is the runner's own (``memory.db.postgres.migrations``).
"""

from __future__ import annotations

from typing import Any

from memory.db.postgres.schema import p001_fts, p001_tables, p001_triggers, p001_vectors

# guildlore_fts_text counts bytes to spot ASCII and calls normalize(), and
# guildlore_fts_words needs the database's ctype to know non-ASCII letters
# (under plain "C" every accented, CJK or Cyrillic letter would be a separator).
_REQUIRE_UTF8 = """
DO $fn$
BEGIN
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RAISE EXCEPTION 'guildlore needs a UTF8 database, not %',
            current_setting('server_encoding');
    END IF;
    -- Latin, Greek, Cyrillic, Han and Hangul letters, spelt in ASCII so that
    -- this statement reaches a database of any encoding.
    IF NOT chr(233) || chr(937) || chr(1078) || chr(26481) || chr(54620) ~ '^[[:alnum:]]+$' THEN
        RAISE EXCEPTION 'guildlore needs a database whose ctype knows non-ASCII letters '
            '(such as C.UTF-8 or en_US.UTF-8), not %',
            (SELECT datctype FROM pg_database WHERE datname = current_database());
    END IF;
END
$fn$
"""

STATEMENTS: tuple[str, ...] = (
    _REQUIRE_UTF8,
    *p001_tables.STATEMENTS,
    *p001_fts.STATEMENTS,
    *p001_vectors.STATEMENTS,
    *p001_triggers.STATEMENTS,
)


def apply(cur: Any) -> None:
    """Create the schema through ``cur`` (a psycopg 3 cursor or connection),
    inside the caller's transaction."""
    for statement in STATEMENTS:
        cur.execute(statement)
