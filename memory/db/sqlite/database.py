"""SQLite's ``Database``: one writer connection, a small pool of reader threads.

Every write is a synchronous function ``fn(con, *args)`` run as one
transaction on the writer connection, so a multi-statement change is atomic
without an asyncio lock. Reads run on reader threads, each with its own
connection; WAL lets them read while the writer writes.

Writes normally run on the writer thread, one queued job after another. An
urgent write (``write(..., urgent=True)``: the durable inbox, whose caller
waits on the write for its acknowledgement) takes a fast path instead: if no
transaction is open it runs at once on the calling (event loop) thread, a
fraction of a millisecond for a small insert; if one is open it waits for it
to end (up to ``FAST_PATH_WAIT_S``) and otherwise jumps the writer queue.
A thread hop costs little on an idle machine but, under load, every hand-off
of the GIL to the writer thread can wait a whole switch interval, per
statement; the fast path has none. The connection lock keeps it one writer:
the writer thread holds it only for the duration of one transaction, and
``write_each`` commits item by item, so the fast path never waits behind a
long batch of pipeline or vector writes.

Change events. Store functions record what a cache outside SQLite must
follow (``memory.db.changes``) on the write connection; the events of one
transaction go to the subscribers (``subscribe``) after its ``COMMIT``, in
commit order, and are dropped with a ``ROLLBACK``. A commit by another
connection — another process on the same file — is not known change by
change: when this database notices one (``PRAGMA data_version`` of the
writer connection moves only for other connections' commits; it is looked at
in every write transaction and before every read) its subscribers get an
``ExternalCommit``.

Checkpoints are ours too: automatic checkpoints would run inside whatever
commit crosses the WAL threshold — possibly one on the event loop — so the
writer connection has them off and the writer thread runs a passive
checkpoint on its own connection every ``checkpoint_every`` commits. Under
sustained writes with readers always busy that is not enough, and the WAL
grows without bound: the passive checkpoints copy the frames, but SQLite
starts the WAL over only when a write begins while no reader is inside it.
So past ``wal_limit_bytes`` the writer thread restarts it: it holds new reads
back (back-to-back reads on two threads keep a reader in the WAL forever),
waits up to ``WAL_READERS_WAIT_S`` for the reads in progress to end, runs a
RESTART checkpoint on the writer connection (the passive one just before
copied most frames, so it holds the connection lock briefly), and lets the
reads go on; the next write starts the WAL over from its first frame. If a
read takes longer, the next round tries again. The file is reused, not
truncated (that costs time in the write that does it); ``journal_size_limit``
trims it to twice the limit if it ever grew further.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from memory.db.changes import Change, ExternalCommit
from memory.db.core import Connection, Subscriber, Subscribers
from memory.db.sqlite import damage
from memory.db.sqlite import driver as sqlite
from memory.db.sqlite.migrations import migrate
from memory.db.sqlite.read_gate import ReadGate
from memory.db.status import DbStatus
from memory.errors import StorageError

log = logging.getLogger(__name__)

T = TypeVar("T")

# How long an urgent write may block the event loop for a transaction in
# progress to finish. Blocking is what makes it fast: while the loop waits on
# the lock it does not hold the GIL, so the writer thread finishes its short
# transaction at full speed (a millisecond or two), where a busy loop would
# have starved it of the GIL for the whole transaction (about one statement
# per GIL switch interval). A genuinely long one (an erase, a
# checkpoint) sends the write to the front of the writer queue instead.
FAST_PATH_WAIT_S = 0.05
CHECKPOINT_EVERY = 200  # commits between passive checkpoints (~1000 pages by default)
# Past this much WAL the writer thread restarts it (see the module docstring).
WAL_LIMIT_BYTES = 64 * 1024 * 1024
# How long new reads are held back at most while the reads in progress end.
WAL_READERS_WAIT_S = 0.25
# How long the restart waits for readers of other processes, with writes held
# up; a reader that takes longer makes it try again a round later.
WAL_RESTART_WAIT_MS = 100
EXCLUSIVE_READERS_WAIT_S = 30.0  # how long ``exclusive`` waits for reads to end
WAL_FRAME_HEADER = 24  # bytes before each page in the WAL
# Page cache of each reader connection, KiB. SQLite's default (2 MiB) holds a
# fraction of a big guild's facts table and FTS index: a search that joins
# ~20k FTS matches to their fact rows then pays a pread() system call per
# page miss; a cache that holds the table saves them. Pages are allocated as they are read,
# so a small database never uses this much.
READER_CACHE_KIB = 128 * 1024


class _Job:
    """One unit of work for the writer thread; the result goes back to the
    future's loop."""

    __slots__ = ("fn", "future")

    def __init__(self, fn: Callable[[], Any], future: asyncio.Future[Any]) -> None:
        self.fn = fn  # called on the writer thread, the connection lock not held
        self.future = future


def _resolve(fut: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if fut.done():  # the awaiting task was cancelled meanwhile
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)


class SqliteDatabase:
    """``memory.db.core.Database`` over one SQLite file."""

    dialect = "sqlite"

    def __init__(
        self,
        path: Path,
        *,
        readers: int = 2,
        checkpoint_every: int = CHECKPOINT_EVERY,
        wal_limit_bytes: int = WAL_LIMIT_BYTES,
    ) -> None:
        self.path = path
        self.checkpoint_every = max(1, checkpoint_every)
        self.wal_limit_bytes = wal_limit_bytes
        self._readers = max(1, readers)
        self._reader_pool: ThreadPoolExecutor | None = None
        self._writer_thread: threading.Thread | None = None
        self._writer_con: Any = None
        self._con_lock = threading.Lock()  # held for exactly one write transaction
        self._fast_waiting = threading.Event()  # cleared while a fast-path write waits
        self._fast_waiting.set()
        self._exclusive = False  # an ``exclusive`` job holds the connection
        self._cond = threading.Condition()
        self._urgent: deque[_Job] = deque()
        self._normal: deque[_Job] = deque()
        self._stopping = False
        self._commits = 0  # since the last checkpoint
        self._checkpoint_con: Any = None
        self._page_size = 4096
        self._data_version: int | None = None  # the writer connection's, last looked at
        self._subscribers = Subscribers()
        self._local = threading.local()
        self._reader_cons: list[Any] = []
        self._reader_lock = threading.Lock()
        self._read_gate = ReadGate()
        self.versions: dict[str, str] = {}
        self.status = DbStatus()  # a damaged file, or one deleted under the process: damage.py
        self._damage = damage.Watch(path, self.status)
        self.inline_writes = 0  # urgent writes that took the fast path
        self.wal_restarts = 0  # restarting checkpoints that completed
        self.wal_restarts_deferred = 0  # ... that readers held up, tried again later

    # -- lifecycle -------------------------------------------------------
    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._stopping = False
        self._writer_thread = threading.Thread(
            target=self._writer_main, name="guildlore-db-w", daemon=True
        )
        self._writer_thread.start()
        self._reader_pool = ThreadPoolExecutor(
            max_workers=self._readers, thread_name_prefix="guildlore-db-r"
        )
        try:
            await self._submit(self._open_writer, urgent=True)
        except BaseException:
            await self.close()
            raise

    def _open_writer(self) -> None:
        try:
            con = sqlite.connect(self.path)
            migrate(con)
            _probe_write(con)
            con.execute("PRAGMA wal_autocheckpoint = 0")  # see the module docstring
            con.execute(f"PRAGMA journal_size_limit = {2 * int(self.wal_limit_bytes)}")
            self._page_size = int(con.execute("PRAGMA page_size").fetchone()[0])
            self._data_version = int(con.execute("PRAGMA data_version").fetchone()[0])
            self.versions = sqlite.versions(con)
            self._damage.opened()
        except (sqlite.Error, OSError) as exc:
            raise StorageError(f"cannot open database {self.path}: {exc}") from exc
        self._writer_con = con

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        if self._reader_pool is not None:
            pool, self._reader_pool = self._reader_pool, None
            await loop.run_in_executor(None, partial(pool.shutdown, wait=True))
            with self._reader_lock:
                for con in self._reader_cons:
                    con.close()
                self._reader_cons.clear()
        thread = self._writer_thread
        if thread is not None:
            if self._writer_con is not None:
                with contextlib.suppress(StorageError):
                    await self._submit(self._close_writer)
            with self._cond:
                self._stopping = True
                self._cond.notify()
            await asyncio.to_thread(thread.join)
            self._writer_thread = None

    def _close_writer(self) -> None:
        with self._con_lock:
            con, self._writer_con = self._writer_con, None
        if self._checkpoint_con is not None:
            self._checkpoint_con.close()
            self._checkpoint_con = None
        if con is not None:
            _checkpoint_and_close(con)

    @property
    def is_open(self) -> bool:
        return self._writer_thread is not None and not self._stopping

    # -- change events ---------------------------------------------------
    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Call ``fn(changes)`` after every commit that recorded changes, on the
        thread that committed, in commit order, and with ``[ExternalCommit()]``
        when another connection's commit is noticed. ``fn`` must be quick and
        must not touch the database. Returns the call that ends the subscription."""
        return self._subscribers.subscribe(fn)

    def _publish(self, changes: Sequence[Change]) -> None:
        self._subscribers.publish(changes)

    def _look_for_external_commit(self, con: Connection) -> None:
        """Publish ``ExternalCommit`` if another connection committed since the
        last look; the caller holds ``_con_lock``."""
        version = int(con.execute("PRAGMA data_version").fetchone()[0])
        if version != self._data_version:
            self._data_version = version
            self._publish([ExternalCommit()])

    def _notice_external_commit(self) -> None:
        """The reader's look: never waits. When a write holds the connection,
        its own look at ``BEGIN`` covers every commit up to now (no other
        connection can commit while it holds the write lock)."""
        if not self._subscribers or not self._con_lock.acquire(blocking=False):
            return
        try:
            if self._writer_con is not None:
                self._look_for_external_commit(self._writer_con)
        except sqlite.Error:  # only a cache depends on it; the next look retries
            log.debug("could not read data_version", exc_info=True)
        finally:
            self._con_lock.release()

    # -- running work ----------------------------------------------------
    async def write(self, fn: Callable[..., T], *args: Any, urgent: bool = False) -> T:
        """Run ``fn(con, *args)`` in one IMMEDIATE transaction.

        ``urgent``: a caller is waiting on this write (an acknowledgement); it
        takes the fast path described in the module docstring."""
        if urgent and self.is_open:
            # Python locks are not fair: flag the wait so the writer thread does
            # not take the lock straight back for its next transaction.
            self._fast_waiting.clear()
            try:
                got = self._con_lock.acquire(timeout=0 if self._exclusive else FAST_PATH_WAIT_S)
            finally:
                self._fast_waiting.set()
            if got:
                try:
                    self.inline_writes += 1
                    return self._transaction(fn, args)
                finally:
                    self._con_lock.release()
        return await self._submit(partial(self._locked_transaction, fn, args), urgent=urgent)

    async def write_each(self, fn: Callable[..., T], items: Sequence[Any], *args: Any) -> list[T]:
        """Run ``fn(con, item, *args)`` for each item, each in its own transaction.

        Urgent writes go in between items. If one item fails, the items before
        it stay committed and the error is raised."""
        if not items:
            return []

        def run() -> list[T]:
            out: list[T] = []
            for i, item in enumerate(items):
                if i:
                    self._run_urgent()
                out.append(self._locked_transaction(fn, (item, *args)))
            return out

        return await self._submit(run)

    async def _submit(self, fn: Callable[[], T], *, urgent: bool = False) -> T:
        if self._writer_thread is None or self._stopping:
            raise StorageError("database is closed")
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        job = _Job(fn, fut)
        with self._cond:
            (self._urgent if urgent else self._normal).append(job)
            self._cond.notify()
        return await fut

    def _writer_main(self) -> None:
        while True:
            with self._cond:
                while not self._urgent and not self._normal:
                    if self._stopping:
                        return
                    if self._commits >= self.checkpoint_every:
                        break
                    self._cond.wait()
                job = (
                    self._urgent.popleft()
                    if self._urgent
                    else self._normal.popleft()
                    if self._normal
                    else None
                )
            if job is not None:
                self._run_job(job)
            if self._commits >= self.checkpoint_every:
                self._checkpoint()

    def _run_urgent(self) -> None:
        while True:
            with self._cond:
                if not self._urgent:
                    return
                job = self._urgent.popleft()
            self._run_job(job)

    def _run_job(self, job: _Job) -> None:
        if job.future.done():  # cancelled before it started: like an executor, skip it
            return
        result: Any = None
        error: BaseException | None = None
        try:
            result = job.fn()
        except BaseException as exc:  # handed to the awaiting task
            error = exc
        try:
            job.future.get_loop().call_soon_threadsafe(_resolve, job.future, result, error)
        except RuntimeError:  # the loop is closed; nobody is waiting any more
            pass

    def _locked_transaction(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        self._fast_waiting.wait()  # a fast-path write goes first
        with self._con_lock:
            return self._transaction(fn, args)

    def _transaction(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        """One transaction; the caller holds ``_con_lock``."""
        con = self._writer_con
        if con is None:
            raise StorageError("database is closed")
        self.status.raise_if_failed()
        try:
            con.execute("BEGIN IMMEDIATE")
            self._look_for_external_commit(con)
            con.changes = []
            result = fn(con, *args)
            con.execute("COMMIT")
        except BaseException as exc:
            self._damage.note(exc)
            con.changes = None
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        changes, con.changes = con.changes, None
        self._commits += 1
        if self._commits == self.checkpoint_every:
            with self._cond:
                self._cond.notify()  # the writer thread checkpoints, off this path
        if changes:
            self._publish(changes)
        return result

    # -- checkpoints -----------------------------------------------------
    def _checkpoint(self) -> None:
        """Copy what WAL frames it can into the database file, blocking no one;
        restart the WAL if it has grown past the limit anyway."""
        self._commits = 0
        try:
            if self._checkpoint_con is None:
                self._checkpoint_con = sqlite.connect(self.path)
            row = self._checkpoint_con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite.Error:  # an optimisation: the next one catches up
            log.warning("passive WAL checkpoint failed", exc_info=True)
            return
        frames = int(row[1])
        if frames * (self._page_size + WAL_FRAME_HEADER) > self.wal_limit_bytes:
            self._restart_wal()

    def _restart_wal(self) -> None:
        """Have the next write start the WAL over, with this process's reads
        held back meanwhile."""
        busy = 1
        try:
            if self._read_gate.hold(WAL_READERS_WAIT_S):
                busy = self._restart_locked()
        finally:
            self._read_gate.release()
        if busy:
            self.wal_restarts_deferred += 1
        else:
            self.wal_restarts += 1

    def _restart_locked(self) -> int:
        """The RESTART checkpoint, on the writer connection: one run by another
        connection would block the writer's next ``BEGIN`` inside SQLite, out
        of reach of the connection lock."""
        with self._con_lock:
            con = self._writer_con
            if con is None:
                return 1
            try:
                con.execute(f"PRAGMA busy_timeout = {WAL_RESTART_WAIT_MS}")
                try:
                    return int(con.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()[0])
                finally:
                    con.execute(f"PRAGMA busy_timeout = {sqlite.BUSY_TIMEOUT_MS}")
            except sqlite.Error:
                log.warning("restarting WAL checkpoint failed", exc_info=True)
                return 1

    async def exclusive(self, fn: Callable[..., T], *args: Any, hold_reads: bool = False) -> T:
        """Run ``fn(con, *args)`` on the writer connection outside any transaction
        (VACUUM, a checkpoint). ``hold_reads``: new reads wait, and it waits for
        those in progress first (a truncating checkpoint needs no read open)."""

        def run() -> T:
            try:
                if hold_reads and not self._read_gate.hold(EXCLUSIVE_READERS_WAIT_S):
                    raise StorageError("reads in progress did not end")
                with self._con_lock:
                    if self._writer_con is None:
                        raise StorageError("database is closed")
                    self._exclusive = True  # urgent writes queue up, no fast-path wait
                    try:
                        return fn(self._writer_con, *args)
                    finally:
                        self._exclusive = False
            finally:
                if hold_reads:
                    self._read_gate.release()

        return await self._submit(run)

    # -- reads -----------------------------------------------------------
    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(con, *args)`` on a reader thread inside one read transaction."""
        if self._reader_pool is None:
            raise StorageError("database is closed")
        self.status.raise_if_failed()
        loop = asyncio.get_running_loop()
        read = loop.run_in_executor(self._reader_pool, self._run_read, fn, args)
        return await self._damage.watched(read)

    def _reader(self) -> Any:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite.connect(self.path)
            con.execute("PRAGMA query_only = ON")
            con.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
            self._local.con = con
            with self._reader_lock:
                self._reader_cons.append(con)
        return con

    def _run_read(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        self._notice_external_commit()
        con = self._reader()
        self._read_gate.enter()
        try:
            # One transaction gives the function a consistent snapshot.
            con.execute("BEGIN")
            try:
                return fn(con, *args)
            finally:
                con.execute("COMMIT")
        finally:
            self._read_gate.leave()


def _checkpoint_and_close(con: Any) -> None:
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite.Error as exc:  # a checkpoint is an optimisation; closing still matters
        # No traceback: it is the disk's doing (full, read-only), and the next
        # open recovers what the WAL holds.
        log.info("WAL checkpoint at close failed (%s); the next open recovers the WAL", exc)
    con.close()


def _probe_write(con: Any) -> None:
    """Fail now if the file cannot be written. SQLite opens a database it may
    only read without a word (a read-only mount where its -wal and -shm files
    exist) and refuses only the first write: a process would start, then fail
    every job. One write, rolled back, makes the start say it in one line."""
    if con.in_transaction:
        con.commit()
    con.execute("BEGIN IMMEDIATE")
    try:
        con.execute("CREATE TABLE _write_probe (x INTEGER)")
    finally:
        con.execute("ROLLBACK")
