"""PostgreSQL's connections coming back, on a real server: a transaction whose
connection dies runs again on a new one (once it is certain it did not
commit), a deadlock's victim runs again, a read runs again, the listener
listens again and says it may have missed commits.

Connections are cut the way a server restart cuts them: the backend is
terminated (``pg_terminate_backend``), from inside the transaction itself
where the moment matters — during a statement, or during ``COMMIT`` (a
deferred trigger).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memory.db.changes import ExternalCommit
from memory.db.postgres import pools
from memory.db.postgres.database import PgDatabase
from tests.helpers import eventually

pytestmark = pytest.mark.postgresql_only

WAIT_S = 60.0


@pytest.fixture
def url(database_url_for: Callable[[Path], str | None], tmp_path: Path) -> str:
    found = database_url_for(tmp_path)
    assert found is not None
    return found


@pytest.fixture
def admin(url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection of the test's own, outside the database under test's pools."""
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("CREATE TABLE probe (k text PRIMARY KEY, n integer NOT NULL)")
        yield con


async def _open(url: str) -> PgDatabase:
    db = PgDatabase(url)
    await db.open()
    return db


def _rows(admin: psycopg.Connection[Any]) -> list[tuple[str, int]]:
    return [tuple(r) for r in admin.execute("SELECT k, n FROM probe ORDER BY k").fetchall()]


async def test_a_write_whose_connection_dies_mid_transaction_runs_again_once(
    url: str, admin: psycopg.Connection[Any]
) -> None:
    db = await _open(url)
    calls: list[int] = []

    def write(con: Any, key: str) -> str:
        calls.append(1)
        con.execute("INSERT INTO probe (k, n) VALUES (?, ?)", (key, len(calls)))
        if len(calls) == 1:  # the server ends this connection before COMMIT
            con.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return key

    try:
        assert await db.write(write, "a") == "a"
        assert await db.write(write, "u", urgent=True) == "u"
        # Ran twice: the first run's insert was rolled back with its connection.
        assert len(calls) == 3
        assert _rows(admin) == [("a", 2), ("u", 3)]
        assert db.retried_transactions == 1
        assert db.urgent_writer is not None and db.urgent_writer.retried_groups == 0
    finally:
        await db.close()


async def test_an_urgent_write_whose_connection_dies_runs_again_and_acknowledges_once(
    url: str, admin: psycopg.Connection[Any]
) -> None:
    db = await _open(url)
    calls: list[str] = []

    def write(con: Any, key: str) -> str:
        calls.append(key)
        con.execute("INSERT INTO probe (k, n) VALUES (?, 1)", (key,))
        if calls.count(key) == 1 and key == "x":
            con.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return key

    try:
        assert await db.write(write, "x", urgent=True) == "x"
        assert calls == ["x", "x"]
        assert _rows(admin) == [("x", 1)]
        assert db.urgent_writer is not None and db.urgent_writer.retried_groups == 1
    finally:
        await db.close()


@pytest.mark.parametrize("urgent", [False, True], ids=["writer", "urgent"])
async def test_a_connection_lost_during_commit_is_looked_up_and_runs_again_if_it_did_not_commit(
    url: str, admin: psycopg.Connection[Any], urgent: bool
) -> None:
    """A deferred trigger ends the backend while ``COMMIT`` runs: the client
    cannot know the outcome from the connection; the transaction id tells
    (it did not commit), and the write runs again."""
    admin.execute("CREATE SEQUENCE kill_once")
    admin.execute(
        "CREATE FUNCTION die_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF nextval('kill_once') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); "
        "PERFORM pg_sleep(5); END IF; RETURN NULL; END $$"
    )
    admin.execute(
        "CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON probe DEFERRABLE INITIALLY "
        "DEFERRED FOR EACH ROW EXECUTE FUNCTION die_at_commit()"
    )
    db = await _open(url)
    calls: list[int] = []

    def write(con: Any) -> int:
        calls.append(1)
        con.execute("INSERT INTO probe (k, n) VALUES ('c', ?)", (len(calls),))
        return len(calls)

    try:
        assert await db.write(write, urgent=urgent) == 2
        assert _rows(admin) == [("c", 2)]
        assert db.urgent_writer is not None
        assert (db.urgent_writer if urgent else db).commit_lookups == 1
    finally:
        await db.close()


def test_the_outcome_of_a_commit_is_read_by_its_transaction_id(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("BEGIN")
        committed = con.execute("SELECT pg_current_xact_id()::text").fetchone()[0]
        con.execute("COMMIT")
        con.execute("BEGIN")
        rolled_back = con.execute("SELECT pg_current_xact_id()::text").fetchone()[0]
        con.execute("ROLLBACK")
        assert pools.commit_outcome(con, committed) is True
        assert pools.commit_outcome(con, rolled_back) is False
        # An id the server never handed out (it restarted before logging it).
        assert pools.commit_outcome(con, str(int(committed) + 10**9)) is False


async def test_a_deadlocks_victim_runs_again(url: str, admin: psycopg.Connection[Any]) -> None:
    """The writer and the urgent connection lock two rows in opposite orders:
    PostgreSQL aborts one of them; it runs again and both commit."""
    admin.execute("INSERT INTO probe (k, n) VALUES ('one', 0), ('two', 0)")
    db = await _open(url)
    first_locked, second_locked = threading.Event(), threading.Event()

    def writer(con: Any) -> str:
        con.execute("UPDATE probe SET n = n + 1 WHERE k = 'one'")
        first_locked.set()
        second_locked.wait(WAIT_S)
        con.execute("UPDATE probe SET n = n + 10 WHERE k = 'two'")
        return "writer"

    def urgent(con: Any) -> str:
        first_locked.wait(WAIT_S)
        con.execute("UPDATE probe SET n = n + 100 WHERE k = 'two'")
        second_locked.set()
        con.execute("UPDATE probe SET n = n + 1000 WHERE k = 'one'")
        return "urgent"

    try:
        results = await asyncio.gather(db.write(writer), db.write(urgent, urgent=True))
        assert results == ["writer", "urgent"]
        assert _rows(admin) == [("one", 1001), ("two", 110)]
        assert db.urgent_writer is not None
        assert db.retried_transactions + db.urgent_writer.retried_groups == 1
    finally:
        await db.close()


async def test_a_read_whose_connection_died_runs_again(
    url: str, admin: psycopg.Connection[Any]
) -> None:
    db = await _open(url)
    try:
        assert await db.read(lambda con: con.execute("SELECT 1").fetchone()[0]) == 1
        # Every connection of the database under test ends (as in a restart).
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND application_name = 'guildlore'"
        )
        for _ in range(4):  # more reads than reader connections: each finds its own dead
            assert await db.read(lambda con: con.execute("SELECT 2").fetchone()[0]) == 2
        assert await db.write(lambda con: con.execute("SELECT 3").fetchone()[0]) == 3
        assert db.status.reachable and db.status.failure is None
    finally:
        await db.close()


async def test_the_listener_listens_again_and_says_what_it_may_have_missed(
    url: str, admin: psycopg.Connection[Any]
) -> None:
    here, other = await _open(url), await _open(url)
    heard: list[Any] = []
    here.subscribe(lambda changes: heard.extend(changes))
    try:
        await other.write(lambda con: con.execute("INSERT INTO probe VALUES ('a', 1)"))
        assert await eventually(lambda: here.external_commits == 1, WAIT_S)
        # The listener's connection ends (its LISTEN with it).
        with contextlib.suppress(psycopg.Error):
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE query LIKE 'LISTEN%%' AND datname = current_database()"
            )
        # It listens again, and says it may have missed commits meanwhile.
        assert await eventually(lambda: heard.count(ExternalCommit()) >= 1, WAIT_S), heard
        before = here.external_commits
        await other.write(lambda con: con.execute("INSERT INTO probe VALUES ('b', 1)"))
        assert await eventually(lambda: here.external_commits == before + 1, WAIT_S)
    finally:
        await other.close()
        await here.close()


async def test_a_transaction_that_breaks_every_connection_fails_after_a_bound(
    url: str, admin: psycopg.Connection[Any]
) -> None:
    """One that kills its backend every time (a statement that crashes the
    server's process) is not run for ever: its error comes back."""
    db = await _open(url)
    calls: list[int] = []

    def poison(con: Any) -> None:
        calls.append(1)
        con.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    try:
        with pytest.raises(Exception, match="terminating connection"):
            await db.write(poison)
        assert len(calls) == pools.LOST_ATTEMPTS + 1
        # The database itself is fine, and so is the next write.
        assert await db.write(lambda con: con.execute("SELECT 1").fetchone()[0]) == 1
    finally:
        await db.close()
