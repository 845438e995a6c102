"""The rewriting of the store's SQLite spellings for PostgreSQL (pure)."""

from __future__ import annotations

import pytest

from memory.db.postgres.driver import translate
from memory.db.sqlite import driver as sqlite
from memory.store.fts import phrases


def sql(statement: str) -> str:
    return translate(statement)[0]


def test_parameters_and_percent_signs() -> None:
    assert sql("SELECT * FROM t WHERE a = ? AND b LIKE '%?%'") == (
        "SELECT * FROM t WHERE a = %s AND b ILIKE '%%?%%'"
    )
    assert sql("UPDATE t SET a = :t WHERE id = :id AND c::text = 'x:y'") == (
        "UPDATE t SET a = %(t)s WHERE id = %(id)s AND c::text = 'x:y'"
    )


def test_insert_or_ignore_becomes_on_conflict() -> None:
    out, ignore, table = translate("INSERT OR IGNORE INTO pins (a, b) VALUES (?, ?)")
    assert out == "INSERT INTO pins (a, b) VALUES (%s, %s) ON CONFLICT DO NOTHING"
    assert ignore and table == "pins"
    out, _, _ = translate("INSERT OR IGNORE INTO t (a) VALUES (?) RETURNING id")
    assert out == "INSERT INTO t (a) VALUES (%s) ON CONFLICT DO NOTHING RETURNING id"


def test_insert_or_replace_is_refused() -> None:
    with pytest.raises(sqlite.OperationalError):
        translate("INSERT OR REPLACE INTO t (a) VALUES (?)")


def test_scalar_extrema_but_not_aggregates() -> None:
    assert sql("SELECT max(a, coalesce(b, ?)), min(c), max(d) FROM t") == (
        "SELECT greatest(a, coalesce(b, %s)), min(c), max(d) FROM t"
    )
    assert sql("SET x = min(coalesce(x, :t), :t)") == "SET x = least(coalesce(x, %(t)s), %(t)s)"


def test_sqlite_only_spellings() -> None:
    assert sql("BEGIN IMMEDIATE") == "BEGIN"
    assert sql("SELECT a FROM t ORDER BY a LIMIT -1 OFFSET ?") == (
        "SELECT a FROM t ORDER BY a LIMIT ALL OFFSET %s"
    )
    assert sql("SELECT instr(a, ?) FROM t WHERE a NOT LIKE ?") == (
        "SELECT strpos(a, %s) FROM t WHERE a NOT ILIKE %s"
    )
    assert sql("SELECT a FROM t WHERE +guild_id = ? AND n = x + 1") == (
        "SELECT a FROM t WHERE guild_id = %s AND n = x + 1"
    )


def test_phrases_of_a_match_expression() -> None:
    assert phrases('"paint" OR "paint"*') == [("paint", False), ("paint", True)]
    assert phrases('"o""brien" OR "猫"*') == [('o"brien', False), ("猫", True)]
    assert phrases("") == []


def test_literals_are_never_rewritten_and_extrema_see_through_them() -> None:
    assert sql("SELECT max(coalesce(a, ''), b) FROM t WHERE c = 'max(x, y) LIKE ?'") == (
        "SELECT greatest(coalesce(a, ''), b) FROM t WHERE c = 'max(x, y) LIKE ?'"
    )
    assert sql("SELECT 'it''s 5%' || ?") == "SELECT 'it''s 5%%' || %s"
