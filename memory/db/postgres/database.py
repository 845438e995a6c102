"""PostgreSQL's ``Database``: the same calls as SQLite's, over a server.

Writes keep SQLite's shape — one writer connection per process, store
functions run one at a time as one transaction each on the writer thread —
because the engine relies on it (a read-then-write in a store function sees
no other write of this process in between). Across processes PostgreSQL's row
locks and the ownership of guilds by shards keep writers apart: a guild's
ingest runs in one process only. Urgent writes — the durable inbox's insert
that an acknowledgement waits for, a Discord delete or edit recorded — have
a connection of their own, so an acknowledgement never waits behind the
pipeline's transactions (they insert rows nobody else writes).

Reads run on a pool of reader threads, each with its own connection, in a
``REPEATABLE READ READ ONLY`` transaction: one consistent snapshot per read
function, as a SQLite read transaction gives.

Change events: the store's events of a committed transaction go to the
subscribers exactly as with SQLite. Commits by other processes are learnt by
``LISTEN``: every write transaction sends a notification (delivered only if
it commits) with this process's token and the guilds whose vectors and
settings it changed; a listener thread turns the others' notifications into
``ExternalCommit`` naming those guilds, so a shard's caches drop only what
another process changed, not everything at every commit of every shard.

psycopg 3 is PostgreSQL's own driver; the store functions are synchronous
transactions, so its synchronous connections are used on the store's threads
and the event loop never waits on the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from memory.db.changes import (
    ExternalCommit,
    FactsChanged,
    SettingsChanged,
    VectorsPut,
    VectorsRemoved,
)
from memory.db.core import Subscriber, Subscribers
from memory.db.postgres import driver as postgres
from memory.db.postgres.migrations import migrate
from memory.db.postgres.urgent import UrgentWriter
from memory.db.sqlite import driver as sqlite
from memory.db.url import redact_url
from memory.errors import StorageError

log = logging.getLogger(__name__)

T = TypeVar("T")

CHANNEL = "guildlore_commit"
MAX_NOTE = 7000  # bytes; PostgreSQL takes up to 8000 per notification
LISTEN_POLL_S = 0.5  # how often the listener looks whether it should stop


def commit_note(token: str, changes: Sequence[Any] | None) -> str:
    """A transaction's notification: who sent it (``token``), and the guilds
    whose vectors and settings it changed (``null``: unknown, any guild)."""
    vectors: set[str] | None = set()
    settings: set[str] = set()
    for change in changes or ():
        if isinstance(change, VectorsPut) and vectors is not None:
            vectors.add(change.guild_id)
        elif isinstance(change, VectorsRemoved | FactsChanged):
            # Removals and a quote leaving its facts carry ids, not their
            # guild: another process's caches of every guild look again.
            vectors = None
        elif isinstance(change, SettingsChanged):
            settings.add(change.guild_id)
    note = json.dumps(
        {"t": token, "v": None if vectors is None else sorted(vectors), "s": sorted(settings)}
    )
    if len(note) > MAX_NOTE:
        return json.dumps({"t": token, "v": None, "s": None})
    return note


def external_commit(payloads: Sequence[str], token: str) -> ExternalCommit | None:
    """What other processes' notifications say changed, together (None: no
    other process committed). A payload that cannot be read means anything."""
    vectors: set[str] | None = set()
    settings: set[str] | None = set()
    others = 0
    for payload in payloads:
        try:
            note = json.loads(payload)
            sender, v, s = note["t"], note["v"], note["s"]
        except (ValueError, KeyError, TypeError):
            sender, v, s = None, None, None
        if sender == token:
            continue
        others += 1
        vectors = None if v is None or vectors is None else vectors | {str(g) for g in v}
        settings = None if s is None or settings is None else settings | {str(g) for g in s}
    if not others:
        return None
    return ExternalCommit(
        vector_guilds=None if vectors is None else tuple(sorted(vectors)),
        settings_guilds=None if settings is None else tuple(sorted(settings)),
    )


class PgDatabase:
    """``memory.db.core.Database`` over a PostgreSQL server (``database.url``)."""

    dialect = postgres.DIALECT

    def __init__(self, url: str, *, readers: int = 2) -> None:
        self.url = url
        self.path = Path(redact_url(url))  # shown where the SQLite file's path would be
        self._readers = max(1, readers)
        self._token = secrets.token_hex(8)
        self._writer: ThreadPoolExecutor | None = None
        self._reader_pool: ThreadPoolExecutor | None = None
        self._writer_con: postgres.PgConnection | None = None
        # Urgent writes (an acknowledgement waits on them): memory.db.postgres.urgent.
        self._urgent_writer: UrgentWriter | None = None
        self._identities: dict[str, str] = {}
        self._caches = postgres.Caches()  # the store's, shared by this database's connections
        self._local = threading.local()
        self._reader_cons: list[postgres.PgConnection] = []
        self._reader_lock = threading.Lock()
        self._subscribers = Subscribers()
        self._listener: threading.Thread | None = None
        self._stop_listening = threading.Event()
        self._stopping = False
        self.versions: dict[str, str] = {}
        self.inline_writes = 0  # urgent writes, on their own connection
        self.external_commits = 0

    # -- lifecycle -------------------------------------------------------
    async def open(self) -> None:
        self._stopping = False
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="guildlore-pg-w")
        self._reader_pool = ThreadPoolExecutor(
            max_workers=self._readers, thread_name_prefix="guildlore-pg-r"
        )
        try:
            await self._on_writer(self._open_writer)
            urgent = UrgentWriter(self.url, self._identities, self._notify, self._publish)
            await asyncio.to_thread(urgent.start)
            self._urgent_writer = urgent
        except BaseException:
            await self.close()
            raise
        self._stop_listening.clear()
        self._listener = threading.Thread(
            target=self._listen, name="guildlore-pg-listen", daemon=True
        )
        self._listener.start()

    def _open_writer(self) -> None:
        try:
            raw = postgres.connect_raw(self.url)
            migrate(raw)
            self._identities = postgres.identity_columns(raw)
            con = postgres.PgConnection(raw, self._identities, self._caches)
            server = con.execute("SHOW server_version").fetchone()[0]
            vec = con.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
        except (sqlite.Error, Exception) as exc:
            raise StorageError(f"cannot open database {redact_url(self.url)}: {exc}") from exc
        self.versions = {
            "postgresql": str(server),
            "pgvector": str(vec[0]) if vec else "missing",
            "driver": f"psycopg {postgres.psycopg.__version__}",
        }
        self._writer_con = con

    async def close(self) -> None:
        self._stopping = True
        self._stop_listening.set()
        if self._listener is not None:
            await asyncio.to_thread(self._listener.join)
            self._listener = None
        if self._reader_pool is not None:
            pool, self._reader_pool = self._reader_pool, None
            await asyncio.to_thread(pool.shutdown, True)
            with self._reader_lock:
                for con in self._reader_cons:
                    with contextlib.suppress(Exception):
                        con.close()
                self._reader_cons.clear()
        if self._urgent_writer is not None:
            urgent, self._urgent_writer = self._urgent_writer, None
            await asyncio.to_thread(urgent.stop)
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer_con, self._writer_con = self._writer_con, None
            if writer_con is not None:
                await asyncio.get_running_loop().run_in_executor(writer, writer_con.close)
            await asyncio.to_thread(writer.shutdown, True)

    @property
    def urgent_writer(self) -> UrgentWriter | None:
        return self._urgent_writer

    @property
    def is_open(self) -> bool:
        return self._writer is not None and not self._stopping

    # -- change events ---------------------------------------------------
    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Call ``fn(changes)`` after every commit of this process that recorded
        changes, and with an ``ExternalCommit`` for other processes' commits."""
        return self._subscribers.subscribe(fn)

    def _publish(self, changes: Sequence[Any]) -> None:
        self._subscribers.publish(changes)

    def _listen(self) -> None:
        """Turn other processes' commit notifications into ``ExternalCommit``."""
        try:
            raw = postgres.connect_raw(self.url)
        except sqlite.Error:
            log.exception("cannot listen for other processes' commits")
            return
        try:
            raw.execute(f"LISTEN {CHANNEL}")
            while not self._stop_listening.is_set():
                notes = [n.payload for n in raw.notifies(timeout=LISTEN_POLL_S, stop_after=64)]
                change = external_commit(notes, self._token)
                if change is not None:
                    self.external_commits += 1
                    if self._subscribers:
                        self._publish([change])
        except Exception:
            if not self._stop_listening.is_set():
                log.exception("listening for other processes' commits stopped")
        finally:
            with contextlib.suppress(Exception):
                raw.close()

    # -- writes ----------------------------------------------------------
    async def _on_writer(self, fn: Callable[[], T]) -> T:
        if self._writer is None:
            raise StorageError("database is closed")
        return await asyncio.get_running_loop().run_in_executor(self._writer, fn)

    async def write(self, fn: Callable[..., T], *args: Any, urgent: bool = False) -> T:
        """Run ``fn(con, *args)`` as one transaction on the writer connection;
        ``urgent`` (the durable inbox, a Discord delete or edit received): on
        the urgent connection instead, beside whatever the writer is doing.
        Urgent writes waiting together commit together (``pg_urgent``)."""
        if not urgent:
            return await self._on_writer(lambda: self._transaction(fn, args))
        if self._urgent_writer is None:
            raise StorageError("database is closed")
        self.inline_writes += 1
        return await self._urgent_writer.write(fn, args)

    async def write_each(self, fn: Callable[..., T], items: Sequence[Any], *args: Any) -> list[T]:
        """``fn(con, item, *args)`` for each item, one transaction per item."""

        def run() -> list[T]:
            return [self._transaction(fn, (item, *args)) for item in items]

        return await self._on_writer(run)

    def _transaction(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        con = self._writer_con
        if con is None:
            raise StorageError("database is closed")
        con.execute("BEGIN")
        try:
            con.changes = []
            result = fn(con, *args)
            self._notify(con, con.changes)
            con.execute("COMMIT")
        except BaseException:
            con.changes = None
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        changes, con.changes = con.changes, None
        if changes:
            self._publish(changes)
        return result

    def _notify(self, con: postgres.PgConnection, changes: Sequence[Any] | None) -> None:
        """Tell other processes, inside the transaction (delivered if it commits)."""
        con.execute_native("SELECT pg_notify(%s, %s)", (CHANNEL, commit_note(self._token, changes)))

    async def exclusive(self, fn: Callable[..., T], *args: Any, hold_reads: bool = False) -> T:
        """Run ``fn(con, *args)`` on the writer connection outside a transaction
        (VACUUM). Reads go on: PostgreSQL's VACUUM does not need them to stop."""
        return await self._on_writer(lambda: fn(self._writer_con, *args))

    # -- reads -----------------------------------------------------------
    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        if self._reader_pool is None:
            raise StorageError("database is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader_pool, self._run_read, fn, args)

    def _reader(self) -> postgres.PgConnection:
        con: postgres.PgConnection | None = getattr(self._local, "con", None)
        if con is None or con.raw.closed:
            con = postgres.connect(self.url, self._identities, self._caches)
            self._local.con = con
            with self._reader_lock:
                self._reader_cons.append(con)
        return con

    def _run_read(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        con = self._reader()
        con.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            return fn(con, *args)
        finally:
            con.rollback()
