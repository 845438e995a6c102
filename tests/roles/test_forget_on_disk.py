"""forget leaves no byte of the erased member on disk, while the engine runs.

SQL not seeing a row is not enough: a page rebuilt by a split or a
defragmentation keeps stale cell bytes in its unallocated space, and the WAL
keeps old page images, so the file itself is searched byte by byte — with
other members' messages being ingested and reads in progress during the
forget. On PostgreSQL the data files are the server's: there the test is
that the text is in no row of any table and that every table was rewritten.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory.db.sqlite import driver as sqlite
from tests.helpers import ALICE, BOB, GUILD, inspect_db, msg, table_names

CAROL = "666666666666666666"
DAVE = "777777777777777777"
TARGET_NAME = "Quillonmarsh"  # the forgotten member's display name
TARGET_MESSAGES = 120


def _target_text(i: int) -> str:
    # Long, so rows overflow pages and splits move cells around; each one has
    # its own marker so every erased message is looked for separately.
    return (
        f"Note {i}: I keep the ledger of the velvetquagga{i:04d} archive, "
        f"shelf {i * 7 % 13}, and I count the jars of pickled moonfern "
        f"every evening. " + "The corridor smells of cedar and old rope. " * (3 + i % 5)
    )


def _other_text(author: str, i: int) -> str:
    return f"Member {author[-3:]} says item {i}: I like sailing, chess and the city zoo."


def _data_files(data_dir: Path) -> list[Path]:
    return [p for p in sorted(data_dir.rglob("*")) if p.is_file()]


def _vector_blobs(mem: Any, message_ids: list[str]) -> list[bytes]:
    con = inspect_db(mem)
    try:
        held = ",".join("?" * len(message_ids))
        return [
            bytes(r[0])
            for r in con.execute(
                f"SELECT v.embedding FROM message_vectors v JOIN messages m ON m.seq = v.message_seq "
                f"WHERE m.id IN ({held})",
                message_ids,
            )
        ]
    finally:
        con.close()


@dataclass
class Erased:
    """What the forgotten member left in the guild, to look for afterwards."""

    markers: list[bytes]  # one per message
    vectors: list[bytes]  # their message embeddings


async def _populate_rows(mem: Any) -> list[str]:
    """A guild where the target's long messages interleave with three other
    members' and were rewritten since, so stale copies of them exist; returns
    the target's message ids."""
    target_ids: list[str] = []
    outcomes = []
    for i in range(TARGET_MESSAGES):
        m = msg(_target_text(i), author=ALICE, name=TARGET_NAME)
        target_ids.append(m.id)
        outcomes.append(await mem.ingest_message(m, backpressure=True))
        for author in (BOB, CAROL, DAVE):
            outcomes.append(
                await mem.ingest_message(
                    msg(_other_text(author, i), author=author, name="Bob"), backpressure=True
                )
            )
    for outcome in outcomes:
        assert await outcome.wait()
    assert await mem.settle()

    # Every row of the member grown then shrunk again: cells move between and
    # within pages before the forget.
    def grow(con: Any) -> None:
        con.execute(
            "UPDATE messages SET content = content || ? WHERE author_id = ?",
            (" Postscript: " + "more cedar. " * 30, ALICE),
        )

    def shrink(con: Any, i: int, mid: str) -> None:
        con.execute("UPDATE messages SET content = ? WHERE id = ?", (_target_text(i), mid))

    await mem.db.write(grow)
    for i, mid in enumerate(target_ids):
        await mem.db.write(shrink, i, mid)
    return target_ids


async def _populate(mem: Any) -> Erased:
    """``_populate_rows``, and what to look for in the files afterwards."""
    data_dir = mem.config.db_path.parent
    target_ids = await _populate_rows(mem)
    vectors = _vector_blobs(mem, target_ids)
    assert len(vectors) == TARGET_MESSAGES
    markers = [f"velvetquagga{i:04d}".encode() for i in range(TARGET_MESSAGES)]
    before = b"".join(p.read_bytes() for p in _data_files(data_dir))
    assert all(m in before for m in markers)
    assert TARGET_NAME.encode() in before
    return Erased(markers, vectors)


@contextlib.asynccontextmanager
async def _busy(mem: Any) -> AsyncIterator[Callable[[], tuple[list[str], int]]]:
    """Keep ``mem`` ingesting another member's messages and searching until
    the block ends; yields what was ingested and how many searches ran."""
    stop = asyncio.Event()
    ingested: list[str] = []
    reads = 0

    async def keep_ingesting() -> None:
        i = 10_000
        while not stop.is_set():
            m = msg(_other_text(BOB, i), author=BOB, name="Bob")
            assert await (await mem.ingest_message(m, backpressure=True)).wait()
            ingested.append(m.id)
            i += 1

    async def keep_reading() -> None:
        nonlocal reads
        while not stop.is_set():
            await mem.search(GUILD, "sailing chess", scope="all")
            reads += 1

    tasks = [asyncio.create_task(keep_ingesting()), asyncio.create_task(keep_reading())]
    try:
        await asyncio.sleep(0.2)
        yield lambda: (ingested, reads)
        await asyncio.sleep(0.2)
    finally:
        stop.set()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _assert_gone(data_dir: Path, erased: Erased) -> None:
    for path in _data_files(data_dir):
        data = path.read_bytes()
        leaked = [m.decode() for m in erased.markers if m in data]
        assert not leaked, f"{path.name} still holds {len(leaked)} erased messages: {leaked[:5]}"
        assert TARGET_NAME.encode() not in data, path.name
        assert b"pickled moonfern" not in data, path.name
        assert not [v for v in erased.vectors if v in data], f"{path.name} still holds vectors"


async def _still_works(mem: Any, ingested: list[str]) -> None:
    for mid in ingested[-3:]:
        assert await mem.get_message(GUILD, mid) is not None
    assert await mem.search(GUILD, "sailing chess", scope="all")


@pytest.mark.sqlite_only("byte-level erasure in the SQLite file and its WAL")
async def test_forget_leaves_no_bytes_in_database_or_wal(make_memory: Any) -> None:
    mem = await make_memory()
    erased = await _populate(mem)
    async with _busy(mem) as seen:
        report = await mem.forget(GUILD, ALICE)
    ingested, reads = seen()
    assert report.messages == TARGET_MESSAGES
    assert ingested and reads  # the forget ran among writes and reads
    assert await mem.settle()
    await mem.refresh_snapshot()
    _assert_gone(mem.config.db_path.parent, erased)
    await _still_works(mem, ingested)


@pytest.mark.sqlite_only("byte-level erasure in the SQLite file and its WAL")
async def test_forget_beside_a_running_bot(make_memory: Any, local_embedder: Any) -> None:
    """The CLI's forget: an engine of its own without ingest (other
    connections, as another process has) on the data dir of a bot that keeps
    ingesting and searching meanwhile."""
    from memory.engine import Memory

    bot = await make_memory()
    erased = await _populate(bot)
    async with _busy(bot) as seen:
        cli = await Memory.open(bot.config, embedder=local_embedder, ingest=False)
        try:
            report = await cli.forget(GUILD, ALICE)
        finally:
            await cli.close()
    ingested, reads = seen()
    assert report.messages == TARGET_MESSAGES
    assert ingested and reads
    assert await bot.settle()
    await bot.refresh_snapshot()
    _assert_gone(bot.config.db_path.parent, erased)
    await _still_works(bot, ingested)


@pytest.mark.sqlite_only("VACUUM renumbers SQLite rowids that FTS5 and vec0 refer to")
async def test_compaction_keeps_every_rowid(make_memory: Any) -> None:
    """VACUUM renumbers the rows of a table with neither an INTEGER PRIMARY
    KEY nor an index; FTS5 and vec0 address rows by rowid, so the rewrite must
    leave every table's rowids (and rows) as they were."""
    from memory.store import facts as store
    from memory.store.erase import compact_erased

    mem = await make_memory()
    for i in range(40):
        author = (ALICE, BOB, CAROL)[i % 3]
        assert await (await mem.ingest_message(msg(_target_text(i), author=author))).wait()
    assert await mem.settle()
    await mem.db.write(store.forget_user, GUILD, ALICE, "test", "2026-11-22T12:00:00Z")

    def rows(con: Any) -> dict[str, list[tuple[Any, ...]]]:
        out: dict[str, list[tuple[Any, ...]]] = {}
        for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            try:
                found = con.execute(f'SELECT _rowid_, * FROM "{name}" ORDER BY 1').fetchall()
            except sqlite.Error:  # virtual and WITHOUT ROWID tables have no _rowid_
                continue
            out[name] = [tuple(r) for r in found]
        return out

    before = await mem.db.read(rows)
    assert any(name.startswith("vec_messages_") for name in before)
    await compact_erased(mem.db)
    assert await mem.db.read(rows) == before
    assert await mem.search(GUILD, "pickled moonfern", scope="all")


def _stored_cells(con: Any) -> tuple[str, list[bytes]]:
    """Every text cell of every table, joined, and every binary cell."""
    texts: list[str] = []
    blobs: list[bytes] = []
    for table in table_names(con):
        for row in con.execute(f'SELECT * FROM "{table}"'):
            for v in tuple(row):
                if isinstance(v, bytes | memoryview):
                    blobs.append(bytes(v))
                elif v is not None:
                    texts.append(str(v))
    return "\n".join(texts), blobs


def _vector_text(blob: bytes) -> str:
    """A float32 vector blob in pgvector's text form."""
    return "[" + ",".join(repr(float(x)) for x in np.frombuffer(blob, dtype=np.float32)) + "]"


def _indexed_vectors(con: Any, vectors: list[bytes]) -> int:
    """How many of ``vectors`` the message KNN tables (one per model) hold."""
    tables = [t for t in table_names(con) if t.startswith("vec_messages")]
    assert tables
    return sum(
        int(
            con.execute(
                f"SELECT count(*) FROM {table} WHERE embedding = ?::vector", (_vector_text(v),)
            ).fetchone()[0]
        )
        for table in tables
        for v in vectors
    )


def _file_nodes(con: Any) -> dict[str, int]:
    """Each table's data file (a rewrite gives a table a new one)."""
    return {
        t: int(con.execute("SELECT pg_relation_filenode(?::regclass)", (t,)).fetchone()[0])
        for t in table_names(con)
    }


@pytest.mark.postgresql_only("erasure on PostgreSQL: the rows, then VACUUM (FULL)")
async def test_forget_on_postgresql_leaves_nothing_in_any_table_and_rewrites_them(
    make_memory: Any,
) -> None:
    """The rows go in the forget's transaction; the old row versions a
    DELETE or UPDATE leaves in the table files go with the rewrite of every
    table that follows (``VACUUM (FULL)``), run among writes and reads."""
    mem = await make_memory()
    target_ids = await _populate_rows(mem)
    markers = [f"velvetquagga{i:04d}" for i in range(TARGET_MESSAGES)]
    con = inspect_db(mem)
    try:
        vectors = _vector_blobs(mem, target_ids)
        assert len(vectors) == TARGET_MESSAGES
        text, blobs = _stored_cells(con)
        assert all(m in text for m in markers) and TARGET_NAME in text
        assert all(v in blobs for v in vectors)
        assert _indexed_vectors(con, vectors) == TARGET_MESSAGES
        files = _file_nodes(con)

        async with _busy(mem) as seen:
            report = await mem.forget(GUILD, ALICE)
        ingested, reads = seen()
        assert report.messages == TARGET_MESSAGES
        assert ingested and reads
        assert await mem.settle()
        await mem.refresh_snapshot()

        text, blobs = _stored_cells(con)
        leaked = [m for m in markers if m in text]
        assert not leaked, f"{len(leaked)} erased messages remain: {leaked[:5]}"
        assert TARGET_NAME not in text and "pickled moonfern" not in text
        assert not [v for v in vectors if v in blobs]
        assert _indexed_vectors(con, vectors) == 0
        # Every table was written anew from its live rows.
        now = _file_nodes(con)
        assert [t for t in files if now.get(t) == files[t]] == []
    finally:
        con.close()
    await _still_works(mem, ingested)
