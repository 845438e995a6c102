"""Compaction after an erase: no byte of deleted content left in the file.

``secure_delete`` zeroes the cell a DELETE frees, but not the stale copies an
earlier change left behind: a page rebuilt by a split or a defragmentation
keeps old cell bytes in its unallocated space, FTS5 and vec0 shadow tables
are rewritten the same way, and the WAL holds old page images until it is
checkpointed and truncated. So after an erase commits, ``VACUUM`` rebuilds
every page of the database from live content only (in WAL mode it writes the
new pages as WAL frames), and a TRUNCATE checkpoint copies them over the old
ones in the main file, shrinks the file to the new size and empties the WAL.

Writes wait meanwhile (they share the writer connection). Reads go on during
the VACUUM, on the snapshot they started with; the checkpoint that follows
holds this process's reads back, since it can empty the WAL only when no read
transaction is open. The cost is a rewrite of the whole database — worth it
for an erase, which is rare and must be complete. VACUUM builds its copy in
memory (every connection has ``temp_store = MEMORY``): for the moment, extra
memory about the size of the database.

Processes sharing the database rewrite it one at a time: a rewrite takes the
``compaction`` lease first. A debounced rewrite that finds it held (another
process is rewriting now) tries again after its delay; one an erase waits for
waits for the lease, up to ``LEASE_WAIT_S``, then rewrites anyway (two
rewrites at once are only slower: SQLite's locks keep them apart).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memory.clock import iso
from memory.db.core import Connection, Database
from memory.db.sql import dialect_of
from memory.db.sqlite import driver as sqlite
from memory.errors import StorageError
from memory.store import leases as store_leases
from memory.store import lifecycle_events as store_events

log = logging.getLogger(__name__)

LEASE = "compaction"
# Longer than a rewrite of a large database takes; a crashed holder's lease
# is taken over after it.
LEASE_S = 600.0
LEASE_WAIT_S = 60.0  # an erase waiting for another process's rewrite
LEASE_POLL_S = 0.25


@dataclass(frozen=True)
class Compaction:
    pages: int  # pages in the database after the rewrite
    seconds: float  # wall time of the rewrite and the checkpoint


def _vacuum(con: Connection) -> int:
    if dialect_of(con) == "postgresql":
        return _vacuum_full(con)
    con.execute("VACUUM")
    # Copy what it can while reads go on, so the checkpoint that holds them
    # back has little left to do.
    con.execute("PRAGMA wal_checkpoint(PASSIVE)")
    return int(con.execute("PRAGMA page_count").fetchone()[0])


def _vacuum_full(con: Connection) -> int:
    """PostgreSQL: ``VACUUM FULL`` writes each table anew from its live rows
    and deletes the old file, and a ``CHECKPOINT`` puts the rewrite in the data
    files. Every table is locked against reads and writes while it is rewritten
    (other processes wait); old bytes can remain in WAL segments until the
    server recycles them and in the operator's backups. Returns the pages of
    the database after the rewrite."""
    con.execute("VACUUM (FULL)")
    try:
        con.execute("CHECKPOINT")
    except sqlite.Error:  # needs pg_checkpoint (or superuser); the server's own comes soon
        log.info("CHECKPOINT not allowed for this role; the server's next one writes the rewrite")
    size = con.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    return int(size) // 8192


def _truncate_wal(con: Connection) -> None:
    if dialect_of(con) == "postgresql":
        return  # the CHECKPOINT after the rewrite did what can be done
    busy, _, _ = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:
        raise StorageError(
            "the WAL could not be emptied (another process holds a read on the "
            "database): erased content may remain in the file until the next erase"
        )


async def compact_erased(db: Database) -> Compaction:
    """Rewrite the database from live content and empty its WAL, after an
    erase committed. Raises ``StorageError`` when another process's read kept
    the WAL from being emptied."""
    start = time.perf_counter()
    pages = await db.exclusive(_vacuum)
    await db.exclusive(_truncate_wal, hold_reads=True)
    return Compaction(pages, time.perf_counter() - start)


class ErasureCompactor:
    """Debounced ``compact_erased``: a burst of erases costs one rewrite.

    An erase is durable when its transaction commits (the rows are gone from
    every query at once); its freed bytes are gone after the rewrite, which
    runs ``delay_s`` after the first erase of a burst (later erases in the
    window join it; the delay is not pushed back, so a steady stream of
    deletes still gets compacted). ``flush`` runs a pending rewrite now
    (settle, close); ``run_now`` rewrites at once (forget, purge). An erase
    records the rewrite it is owed in its own transaction
    (``lifecycle_events``), so one a crash kept from running is requested
    again at the next start.
    ``request`` must be called on the event loop's thread.
    """

    def __init__(self, db: Database, delay_s: float) -> None:
        self._db = db
        self._delay_s = delay_s
        self._lock = asyncio.Lock()
        self._timer: asyncio.Task[None] | None = None
        self._sleeping = False  # the timer has not started its rewrite yet
        # Requests are numbered; a rewrite covers every request made before
        # it started (an erase committed during it may not be covered).
        self._requested = 0
        self._covered = 0
        self.runs = 0
        self.errors = 0
        self.deferred = 0  # debounced rewrites put off: another process was rewriting
        self._holder = store_leases.process_holder()

    @property
    def pending(self) -> bool:
        return self._requested > self._covered

    def request(self) -> None:
        """An erase committed: rewrite the file ``delay_s`` from now at the latest."""
        self._requested += 1
        if self._timer is None or self._timer.done():
            self._timer = asyncio.get_running_loop().create_task(
                self._after_delay(), name="erasure-compaction"
            )

    async def _after_delay(self) -> None:
        self._sleeping = True
        try:
            await asyncio.sleep(self._delay_s)
        finally:
            self._sleeping = False
        try:
            await self._run(force=False, retry_later=True)
        except StorageError as exc:
            log.warning("compaction after an erase failed, tried again on the next: %s", exc)
            return
        # An erase committed while this rewrite ran is not covered by it, and
        # its request found this timer busy: the timer goes round once more.
        if self.pending and self._timer is asyncio.current_task():
            self._rearm()

    async def flush(self) -> Compaction | None:
        """Run a pending rewrite now; None when nothing waits."""
        self._cancel_timer()
        return await self._run(force=False)

    async def run_now(self) -> Compaction:
        """Rewrite now, whatever is pending (an erase that wants its bytes gone
        before it returns)."""
        self._cancel_timer()
        self._requested += 1
        done = await self._run(force=True)
        assert done is not None
        return done

    async def _take_lease(self, *, wait: bool) -> bool:
        deadline = time.monotonic() + (LEASE_WAIT_S if wait else 0.0)
        while True:
            now = datetime.now(UTC)
            until = now + timedelta(seconds=LEASE_S)
            if await self._db.write(
                store_leases.acquire, LEASE, self._holder, iso(now), iso(until)
            ):
                return True
            if time.monotonic() >= deadline:
                if wait:
                    log.warning("another process's rewrite is taking long; rewriting anyway")
                return False
            await asyncio.sleep(LEASE_POLL_S)

    def _rearm(self) -> None:
        # Called by a timer's own run: a new timer task waits out the delay,
        # then takes the lock again.
        self._timer = asyncio.get_running_loop().create_task(
            self._after_delay(), name="erasure-compaction"
        )

    def _cancel_timer(self) -> None:
        # A timer already rewriting is left to finish: the caller then waits
        # for it on the lock and finds nothing pending.
        if self._timer is not None and self._sleeping:
            self._timer.cancel()
            self._timer = None

    async def _run(self, *, force: bool, retry_later: bool = False) -> Compaction | None:
        """``retry_later``: the timer's run, which tries again after the delay
        when another process holds the lease (a flush leaves that to the owed
        rewrite the next start requests)."""
        async with self._lock:
            if not force and not self.pending:
                return None
            target = self._requested
            leased = await self._take_lease(wait=force)
            if not leased and not force:
                self.deferred += 1
                log.debug("compaction put off: another process is rewriting the database")
                if retry_later:
                    self._rearm()
                return None
            try:
                owed = await self._db.read(store_events.compaction_owed)
                try:
                    done = await compact_erased(self._db)
                except StorageError:
                    self.errors += 1
                    raise
            finally:
                if leased:
                    await self._db.write(store_leases.release, LEASE, self._holder)
            if owed is not None:
                await self._db.write(store_events.compaction_paid, owed)
            self._covered = max(self._covered, target)
            self.runs += 1
            log.info("erased content compacted (%d pages) in %.2f s", done.pages, done.seconds)
            return done
