"""The PostgreSQL schema against the SQLite one, on a real server (pgserver,
PostgreSQL with pgvector): the same tables, columns, keys and indexes, the
migration runner's bookkeeping and locking, triggers with the same effects as
SQLite's for the same statements, the KNN tables."""

from __future__ import annotations

import re
import threading
from typing import Any

import numpy as np
import psycopg
import pytest

from memory.db.postgres import migrations as pg_migrations
from memory.errors import MigrationError
from tests import pg

_PG_TYPE = {"INTEGER": "bigint", "REAL": "double precision", "BLOB": "bytea", "TEXT": "text"}
# PostgreSQL tables standing for SQLite virtual tables (see memory.db.postgres.schema).
_FOR_VIRTUAL = {"memory_facts_fts", "messages_fts"}
# PostgreSQL's own: the totals FTS5 keeps inside its index (BM25's N and mean length).
_PG_ONLY = {"fts_stats"}
# SQLite's own indexes: owed journal lines exist only where the journal is
# appended (SQLite); on PostgreSQL the journal is rendered, nothing is owed.
_SQLITE_ONLY_INDEXES = {"messages_journal_owed"}
ALL_STEPS = [name for name, _ in pg_migrations.PG_MIGRATIONS]


def _ordinary_tables(con: Any) -> list[str]:
    rows = con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    virtual = [r[0] for r in rows if str(r[1]).upper().startswith("CREATE VIRTUAL")]
    return sorted(
        r[0]
        for r in rows
        if not r[0].startswith("sqlite_")
        and r[0] not in virtual
        and not any(r[0].startswith(f"{v}_") for v in virtual)
    )


def _pg_tables(conn: Any) -> list[str]:
    rows = conn.execute(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
    ).fetchall()
    return sorted(r[0] for r in rows)


def _pg_columns(conn: Any, table: str) -> list[tuple[str, str, bool, str | None]]:
    rows = conn.execute(
        "SELECT column_name, data_type, is_nullable = 'NO', column_default "
        "FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s "
        "ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    return [(r[0], r[1], r[2], None if r[3] is None else r[3].removesuffix("::text")) for r in rows]


def _pg_key_columns(conn: Any, table: str, kind: str) -> list[tuple[str, ...]]:
    """Column tuples of the table's constraints of ``kind`` ('p', 'u')."""
    rows = conn.execute(
        "SELECT array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, i) "
        "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i) "
        "FROM pg_constraint c WHERE c.conrelid = %s::regclass AND c.contype = %s",
        (table, kind),
    ).fetchall()
    return sorted(tuple(r[0]) for r in rows)


def _pg_indexes(conn: Any, table: str) -> dict[str, tuple[tuple[str, ...], bool, bool]]:
    """name → (columns, unique, partial) of the indexes no constraint owns."""
    rows = conn.execute(
        "SELECT i.relname, array(SELECT a.attname FROM unnest(x.indkey) WITH ORDINALITY k(n, o) "
        "JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.n ORDER BY k.o), "
        "x.indisunique, x.indpred IS NOT NULL FROM pg_index x "
        "JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = %s::regclass "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)",
        (table,),
    ).fetchall()
    return {r[0]: (tuple(r[1]), r[2], r[3]) for r in rows}


def _pg_foreign_keys(conn: Any, table: str) -> list[tuple[str, str, str, str]]:
    rows = conn.execute(
        "SELECT a.attname, c.confrelid::regclass::text, b.attname, c.confdeltype "
        "FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid "
        "AND a.attnum = c.conkey[1] JOIN pg_attribute b ON b.attrelid = c.confrelid "
        "AND b.attnum = c.confkey[1] WHERE c.conrelid = %s::regclass AND c.contype = 'f'",
        (table,),
    ).fetchall()
    actions = {"c": "CASCADE", "a": "NO ACTION", "n": "SET NULL", "r": "RESTRICT"}
    return sorted((r[0], r[1], r[2], actions[r[3]]) for r in rows)


def _literals(expression: str) -> list[str]:
    return sorted(re.findall(r"'([^']*)'", expression))


def test_every_sqlite_table_is_there_with_the_same_columns_keys_and_indexes(
    sqlite_ref: Any, pg_conn: Any
) -> None:
    tables = _ordinary_tables(sqlite_ref)
    assert "memory_facts" in tables and "_migrations" in tables
    assert _pg_tables(pg_conn) == sorted([*tables, *_FOR_VIRTUAL, *_PG_ONLY])
    for table in tables:
        info = sqlite_ref.execute(f'PRAGMA table_info("{table}")').fetchall()
        want = [
            (
                r["name"],
                _PG_TYPE[r["type"]],
                bool(r["notnull"] or r["pk"]),
                r["dflt_value"],
            )
            for r in info
        ]
        assert _pg_columns(pg_conn, table) == want, table
        pk = [r["name"] for r in sorted(info, key=lambda r: r["pk"]) if r["pk"]]
        assert _pg_key_columns(pg_conn, table, "p") == ([tuple(pk)] if pk else []), table
        unique, named = [], {}
        for ix in sqlite_ref.execute(f'PRAGMA index_list("{table}")').fetchall():
            cols = tuple(
                c["name"] for c in sqlite_ref.execute(f'PRAGMA index_info("{ix["name"]}")')
            )
            if ix["origin"] == "u":
                unique.append(cols)
            elif ix["origin"] == "c" and ix["name"] not in _SQLITE_ONLY_INDEXES:
                named[ix["name"]] = (cols, bool(ix["unique"]), bool(ix["partial"]))
        assert _pg_key_columns(pg_conn, table, "u") == sorted(unique), table
        assert _pg_indexes(pg_conn, table) == named, table
        fks = sorted(
            (r["from"], r["table"], r["to"], r["on_delete"])
            for r in sqlite_ref.execute(f'PRAGMA foreign_key_list("{table}")')
        )
        assert _pg_foreign_keys(pg_conn, table) == fks, table
        sql = sqlite_ref.execute(
            "SELECT sql FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()[0]
        checks = [
            r[0]
            for r in pg_conn.execute(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = %s::regclass AND contype = 'c'",
                (table,),
            )
        ]
        assert len(checks) == sql.upper().count("CHECK ("), table
        # The values a CHECK allows: the string literals of its IN list.
        lite_checks = re.findall(r"CHECK \((.*?)\)(?:,|\s*$)", sql, flags=re.M)
        assert sorted(_literals(c) for c in checks) == sorted(_literals(c) for c in lite_checks)


def test_identities_are_by_default_and_reset_past_copied_ids(pg_conn: Any) -> None:
    pg_conn.execute(
        "INSERT INTO memory_facts (id, guild_id, subject, fact, created_at, updated_at) "
        "VALUES (41, 'g', 's', 'copied', 't', 't')"
    )
    after = pg_migrations.reset_identities(pg_conn)
    assert after["memory_facts"] == 42 and after["messages"] == 1
    row = pg_conn.execute(
        "INSERT INTO memory_facts (guild_id, subject, fact, created_at, updated_at) "
        "VALUES ('g', 's', 'new', 't', 't') RETURNING id"
    ).fetchone()
    assert row[0] == 42


def test_a_second_migrate_does_nothing(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert pg_migrations.recorded(conn) == []
        assert pg_migrations.migrate(conn) == ALL_STEPS
        assert pg_migrations.migrate(conn) == []
        assert pg_migrations.recorded(conn) == ALL_STEPS


def test_migrate_wants_an_autocommit_connection(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn, pytest.raises(ValueError, match="autocommit"):
        pg_migrations.migrate(conn)


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        ("ENCODING 'LATIN1' LOCALE 'C' TEMPLATE template0", "needs a UTF8 database"),
        ("ENCODING 'UTF8' LOCALE 'C' TEMPLATE template0", "knows non-ASCII letters"),
    ],
)
def test_a_database_that_cannot_hold_the_index_is_refused(
    pg_server: Any, options: str, refusal: str
) -> None:
    name = pg.create_database(pg_server, options)
    try:
        with psycopg.connect(pg.url(pg_server, name), autocommit=True) as conn:
            with pytest.raises(MigrationError, match=refusal):
                pg_migrations.migrate(conn)
            assert pg_migrations.recorded(conn) == []
    finally:
        pg.drop_database(pg_server, name)


def test_a_database_of_a_newer_guildlore_is_refused(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        pg_migrations.migrate(conn)
        conn.execute("INSERT INTO _migrations VALUES ('p999_future', '2099-01-01')")
        with pytest.raises(MigrationError, match="newer guildlore"):
            pg_migrations.migrate(conn)


def test_a_failed_step_leaves_nothing_behind(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE messages (x INT)")  # the baseline's first table collides
        with pytest.raises(MigrationError, match="p001_baseline failed"):
            pg_migrations.migrate(conn)
        assert pg_migrations.recorded(conn) == []
        assert _pg_tables(conn) == ["_migrations", "messages"]


def test_two_processes_starting_at_once_apply_each_step_once(pg_url: str) -> None:
    barrier = threading.Barrier(2)
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                barrier.wait()
                results.append(pg_migrations.migrate(conn))
        except BaseException as exc:  # reported by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # Each step ran once, in one process or the other.
    assert sorted(name for ran in results for name in ran) == sorted(ALL_STEPS)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM _migrations").fetchone()[0] == len(ALL_STEPS)


# -- the same statements on both databases -------------------------------------------------


def test_a_history_row_bumps_the_revision_and_logs_the_change_as_in_sqlite(
    sqlite_ref: Any, pg_conn: Any
) -> None:
    insert = (
        "INSERT INTO fact_history (guild_id, fact_id, event, old_text, new_text, actor, "
        "reason, created_at) VALUES (?, ?, ?, ?, ?, 'tester', ?, ?)"
    )
    rows = [
        ("g1", 1, "add", None, "a", None, "t1"),
        ("g1", 1, "noop", "a", "a", None, "t2"),  # changes nothing
        ("g1", 1, "consent_asked", None, None, None, "t3"),  # changes nothing
        ("g1", 1, "update", "a", "a", None, "t4"),  # a re-observation: nothing
        ("g1", 1, "update", None, None, None, "t5"),  # NULL IS NULL: nothing
        ("g1", 1, "update", "a", "a", "operator fix", "t6"),
        ("g1", 1, "update", "a", "b", None, "t7"),
        ("g1", 1, "update", None, "c", None, "t8"),
        ("g2", 2, "delete", "x", None, None, "t9"),
    ]
    pg.both(sqlite_ref, pg_conn, [(insert, r) for r in rows])
    for table, order in (("guild_revisions", "guild_id"), ("memory_changes", "guild_id, rev")):
        assert pg.dump(pg_conn, table, order) == pg.dump(sqlite_ref, table, order), table
    assert pg.dump(pg_conn, "guild_revisions", "guild_id") == [("g1", 4), ("g2", 1)]
    # The log keeps a guild's newest 1,000 changes.
    many = [(insert, ("g3", i, "add", None, str(i), None, f"t{i}")) for i in range(1003)]
    pg.both(sqlite_ref, pg_conn, many)
    keep = "SELECT count(*), min(rev), max(rev) FROM memory_changes WHERE guild_id = 'g3'"
    assert tuple(pg_conn.execute(keep).fetchone()) == tuple(sqlite_ref.execute(keep).fetchone())
    assert tuple(pg_conn.execute(keep).fetchone()) == (1000, 4, 1003)


def test_deleting_facts_and_messages_clears_their_side_rows_as_in_sqlite(
    sqlite_ref: Any, pg_conn: Any
) -> None:
    setup: list[tuple[str, tuple]] = [
        pg.fact_row(1, "one", None),
        pg.fact_row(2, "two", None, "episode"),
        pg.fact_row(3, "three", None),
        pg.message_row(10, "m10", "source"),
        pg.message_row(11, "m11", "another"),
        (
            "INSERT INTO fact_sources VALUES (?, ?, 'g1', 't'), (?, ?, 'g1', 't'), "
            "(?, ?, 'g1', 't')",
            (1, "m10", 3, "m11", 3, "m10"),
        ),
        (
            "INSERT INTO canon_pins VALUES ('g1', 'm11', 'c1', ?, 't'), ('g1', 'm12', 'c1', ?, 't')",
            (1, 3),
        ),
        ("INSERT INTO episodes VALUES (?, 'g1', 'c1', 't', 't', 2, 'llm', 't')", (2,)),
        ("INSERT INTO episodes VALUES (?, 'g1', 'c1', 't', 't', 2, 'llm', 't')", (1,)),
        ("INSERT INTO memory_pins VALUES (?, 'g1', 'op', 't'), (?, 'g1', 'op', 't')", (1, 3)),
        ("INSERT INTO fact_relations VALUES (1, 2, 'g1', 0.5, 't'), (2, 3, 'g1', 0.5, 't')", ()),
        (
            "INSERT INTO consolidation_runs (id, guild_id, mode, dry_run, report, started_at) "
            "VALUES (1, 'g1', 'merge', 0, '{}', 't')",
            (),
        ),
        (
            "INSERT INTO consolidation_undo VALUES (1, 1, 'memory_facts', '1', '{}'), "
            "(1, 2, 'memory_facts', '3', '{}'), (1, 3, 'fact_relations', '1', NULL)",
            (),
        ),
        ("INSERT INTO insight_citations VALUES (1, 3), (3, 1), (3, 2)", ()),
        (
            "INSERT INTO consent_queue (guild_id, user_id, message_id, fact, fact_type, confidence, "
            "category, created_at, expires_at) VALUES ('g1', 'u1', 'm10', 'f', 'other', 0.9, 'health', "
            "'t', 't'), ('g1', 'u1', 'm11', 'g', 'other', 0.9, 'health', 't', 't')",
            (),
        ),
    ]
    pg.both(sqlite_ref, pg_conn, setup)
    tables = {
        "fact_sources": "fact_id, message_id",
        "canon_pins": "guild_id, message_id",
        "episodes": "fact_id",
        "memory_pins": "fact_id",
        "fact_relations": "a_id, b_id",
        "consolidation_undo": "run_id, seq",
        "insight_citations": "insight_id, fact_id",
        "consent_queue": "id",
        "memory_facts": "id",
    }
    steps: list[list[tuple[str, tuple]]] = [
        [("UPDATE messages SET content = 'edited' WHERE seq = 11", ())],  # its consent row goes
        [("DELETE FROM messages WHERE seq = 10", ())],
        [("DELETE FROM memory_facts WHERE id = 2", ())],  # an episode
        [("DELETE FROM memory_facts WHERE id = 1", ())],  # not an episode: its row stays
        [("UPDATE memory_facts SET is_active = 0, updated_at = 't5' WHERE id = 3", ())],
        [("UPDATE memory_facts SET is_active = 0, updated_at = 't6' WHERE id = 3", ())],
        [("UPDATE memory_facts SET is_active = 1, updated_at = 't7' WHERE id = 3", ())],
    ]
    for step in steps:
        pg.both(sqlite_ref, pg_conn, step)
        for table, order in tables.items():
            assert pg.dump(pg_conn, table, order) == pg.dump(sqlite_ref, table, order), (
                step,
                table,
            )
    assert pg.dump(pg_conn, "episodes", "fact_id")[0][0] == 1


def _store_con(pg_conn: Any) -> Any:
    from memory.db.postgres import driver as postgres

    pg_conn.row_factory = postgres.row_factory
    return postgres.PgConnection(pg_conn, postgres.identity_columns(pg_conn))


def test_a_models_knn_tables_refuse_a_vector_of_the_wrong_width(pg_conn: Any) -> None:
    from memory.store import vectors

    con = _store_con(pg_conn)
    con.execute("BEGIN")  # as every store write runs: in a transaction
    n = vectors.ensure_model(con, "m", 3, "t")
    con.execute("COMMIT")
    con.execute(f"INSERT INTO vec_facts_{n} VALUES (1, 'g1', '[1,0,0]')")
    with pytest.raises(Exception, match="expected 3 dimensions"):
        con.execute(f"INSERT INTO vec_messages_{n} VALUES (5, 'g1', '[1,0]')")


def test_knn_over_a_guilds_fact_vectors_returns_the_nearest(pg_conn: Any) -> None:
    from memory.store import vectors

    con = _store_con(pg_conn)
    rng = np.random.default_rng(7)
    con.execute("BEGIN")  # as every store write runs: in a transaction
    n = vectors.ensure_model(con, "m", 8, "t")
    con.execute("COMMIT")
    data = rng.normal(size=(40, 8)).astype(np.float32)
    guilds = ["g1" if i % 2 else "g2" for i in range(40)]
    for i, v in enumerate(data):
        con.execute(
            f"INSERT INTO vec_facts_{n} (fact_id, guild_id, embedding) VALUES (?, ?, ?)",
            (i, guilds[i], vectors.index_value(con, v.tobytes())),
        )
    query = rng.normal(size=8).astype(np.float32)
    rows = vectors.knn(con, "facts", "m", "g1", query.tobytes(), 5)
    unit = data / np.linalg.norm(data, axis=1, keepdims=True)
    cosine = 1 - unit @ (query / np.linalg.norm(query))
    mine = [i for i in np.argsort(cosine) if guilds[i] == "g1"][:5]
    assert [r[0] for r in rows] == [int(i) for i in mine]
    assert [r[1] for r in rows] == pytest.approx([float(cosine[i]) for i in mine], abs=1e-5)
