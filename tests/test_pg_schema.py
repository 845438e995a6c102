"""The PostgreSQL schema against the SQLite one, on a real server (pgserver,
PostgreSQL with pgvector): the same tables, columns, keys and indexes, the
migration runner's bookkeeping and locking, triggers with the same effects as
SQLite's for the same statements, the FTS text function, KNN by guild."""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from memory.errors import MigrationError
from memory.store import migrations, pg_migrations, sqlite
from memory.text import fts_index_text

_PG_TYPE = {"INTEGER": "bigint", "REAL": "double precision", "BLOB": "bytea", "TEXT": "text"}
# PostgreSQL tables standing for SQLite virtual tables (see memory.store.pg_schema).
_FOR_VIRTUAL = {"memory_facts_fts", "messages_fts", "vec_facts", "vec_messages"}


@pytest.fixture
def lite(tmp_path: Path) -> Iterator[Any]:
    con = sqlite.connect(tmp_path / "ref.db")
    migrations.migrate(con)
    yield con
    con.close()


@pytest.fixture
def pgc(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    conn = psycopg.connect(pg_url, autocommit=True)
    pg_migrations.migrate(conn)
    yield conn
    conn.close()


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
    lite: Any, pgc: Any
) -> None:
    tables = _ordinary_tables(lite)
    assert "memory_facts" in tables and "_migrations" in tables
    assert _pg_tables(pgc) == sorted([*tables, *_FOR_VIRTUAL])
    for table in tables:
        info = lite.execute(f'PRAGMA table_info("{table}")').fetchall()
        want = [
            (
                r["name"],
                _PG_TYPE[r["type"]],
                bool(r["notnull"] or r["pk"]),
                r["dflt_value"],
            )
            for r in info
        ]
        assert _pg_columns(pgc, table) == want, table
        pk = [r["name"] for r in sorted(info, key=lambda r: r["pk"]) if r["pk"]]
        assert _pg_key_columns(pgc, table, "p") == ([tuple(pk)] if pk else []), table
        unique, named = [], {}
        for ix in lite.execute(f'PRAGMA index_list("{table}")').fetchall():
            cols = tuple(c["name"] for c in lite.execute(f'PRAGMA index_info("{ix["name"]}")'))
            if ix["origin"] == "u":
                unique.append(cols)
            elif ix["origin"] == "c":
                named[ix["name"]] = (cols, bool(ix["unique"]), bool(ix["partial"]))
        assert _pg_key_columns(pgc, table, "u") == sorted(unique), table
        assert _pg_indexes(pgc, table) == named, table
        fks = sorted(
            (r["from"], r["table"], r["to"], r["on_delete"])
            for r in lite.execute(f'PRAGMA foreign_key_list("{table}")')
        )
        assert _pg_foreign_keys(pgc, table) == fks, table
        sql = lite.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        checks = [
            r[0]
            for r in pgc.execute(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = %s::regclass AND contype = 'c'",
                (table,),
            )
        ]
        assert len(checks) == sql.upper().count("CHECK ("), table
        # The values a CHECK allows: the string literals of its IN list.
        lite_checks = re.findall(r"CHECK \((.*?)\)(?:,|\s*$)", sql, flags=re.M)
        assert sorted(_literals(c) for c in checks) == sorted(_literals(c) for c in lite_checks)


def test_identities_are_by_default_and_reset_past_copied_ids(pgc: Any) -> None:
    pgc.execute(
        "INSERT INTO memory_facts (id, guild_id, subject, fact, created_at, updated_at) "
        "VALUES (41, 'g', 's', 'copied', 't', 't')"
    )
    after = pg_migrations.reset_identities(pgc)
    assert after["memory_facts"] == 42 and after["messages"] == 1
    row = pgc.execute(
        "INSERT INTO memory_facts (guild_id, subject, fact, created_at, updated_at) "
        "VALUES ('g', 's', 'new', 't', 't') RETURNING id"
    ).fetchone()
    assert row[0] == 42


def test_a_second_migrate_does_nothing(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert pg_migrations.recorded(conn) == []
        assert pg_migrations.migrate(conn) == ["p001_baseline"]
        assert pg_migrations.migrate(conn) == []
        assert pg_migrations.recorded(conn) == ["p001_baseline"]


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
    assert sorted(results) == [[], ["p001_baseline"]]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM _migrations").fetchone()[0] == 1


# -- the same statements on both databases -------------------------------------------------


def _both(lite: Any, pgc: Any, statements: Sequence[tuple[str, tuple[Any, ...]]]) -> None:
    for sql, args in statements:
        lite.execute(sql, args)
        pgc.execute(sql.replace("?", "%s"), args)


def _dump(con: Any, table: str, order: str) -> list[tuple[Any, ...]]:
    rows = con.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
    return [tuple(r) for r in rows]


def _fts_hits(lite: Any, pgc: Any, table: str, term: str) -> tuple[list[int], list[int]]:
    """rowids matching one term (a word, or a bigram of a spaceless script)."""
    a = lite.execute(
        f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rowid", (f'"{term}"',)
    ).fetchall()
    b = pgc.execute(
        f"SELECT rowid FROM {table} WHERE tsv @@ to_tsquery('simple', quote_literal(%s)) "
        "ORDER BY rowid",
        (term,),
    ).fetchall()
    return [r[0] for r in a], [r[0] for r in b]


def _same_fts(lite: Any, pgc: Any, table: str, terms: Sequence[str]) -> None:
    count = f"SELECT count(*) FROM {table}"
    assert lite.execute(count).fetchone()[0] == pgc.execute(count).fetchone()[0]
    for term in terms:
        a, b = _fts_hits(lite, pgc, table, term)
        assert a == b, (table, term, a, b)


def _fact(fid: int, fact: str, evidence: str | None, fact_type: str = "other") -> tuple[str, tuple]:
    return (
        "INSERT INTO memory_facts (id, guild_id, subject, fact, fact_type, evidence_text, "
        "created_at, updated_at) VALUES (?, 'g1', 'alice', ?, ?, ?, 't0', 't0')",
        (fid, fact, fact_type, evidence),
    )


def _message(seq: int, mid: str, content: str) -> tuple[str, tuple]:
    return (
        "INSERT INTO messages (seq, id, guild_id, channel_id, author_id, author_name, content, "
        "created_at, source, received_at) VALUES (?, ?, 'g1', 'c1', 'u1', 'Alice', ?, 't0', "
        "'text', 't0')",
        (seq, mid, content),
    )


_FACT_TERMS = ["alice", "paints", "birds", "tokyo", "evidence", "东京", "会议", "moved", "teal"]


def test_fact_fts_rows_follow_inserts_updates_and_deletes_as_in_sqlite(lite: Any, pgc: Any) -> None:
    steps: list[list[tuple[str, tuple]]] = [
        [
            _fact(1, "Alice paints birds", "she said she paints birds"),
            _fact(2, "Alice lives in Tokyo", None),
            _fact(3, "我住在东京", "明天在东京开会议"),
        ],
        [("UPDATE memory_facts SET fact = ? WHERE id = ?", ("Alice moved to Kyoto", 2))],
        [("UPDATE memory_facts SET evidence_text = ? WHERE id = ?", ("teal evidence", 1))],
        # Not an indexed column: the index is left as it is.
        [("UPDATE memory_facts SET is_active = 0, updated_at = 't1' WHERE id = ?", (3,))],
        [("UPDATE memory_facts SET evidence_text = NULL WHERE id = ?", (3,))],
        [("DELETE FROM memory_facts WHERE id = ?", (1,))],
    ]
    for step in steps:
        _both(lite, pgc, step)
        _same_fts(lite, pgc, "memory_facts_fts", _FACT_TERMS)
    assert _fts_hits(lite, pgc, "memory_facts_fts", "东京") == ([3], [3])
    assert _fts_hits(lite, pgc, "memory_facts_fts", "tokyo") == ([], [])


def test_message_fts_rows_follow_inserts_edits_and_deletes_as_in_sqlite(
    lite: Any, pgc: Any
) -> None:
    terms = ["hello", "world", "meeting", "edited", "東京", "会議", "猫"]
    steps: list[list[tuple[str, tuple]]] = [
        [
            _message(1, "m1", "hello world"),
            _message(2, "m2", "明日は東京で会議"),
            _message(3, "m3", "猫"),
        ],
        [("UPDATE messages SET content = ? WHERE seq = ?", ("edited meeting", 1))],
        [("UPDATE messages SET state = 'done' WHERE seq = ?", (2,))],
        [("DELETE FROM messages WHERE seq = ?", (3,))],
    ]
    for step in steps:
        _both(lite, pgc, step)
        _same_fts(lite, pgc, "messages_fts", terms)


def test_a_history_row_bumps_the_revision_and_logs_the_change_as_in_sqlite(
    lite: Any, pgc: Any
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
    _both(lite, pgc, [(insert, r) for r in rows])
    for table, order in (("guild_revisions", "guild_id"), ("memory_changes", "guild_id, rev")):
        assert _dump(pgc, table, order) == _dump(lite, table, order), table
    assert _dump(pgc, "guild_revisions", "guild_id") == [("g1", 4), ("g2", 1)]
    # The log keeps a guild's newest 1,000 changes.
    many = [(insert, ("g3", i, "add", None, str(i), None, f"t{i}")) for i in range(1003)]
    _both(lite, pgc, many)
    keep = "SELECT count(*), min(rev), max(rev) FROM memory_changes WHERE guild_id = 'g3'"
    assert tuple(pgc.execute(keep).fetchone()) == tuple(lite.execute(keep).fetchone())
    assert tuple(pgc.execute(keep).fetchone()) == (1000, 4, 1003)


def test_deleting_facts_and_messages_clears_their_side_rows_as_in_sqlite(
    lite: Any, pgc: Any
) -> None:
    setup: list[tuple[str, tuple]] = [
        _fact(1, "one", None),
        _fact(2, "two", None, "episode"),
        _fact(3, "three", None),
        _message(10, "m10", "source"),
        _message(11, "m11", "another"),
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
    _both(lite, pgc, setup)
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
        _both(lite, pgc, step)
        for table, order in tables.items():
            assert _dump(pgc, table, order) == _dump(lite, table, order), (step, table)
    assert _dump(pgc, "episodes", "fact_id")[0][0] == 1


def test_a_vector_table_refuses_a_vector_of_the_wrong_width(pgc: Any) -> None:
    pgc.execute(
        "INSERT INTO embedding_models (id, model, dims, created_at) VALUES (1, 'm', 3, 't')"
    )
    pgc.execute("INSERT INTO vec_facts VALUES (1, 1, 'g1', '[1,0,0]')")
    with pytest.raises(psycopg.errors.RaiseException, match="dimension mismatch"):
        pgc.execute("INSERT INTO vec_messages VALUES (1, 5, 'g1', '[1,0]')")


_SAMPLES = [
    "",
    "plain ASCII, with punctuation: yes!",
    "Café naïve résumé Ærøskøbing ß",
    "e\u0301 combining accent",  # NFKC composes it
    "ﬁ ligature, ｆｕｌｌ ｗｉｄｔｈ, ①②, ㌔",  # NFKC compatibility forms
    "明日は東京で会議",
    "我住在东京。他住在北京!",
    "猫",
    "ひらがな カタカナ ｶﾀｶﾅ",
    "한국어 텍스트 입니다",
    "ภาษาไทยไม่มีช่องว่าง",
    "emoji 😀🎉 and 👩\u200d👩\u200d👧 family",
    "mixed東京abc大阪123京都",
    "𠀋𠀌𠀍 extension B",
    "Привет мир, Γειά σου",
    "zero\u200bwidth and\ufeffbom",
    "ㄅㄆㄇ bopomofo",
    "မြန်မာ ខ្មែរ ລາວ",
]


def test_the_fts_text_function_is_the_python_one(pgc: Any) -> None:
    for text in [*_SAMPLES, None]:
        got = pgc.execute("SELECT guildlore_fts_text(%s)", (text,)).fetchone()[0]
        assert got == fts_index_text(text), text


def test_knn_over_a_guilds_fact_vectors_returns_the_nearest(pgc: Any) -> None:
    rng = np.random.default_rng(7)
    pgc.execute(
        "INSERT INTO embedding_models (id, model, dims, created_at) VALUES (4, 'm', 8, 't')"
    )
    vectors = rng.normal(size=(40, 8)).astype(np.float32)
    guilds = ["g1" if i % 2 else "g2" for i in range(40)]
    with pgc.cursor() as cur:
        cur.executemany(
            "INSERT INTO vec_facts (model_id, fact_id, guild_id, embedding) "
            "VALUES (4, %s, %s, %s::vector)",
            [(i, guilds[i], str(v.tolist())) for i, v in enumerate(vectors)],
        )
    query = rng.normal(size=8).astype(np.float32)
    rows = pgc.execute(
        "SELECT fact_id, embedding <=> %s::vector AS distance FROM vec_facts "
        "WHERE model_id = 4 AND guild_id = 'g1' ORDER BY distance LIMIT 5",
        (str(query.tolist()),),
    ).fetchall()
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosine = 1 - unit @ (query / np.linalg.norm(query))
    mine = [i for i in np.argsort(cosine) if guilds[i] == "g1"][:5]
    assert [r[0] for r in rows] == [int(i) for i in mine]
    assert [r[1] for r in rows] == pytest.approx([float(cosine[i]) for i in mine], abs=1e-5)


def test_the_fts_text_function_is_the_python_one_on_random_mixed_text(pgc: Any) -> None:
    pieces = [
        "abc XYZ 12 ",
        "éèêëçñüÅØß",
        "東京大阪京都北京会议",
        "ひらがなカタカナｶﾀｶﾅ",
        "한국어텍스트",
        "ภาษาไทย",
        "😀🎉👍",
        " .,!?-_'\"\t\n",
        "ﬁ①㌔ｆｕｌ",
        "\u200b\u200d\ufe0f",
    ]
    alphabet = "".join(pieces)
    rng = random.Random(16)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(400)]
    rows = pgc.execute(
        "SELECT guildlore_fts_text(t) FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n) "
        "ORDER BY n",
        (texts,),
    ).fetchall()
    assert [r[0] for r in rows] == [fts_index_text(t) for t in texts]


_TEXTS = [
    "Alice paints birds in the park",
    "The meeting moved to 2024-05-01 at 3.14pm, see x@y.com or https://a.b/c",
    "Crème brûlée at the CAFÉ with Zoë; naïve Ångström",
    "Straße und Größe",
    "v1.2.3 released; foo-bar o'reilly hello_world",
    "明日は東京で会議",
    "我住在东京。他住在北京!",
    "猫がいる",
    "한국어 텍스트 입니다",
    "Привет мир, Γειά σου κόσμε",
    "emoji 😀🎉 party",
    "ｆｕｌｌ ｗｉｄｔｈ ＡＢＣ",
]
_QUERIES = [
    "paint birds",
    "painting",
    "when is the meeting on 2024-05-01",
    "3.14",
    "x@y.com",
    "cafe creme brulee",
    "Café naïve",
    "angstrom zoe",
    "strasse größe",
    "v1.2.3 foo bar reilly",
    "hello world",
    "東京の会議",
    "北京",
    "猫",
    "한국어",
    "мир",
    "κόσμε",
    "full width abc",
    "party 🎉",
]


def test_a_match_expression_finds_the_rows_sqlite_finds(lite: Any, pgc: Any) -> None:
    from memory.retrieval.query import fts_match_expression

    _both(lite, pgc, [_message(i + 1, f"m{i}", text) for i, text in enumerate(_TEXTS)])
    checked = 0
    for query in _QUERIES:
        for prefixes in (False, True):
            expr = fts_match_expression(query, prefixes=prefixes)
            assert expr is not None, query
            want = [
                r[0]
                for r in lite.execute(
                    "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid",
                    (expr,),
                )
            ]
            got = [
                r[0]
                for r in pgc.execute(
                    "SELECT rowid FROM messages_fts WHERE tsv @@ guildlore_fts_match(%s) "
                    "ORDER BY rowid",
                    (expr,),
                )
            ]
            assert got == want, (query, expr)
            checked += bool(want)
    assert checked >= 20  # most queries find something


def test_a_match_expression_the_store_never_writes_is_refused(pgc: Any) -> None:
    with pytest.raises(psycopg.errors.RaiseException, match="not a quoted FTS phrase"):
        pgc.execute("SELECT guildlore_fts_match('alice AND bob')")
