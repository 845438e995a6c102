"""The database's change events (delivered after COMMIT, dropped on ROLLBACK,
another connection's commits noticed) and the bound on the WAL under
sustained writes with readers always busy."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from memory.db.changes import Change, ExternalCommit, VectorsRemoved, record
from memory.db.sqlite import driver as sqlite
from memory.db.sqlite.database import SqliteDatabase


def _put(con: Any, key: str, value: str = "v") -> None:
    con.execute(
        "INSERT INTO guild_settings (guild_id, key, value, updated_at) VALUES ('g', ?, ?, 'now')",
        (key, value),
    )


def _size(path: Path) -> int:
    return path.stat().st_size


class Recorder:
    """A subscriber that also checks, with a connection of its own, that the
    transaction is visible (committed) when its events arrive."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.got: list[Change] = []
        self.visible_at_delivery: list[bool] = []

    def __call__(self, changes: Sequence[Change]) -> None:
        self.got.extend(changes)
        for c in changes:
            if isinstance(c, VectorsRemoved):
                con = sqlite.connect(self.path, read_only=True)
                try:
                    key = f"k{c.ids[0]}"
                    row = con.execute(
                        "SELECT 1 FROM guild_settings WHERE guild_id = 'g' AND key = ?", (key,)
                    ).fetchone()
                    self.visible_at_delivery.append(row is not None)
                finally:
                    con.close()


def _write_and_record(con: Any, n: int, fail: bool = False) -> None:
    _put(con, f"k{n}")
    record(con, VectorsRemoved("facts", (n,)))
    if fail:
        raise ValueError("roll back")


async def test_changes_arrive_after_commit_and_never_after_rollback(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "x.sqlite3")
    await db.open()
    rec = Recorder(db.path)
    unsubscribe = db.subscribe(rec)
    try:
        await db.write(_write_and_record, 1)
        with pytest.raises(ValueError):
            await db.write(_write_and_record, 2, True)
        await db.write(_write_and_record, 3, urgent=True)  # the fast path too
        await db.write_each(_write_and_record, [4, 5])
        with pytest.raises(ValueError):
            await db.write_each(_write_and_record, [6, 7], True)
        assert rec.got == [VectorsRemoved("facts", (n,)) for n in (1, 3, 4, 5)]
        assert rec.visible_at_delivery == [True, True, True, True]
        # Writes that record nothing deliver nothing.
        await db.write(_put, "plain")
        assert len(rec.got) == 4
        unsubscribe()
        await db.write(_write_and_record, 8)
        assert len(rec.got) == 4
    finally:
        await db.close()


async def test_a_failing_subscriber_does_not_fail_the_committed_write(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "x.sqlite3")
    await db.open()

    def broken(changes: Sequence[Change]) -> None:
        raise RuntimeError("cache bug")

    db.subscribe(broken)
    try:
        await db.write(_write_and_record, 1)
        keys = await db.read(
            lambda con: [r[0] for r in con.execute("SELECT key FROM guild_settings")]
        )
        assert keys == ["k1"]
    finally:
        await db.close()


async def test_another_connections_commit_is_noticed_but_not_our_own_work(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite3"
    # Tiny checkpoint interval and WAL limit: our own passive checkpoints and
    # restarts run many times here, and must not look like someone else's commit.
    ours = SqliteDatabase(path, checkpoint_every=1, wal_limit_bytes=16 * 1024)
    theirs = SqliteDatabase(path)
    await ours.open()
    await theirs.open()
    got: list[Change] = []
    ours.subscribe(got.extend)
    try:
        for i in range(60):
            await ours.write(_put, f"ours{i}", "x" * 2000)
            await ours.read(
                lambda con: con.execute("SELECT count(*) FROM guild_settings").fetchone()
            )
        assert ours.wal_restarts > 0
        assert got == []
        await theirs.write(_put, "theirs")
        await ours.read(lambda con: None)  # a read looks, as a write does
        assert got == [ExternalCommit()]
        await ours.write(_put, "ours-again")
        assert got == [ExternalCommit()]  # noticed once
        await theirs.write(_put, "theirs-again")
        await ours.write(_put, "ours-third")  # a write looks too
        assert got == [ExternalCommit(), ExternalCommit()]
    finally:
        await theirs.close()
        await ours.close()


async def test_sustained_writes_with_readers_always_busy_keep_the_wal_bounded(
    tmp_path: Path,
) -> None:
    """Two reader threads in back-to-back read transactions: every write begins
    with a reader inside the WAL, so SQLite never starts it over by itself;
    without the restarting checkpoint it holds every page written (~20 MB here)."""
    limit = 512 * 1024
    db = SqliteDatabase(tmp_path / "x.sqlite3", checkpoint_every=10, wal_limit_bytes=limit)
    await db.open()
    wal = Path(f"{db.path}-wal")
    stop = asyncio.Event()

    def slow_read(con: Any) -> int:
        n = int(con.execute("SELECT count(*) FROM guild_settings").fetchone()[0])
        time.sleep(0.02)  # a read transaction held open, as a search or a load is
        return n

    async def reader() -> None:
        while not stop.is_set():
            await db.read(slow_read)

    readers = [asyncio.create_task(reader())]
    await asyncio.sleep(0.01)  # staggered: one of them is always inside a read
    readers.append(asyncio.create_task(reader()))
    peak = 0
    try:
        for i in range(1000):
            await db.write(_put, f"k{i}", "x" * 8000)  # ~20 KB of WAL per commit
            peak = max(peak, _size(wal))
    finally:
        stop.set()
        await asyncio.gather(*readers)
        await db.close()
    assert db.wal_restarts > 0
    # The limit, plus what the commits between two checks add, plus slack for
    # a restart that had to wait a round.
    assert peak <= 4 * limit, peak


async def test_exclusive_holding_reads_waits_for_them_and_empties_the_wal(tmp_path: Path) -> None:
    """``exclusive(hold_reads=True)`` starts once the read in progress ends,
    keeps new reads out until it returns — so a TRUNCATE checkpoint in it
    completes — and an urgent write issued meanwhile runs after it."""
    import threading

    db = SqliteDatabase(tmp_path / "x.sqlite3")
    await db.open()
    wal = Path(f"{db.path}-wal")
    read_may_end = threading.Event()
    fn_may_end = threading.Event()
    fn_started = threading.Event()
    read_started = threading.Event()
    order: list[str] = []

    def long_read(con: Any) -> None:
        con.execute("SELECT count(*) FROM guild_settings").fetchone()
        read_started.set()
        read_may_end.wait(30)
        order.append("first read ends")

    def truncate(con: Any) -> int:
        order.append("exclusive starts")
        fn_started.set()
        fn_may_end.wait(30)
        busy = int(con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0])
        order.append("exclusive ends")
        return busy

    def second_read(con: Any) -> None:
        order.append("second read")

    def urgent(con: Any) -> None:
        _put(con, "urgent")
        order.append("urgent write")

    try:
        for i in range(20):
            await db.write(_put, f"k{i}", "x" * 2000)
        assert _size(wal) > 0
        first = asyncio.create_task(db.read(long_read))
        assert await asyncio.to_thread(read_started.wait, 30)  # the read is in progress
        job = asyncio.create_task(db.exclusive(truncate, hold_reads=True))
        await asyncio.sleep(0.1)
        assert not fn_started.is_set()  # the read in progress holds it back
        read_may_end.set()
        await first
        assert await asyncio.to_thread(fn_started.wait, 30)
        second = asyncio.create_task(db.read(second_read))
        write = asyncio.create_task(db.write(urgent, urgent=True))
        await asyncio.sleep(0.1)
        assert "second read" not in order and "urgent write" not in order
        fn_may_end.set()
        assert await job == 0
        await asyncio.gather(second, write)
    finally:
        read_may_end.set()
        fn_may_end.set()
        await db.close()
    assert order[:3] == ["first read ends", "exclusive starts", "exclusive ends"]
    assert set(order[3:]) == {"second read", "urgent write"}
