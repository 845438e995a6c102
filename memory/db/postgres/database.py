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

Reads run on a pool of reader threads, each with a connection, in a
``REPEATABLE READ READ ONLY`` transaction: one consistent snapshot per read
function, as a SQLite read transaction gives.

The server may go away (a restart, a failover, a network cut): every role
takes its connection from a psycopg pool of its own (``pools``), which
replaces a broken connection with back-off. A transaction whose connection
broke before ``COMMIT`` was sent was rolled back by the server and runs again
on a new connection; one that broke during ``COMMIT`` is looked up by its
transaction id and runs again only if it did not commit; a deadlock's victim
runs again too. Until the server answers, work waits for it; ``status``
(``memory.db.status``) tells health how long it has been away, and past
``unreachable_exit_s`` every call raises ``DatabaseUnavailable`` so the
process can exit for its supervisor to restart it.

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

import psycopg
from psycopg_pool import ConnectionPool

from memory.db.changes import (
    ExternalCommit,
    FactsChanged,
    SettingsChanged,
    VectorsPut,
    VectorsRemoved,
)
from memory.db.core import Subscriber, Subscribers
from memory.db.postgres import driver as postgres
from memory.db.postgres import pools
from memory.db.postgres.migrations import migrate
from memory.db.postgres.urgent import UrgentWriter
from memory.db.sqlite import driver as sqlite
from memory.db.status import DbStatus
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

    def __init__(self, url: str, *, readers: int = 2, unreachable_exit_s: float = 300.0) -> None:
        self.url = url
        self.path = Path(redact_url(url))  # shown where the SQLite file's path would be
        self._readers = max(1, readers)
        self._token = secrets.token_hex(8)
        self.status = DbStatus(unreachable_exit_s)
        self._writer: ThreadPoolExecutor | None = None
        self._reader_pool: ThreadPoolExecutor | None = None
        # One pool per role (memory.db.postgres.pools): writer, readers, listener.
        self._writer_cons: ConnectionPool[Any] | None = None
        self._reader_cons: ConnectionPool[Any] | None = None
        self._listen_cons: ConnectionPool[Any] | None = None
        # Urgent writes (an acknowledgement waits on them): memory.db.postgres.urgent.
        self._urgent_writer: UrgentWriter | None = None
        self._identities: dict[str, str] = {}
        self._caches = postgres.Caches()  # the store's, shared by this database's connections
        self._subscribers = Subscribers()
        self._listener: threading.Thread | None = None
        self._stop_listening = threading.Event()
        self._stopping = False
        self.versions: dict[str, str] = {}
        self.inline_writes = 0  # urgent writes, on their own connection
        self.external_commits = 0
        self.retried_transactions = 0  # run again after a lost connection or a deadlock
        self.commit_lookups = 0  # commits whose connection broke, looked up by transaction id

    # -- lifecycle -------------------------------------------------------
    async def open(self) -> None:
        self._stopping = False
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="guildlore-pg-w")
        self._reader_pool = ThreadPoolExecutor(
            max_workers=self._readers, thread_name_prefix="guildlore-pg-r"
        )
        try:
            await asyncio.to_thread(self._open_connections)
            assert self._urgent_writer is not None
            await asyncio.to_thread(self._urgent_writer.start)
        except BaseException:
            await self.close()
            raise
        self._stop_listening.clear()
        self._listener = threading.Thread(
            target=self._listen, name="guildlore-pg-listen", daemon=True
        )
        self._listener.start()

    def _open_connections(self) -> None:
        """Migrate on a connection of its own, then open every role's pool."""
        try:
            raw = postgres.connect_raw(self.url)
            try:
                migrate(raw)
                self._identities = postgres.identity_columns(raw)
                server = postgres.scalar(raw, "SHOW server_version")
                vec = postgres.scalar(
                    raw, "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                )
            finally:
                raw.close()
        except (sqlite.Error, Exception) as exc:
            raise StorageError(f"cannot open database {redact_url(self.url)}: {exc}") from exc
        self.versions = {
            "postgresql": str(server),
            "pgvector": str(vec) if vec else "missing",
            "driver": f"psycopg {postgres.psycopg.__version__}",
        }
        made = [
            pools.make_pool(self.url, self.status, 1, "guildlore-writer"),
            pools.make_pool(self.url, self.status, 1, "guildlore-urgent"),
            pools.make_pool(self.url, self.status, self._readers, "guildlore-readers"),
            pools.make_pool(self.url, self.status, 1, "guildlore-listener"),
        ]
        try:
            for pool in made:
                pools.open_pool(pool)
        except BaseException:
            for pool in made:
                pool.close(timeout=0)
            raise
        self._writer_cons, urgent, self._reader_cons, self._listen_cons = made
        self._urgent_writer = UrgentWriter(
            urgent,
            self.status,
            self._identities,
            self._caches,
            self._notify,
            self._publish,
            self._abandon_waits,
        )

    async def close(self) -> None:
        self._stopping = True
        self._stop_listening.set()
        if self._listener is not None:
            await asyncio.to_thread(self._listener.join)
            self._listener = None
        if self._reader_pool is not None:
            pool, self._reader_pool = self._reader_pool, None
            await asyncio.to_thread(pool.shutdown, True)
        if self._urgent_writer is not None:
            urgent, self._urgent_writer = self._urgent_writer, None
            await asyncio.to_thread(urgent.stop)
        if self._writer is not None:
            writer, self._writer = self._writer, None
            await asyncio.to_thread(writer.shutdown, True)
        for name in ("_writer_cons", "_reader_cons", "_listen_cons"):
            cons: ConnectionPool[Any] | None = getattr(self, name)
            setattr(self, name, None)
            if cons is not None:
                await asyncio.to_thread(cons.close, 5.0)

    def _abandon_waits(self) -> bool:
        """Whether a wait for a connection should end: the database is closing
        and cannot be reached (work queued before a close with the server up
        still runs)."""
        return self._stopping and not self.status.reachable

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
        """Turn other processes' commit notifications into ``ExternalCommit``;
        on a new connection after a lost one, notifications may have been
        missed meanwhile: an ``ExternalCommit`` of anything."""
        cons = self._listen_cons
        assert cons is not None
        first = True
        while not self._stop_listening.is_set():
            try:
                raw = pools.take(cons, self.status, self._stop_listening.is_set)
            except StorageError:  # closing, or the process gave up on the database
                return
            try:
                raw.execute(f"LISTEN {CHANNEL}")
                if not first and self._subscribers:
                    self._publish([ExternalCommit()])
                first = False
                while not self._stop_listening.is_set():
                    notes = [n.payload for n in raw.notifies(timeout=LISTEN_POLL_S, stop_after=64)]
                    change = external_commit(notes, self._token)
                    if change is not None:
                        self.external_commits += 1
                        if self._subscribers:
                            self._publish([change])
            except Exception as exc:
                if self._stop_listening.is_set():
                    pass
                elif pools.failure_of(exc, raw) == pools.LOST:
                    self.status.suspect(exc)
                else:
                    log.exception("listening for other processes' commits failed; listening again")
                    self._stop_listening.wait(LISTEN_POLL_S)
            finally:
                pools.give_back(cons, raw)

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
        """``fn(con, *args)`` as one transaction, run again on a new connection
        when the connection was lost before it committed, or when PostgreSQL
        chose it as a deadlock's victim (see the module docstring)."""
        cons = self._writer_cons
        if cons is None:
            raise StorageError("database is closed")
        retries = pools.Retries()
        while True:
            raw = pools.take(cons, self.status, self._abandon_waits)
            con = postgres.PgConnection(raw, self._identities, self._caches)
            xid: str | None = None
            try:
                con.execute("BEGIN")
                con.changes = []
                result = fn(con, *args)
                xid = self._notify(con, con.changes)
                con.execute("COMMIT")
            except Exception as exc:
                changes, con.changes = con.changes, None
                failure = pools.failure_of(exc, raw)
                if pools.can_roll_back(raw):
                    with contextlib.suppress(psycopg.Error, sqlite.Error):
                        raw.execute("ROLLBACK")
                pools.give_back(cons, raw)
                if failure == pools.LOST:
                    self.status.suspect(exc)
                    if xid is not None and self._committed(xid):
                        if changes:
                            self._publish(changes)
                        return result
                if not retries.again(failure):
                    raise
                self.retried_transactions += 1
                log.info("transaction runs again (%s): %s", failure, " ".join(str(exc).split()))
                continue
            except BaseException:
                con.changes = None
                if pools.can_roll_back(raw):
                    with contextlib.suppress(psycopg.Error, sqlite.Error):
                        raw.execute("ROLLBACK")
                pools.give_back(cons, raw)
                raise
            changes, con.changes = con.changes, None
            pools.give_back(cons, raw)
            if changes:
                self._publish(changes)
            return result

    def _committed(self, xid: str) -> bool:
        """Whether transaction ``xid``, whose connection broke during its
        ``COMMIT``, committed — asked on the writer's next connection."""
        cons = self._writer_cons
        assert cons is not None
        self.commit_lookups += 1
        return pools.committed(cons, self.status, self._abandon_waits, xid)

    def _notify(self, con: postgres.PgConnection, changes: Sequence[Any] | None) -> str:
        """Tell other processes, inside the transaction (delivered if it
        commits); the transaction's id (its commit can be looked up by it)."""
        row = con.execute_native(
            "SELECT pg_notify(%s, %s), pg_current_xact_id()::text",
            (CHANNEL, commit_note(self._token, changes)),
        ).fetchone()
        return str(row[1])

    async def exclusive(self, fn: Callable[..., T], *args: Any, hold_reads: bool = False) -> T:
        """Run ``fn(con, *args)`` on the writer connection outside a transaction
        (VACUUM, which may run again). Reads go on: PostgreSQL's VACUUM does
        not need them to stop."""
        cons = self._writer_cons
        if cons is None:
            raise StorageError("database is closed")

        def run() -> T:
            retries = pools.Retries()
            while True:
                raw = pools.take(cons, self.status, self._abandon_waits)
                try:
                    return fn(postgres.PgConnection(raw, self._identities, self._caches), *args)
                except Exception as exc:
                    failure = pools.failure_of(exc, raw)
                    if failure != pools.LOST or not retries.again(failure):
                        raise
                    self.status.suspect(exc)
                finally:
                    pools.give_back(cons, raw)

        return await self._on_writer(run)

    # -- reads -----------------------------------------------------------
    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        if self._reader_pool is None:
            raise StorageError("database is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader_pool, self._run_read, fn, args)

    def _run_read(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        """One snapshot; a read whose connection broke runs again on a new one."""
        cons = self._reader_cons
        if cons is None:
            raise StorageError("database is closed")
        retries = pools.Retries()
        while True:
            raw = pools.take(cons, self.status, self._abandon_waits)
            con = postgres.PgConnection(raw, self._identities, self._caches)
            try:
                con.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                return fn(con, *args)
            except Exception as exc:
                failure = pools.failure_of(exc, raw)
                if failure != pools.LOST or not retries.again(failure):
                    raise
                self.status.suspect(exc)
            finally:
                if pools.can_roll_back(raw):
                    with contextlib.suppress(psycopg.Error):
                        raw.execute("ROLLBACK")
                pools.give_back(cons, raw)
