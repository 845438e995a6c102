"""Whether the database answers, and when the process gives up on it
(``memory.db.status``), and SQLite's errors that do not pass by themselves:
a damaged file, the file deleted or replaced under a running process — on
the database layer, in health, and for a real ``guildlore run`` process,
which exits 74 with one line saying why instead of failing the same way for
ever."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.runtime import FAKE_READY_LINE
from memory.config import EmbeddingConfig, MemoryConfig
from memory.db.sqlite.database import SqliteDatabase
from memory.db.status import DbStatus
from memory.engine import Memory
from memory.errors import DatabaseUnavailable

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 120.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_starts_with_a_failed_attempt_and_ends_with_a_connection() -> None:
    clock = Clock()
    status = DbStatus(60, monotonic=clock, wall=lambda: 1_800_000_000.0)
    status.suspect("server closed the connection unexpectedly")
    assert status.reachable  # a broken connection alone is not an outage
    status.attempt_failed("connection refused")
    state = status.as_dict()
    assert state["reachable"] is False
    assert state["unreachable_since"] == "2027-01-15T08:00:00+00:00"
    assert state["reconnect_attempts"] == 1 and state["outages"] == 1
    assert state["last_error"] == "connection refused"
    clock.now += 30
    status.attempt_failed("connection refused")
    assert status.check() is None and status.unreachable_for() == 30
    status.raise_if_failed()  # within the limit: work waits
    status.connected()
    state = status.as_dict()
    assert state["reachable"] is True and state["unreachable_since"] is None
    assert state["reconnects"] == 1 and state["reconnect_attempts"] == 2
    assert state["unreachable_s"] == 0


def test_past_the_limit_the_process_gives_up_once_with_the_reason() -> None:
    clock = Clock()
    status = DbStatus(60, monotonic=clock, wall=lambda: 1_800_000_000.0)
    status.attempt_failed("connection refused")
    clock.now += 61
    reason = status.check()
    assert reason is not None
    assert reason.startswith("database unreachable since 2027-01-15T08:00:00+00:00 (61 s")
    assert "database.unreachable_exit_s = 60" in reason and "connection refused" in reason
    with pytest.raises(DatabaseUnavailable) as raised:
        status.raise_if_failed()
    assert raised.value.unreachable is True
    status.connected()  # too late: the process stops using it
    assert status.failure == reason and status.failure_kind == "unreachable"


def test_a_limit_of_zero_waits_for_ever() -> None:
    clock = Clock()
    status = DbStatus(0, monotonic=clock)
    status.attempt_failed("connection refused")
    clock.now += 10**6
    assert status.check() is None
    status.raise_if_failed()


async def test_waiting_for_a_failure_returns_the_probes_reason() -> None:
    status = DbStatus(0)
    found: list[str] = []
    status.probe = lambda: found[0] if found else None
    waiter = asyncio.ensure_future(status.wait_failure())
    await asyncio.sleep(0)
    assert not waiter.done()
    found.append("the database file x was deleted under the process")
    assert await asyncio.wait_for(waiter, WAIT_S) == found[0]
    assert status.failure_kind == "damaged"


@pytest.fixture
async def sqlite_db(tmp_path: Path) -> Any:
    db = SqliteDatabase(tmp_path / "memory.sqlite3")
    await db.open()
    try:
        yield db
    finally:
        await db.close()


def _fill(con: Any) -> None:
    con.execute("CREATE TABLE filler (n INTEGER PRIMARY KEY, body BLOB)")
    con.executemany(
        "INSERT INTO filler (n, body) VALUES (?, randomblob(3000))", [(i,) for i in range(600)]
    )


def _damage(path: Path) -> None:
    """Garbage over the table's pages, behind SQLite's back (a bad disk)."""
    with open(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(size // 2)
        f.write(os.urandom(size // 4))


async def test_a_damaged_sqlite_file_fails_once_then_every_call_says_so(
    sqlite_db: SqliteDatabase,
) -> None:
    await sqlite_db.write(_fill)
    await sqlite_db.exclusive(lambda con: con.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
    _damage(sqlite_db.path)
    with pytest.raises(Exception) as first:
        await sqlite_db.read(
            lambda con: con.execute("SELECT sum(length(body)) FROM filler").fetchone()
        )
    assert "malformed" in str(first.value) or "not a database" in str(first.value)
    assert sqlite_db.status.failure is not None and "SQLITE_" in sqlite_db.status.failure
    for call in (
        sqlite_db.read(lambda con: con.execute("SELECT 1").fetchone()),
        sqlite_db.write(lambda con: con.execute("SELECT 1")),
        sqlite_db.write(lambda con: con.execute("SELECT 1"), urgent=True),
    ):
        with pytest.raises(DatabaseUnavailable) as raised:
            await call
        assert raised.value.unreachable is False


async def test_a_sqlite_file_deleted_or_replaced_under_the_process_is_a_failure(
    sqlite_db: SqliteDatabase, tmp_path: Path
) -> None:
    assert sqlite_db.status.check() is None
    other = tmp_path / "other.sqlite3"
    other.write_bytes(sqlite_db.path.read_bytes())
    os.replace(other, sqlite_db.path)
    assert "was replaced under the process" in str(sqlite_db.status.check())
    fresh = SqliteDatabase(tmp_path / "second.sqlite3")
    await fresh.open()
    try:
        os.unlink(fresh.path)
        assert "was deleted under the process" in str(fresh.status.check())
    finally:
        await fresh.close()


async def test_health_says_the_process_gave_up_on_a_damaged_database(
    tmp_path: Path, database_url_for: Callable[[Path], str | None]
) -> None:
    cfg = MemoryConfig.for_data_dir(
        tmp_path,
        database_url=database_url_for(tmp_path),
        embedding=EmbeddingConfig(provider="none"),
    )
    mem = await Memory.open(cfg, ingest=False)
    try:
        mem.db.status.fail(
            "the database x failed: database disk image is malformed (SQLITE_CORRUPT)"
        )
        health = await mem.admin.health()
        assert health["ok"] is False
        assert health["database_connection"]["failure_kind"] == "damaged"
        assert health["warnings"] == [
            "the process gave up on the database: the database x failed: database disk image is "
            "malformed (SQLITE_CORRUPT)"
        ]
    finally:
        with contextlib.suppress(DatabaseUnavailable):
            await mem.close()


@pytest.mark.slow
async def test_guildlore_run_exits_74_with_one_line_when_its_sqlite_file_is_deleted(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "GUILDLORE_FAKE_GATEWAY": "1",
        "GUILDLORE_LLM_EXTRACTOR": "rules",
        "GUILDLORE_EMBEDDING_PROVIDER": "none",
        "GUILDLORE_DASHBOARD_ENABLED": "false",
        "GUILDLORE_VOICE_ENABLED": "false",
    }
    env.pop("DISCORD_TOKEN", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "run",
        "--data-dir",
        str(data),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(WAIT_S):
            while (await proc.stdout.readline()).decode().strip() != FAKE_READY_LINE:
                assert proc.returncode is None
        (data / "guildlore.sqlite3").unlink()
        _, err = await asyncio.wait_for(proc.communicate(), WAIT_S)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    lines = err.decode().splitlines()
    assert proc.returncode == 74, "\n".join(lines[-30:])
    why = [line for line in lines if "exiting with status 74" in line]
    assert len(why) == 1 and "was deleted under the process" in why[0], "\n".join(lines[-30:])
    assert not any("Traceback" in line for line in lines), "\n".join(lines[-30:])
