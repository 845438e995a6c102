"""Urgent writes on PostgreSQL, committed in groups.

An urgent write is one a caller waits on to acknowledge something: the
durable inbox's insert of a received message, a Discord delete or edit
recorded before it is applied. They get a connection and a thread of their
own (``PgDatabase`` hands them here), so they never queue behind the
pipeline's transactions on the writer connection.

A commit costs PostgreSQL a WAL flush, and a burst of messages brings
hundreds of acknowledgements at once. So the thread takes every urgent write
waiting when it is free and runs them in one transaction, each inside a
savepoint: one that fails is rolled back to its savepoint and fails alone,
the others commit together, with one flush. Alone, a write is its own
transaction, as before. Every write's caller learns its own result once the
group has committed — never before: an acknowledgement means durable.

Urgent writes insert rows nobody else writes, but the writer connection may
touch a row they lock (a member's display name, a channel's): PostgreSQL
then aborts one of the two transactions ("deadlock detected"); a group it
aborts is run again (``pools.CONFLICT_ATTEMPTS`` times at most).

The connection comes from a pool of one (``memory.db.postgres.pools``): a
group whose connection broke before its ``COMMIT`` runs again on the next
connection, once the server answers; one that broke during its ``COMMIT``
is looked up by its transaction id first. Until then the callers wait: an
acknowledgement is given only for a committed write, and a write is never
committed twice. Past the give-up limit every waiting write fails with
``DatabaseUnavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from memory.db.postgres import driver as postgres
from memory.db.postgres import pools
from memory.db.sqlite import driver as sqlite
from memory.db.status import DbStatus
from memory.errors import StorageError

log = logging.getLogger(__name__)

GROUP_MAX = 256  # writes in one transaction at most


@dataclass
class _Write:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    result: Any = None
    error: BaseException | None = None
    changes: list[Any] = field(default_factory=list)  # its change events, once run


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the caller was cancelled meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class UrgentWriter:
    """One thread and one connection for urgent writes (see the module).

    ``finish`` is what the database does around every commit:
    ``before_commit(con, changes)`` runs inside the transaction just before
    ``COMMIT`` (the notification to other processes) and returns the
    transaction's id; ``after_commit(changes)`` runs after it.
    ``abandon_waits()``: whether a wait for the connection should end (the
    database is closing and cannot be reached)."""

    def __init__(
        self,
        cons: ConnectionPool[Any],
        status: DbStatus,
        identities: dict[str, str],
        caches: postgres.Caches,
        before_commit: Callable[[postgres.PgConnection, Sequence[Any]], str],
        after_commit: Callable[[Sequence[Any]], None],
        abandon_waits: Callable[[], bool],
    ) -> None:
        self._cons = cons
        self._status = status
        self._identities = identities
        self._caches = caches
        self._before_commit = before_commit
        self._after_commit = after_commit
        self._abandon_waits = abandon_waits
        self._queue: deque[_Write] = deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.writes = 0
        self.groups = 0  # transactions (a group of one included)
        self.retried_groups = 0  # run again after a lost connection or a deadlock
        self.commit_lookups = 0  # commits whose connection broke, looked up by transaction id

    def start(self) -> None:
        """Start the thread."""
        self._thread = threading.Thread(target=self._main, name="guildlore-pg-u", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Finish what is queued, then stop (blocking). The pool is the database's to close."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    async def write(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        loop = asyncio.get_running_loop()
        job = _Write(fn, args, loop, loop.create_future())
        with self._cond:
            if self._stopping or self._thread is None:
                raise StorageError("database is closed")
            self._queue.append(job)
            self._cond.notify()
        return await job.future

    # -- the thread ------------------------------------------------------------------------
    def _main(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    return
                group = [self._queue.popleft() for _ in range(min(GROUP_MAX, len(self._queue)))]
            self._run(group)
            for job in group:
                job.loop.call_soon_threadsafe(_settle, job.future, job.result, job.error)

    def _run(self, group: list[_Write]) -> None:
        retries = pools.Retries()
        while True:
            try:
                raw = pools.take(self._cons, self._status, self._abandon_waits)
            except BaseException as exc:  # closing, or the process gave up on the database
                for job in group:
                    job.error = exc
                return
            xid: list[str] = []
            try:
                changes = self._transaction(raw, group, xid)
            except Exception as exc:
                failure = pools.failure_of(exc, raw)
                if pools.can_roll_back(raw):
                    with contextlib.suppress(psycopg.Error, sqlite.Error):
                        raw.execute("ROLLBACK")
                pools.give_back(self._cons, raw)
                if failure == pools.LOST:
                    self._status.suspect(exc)
                    try:
                        committed = bool(xid) and self._committed(xid[0])
                    except BaseException as lookup:  # the process gave up, or closing
                        for job in group:
                            job.error = lookup
                        return
                    if committed:
                        self._done(group, self._changes_of(group))
                        return
                if not retries.again(failure):
                    for job in group:
                        job.error = job.error or exc
                    return
                log.info("urgent writes run again (%s): %s", failure, " ".join(str(exc).split()))
                self.retried_groups += 1
                continue
            except BaseException as exc:
                if pools.can_roll_back(raw):
                    with contextlib.suppress(psycopg.Error, sqlite.Error):
                        raw.execute("ROLLBACK")
                pools.give_back(self._cons, raw)
                for job in group:
                    job.error = job.error or exc
                return
            pools.give_back(self._cons, raw)
            self._done(group, changes)
            return

    def _done(self, group: list[_Write], changes: list[Any]) -> None:
        self.writes += len(group)
        self.groups += 1
        if changes:
            self._after_commit(changes)

    @staticmethod
    def _changes_of(group: list[_Write]) -> list[Any]:
        return [c for job in group for c in job.changes]

    def _committed(self, xid: str) -> bool:
        """Whether the group's transaction committed although its connection
        broke during ``COMMIT`` (asked on the next connection)."""
        self.commit_lookups += 1
        return pools.committed(self._cons, self._status, self._abandon_waits, xid)

    def _transaction(
        self, raw: psycopg.Connection[Any], group: list[_Write], xid: list[str]
    ) -> list[Any]:
        """Run the group in one transaction on ``raw``; its id goes in ``xid``
        once known (before ``COMMIT``)."""
        con = postgres.PgConnection(raw, self._identities, self._caches)
        single = len(group) == 1
        con.execute("BEGIN")
        con.changes = []
        try:
            for job in group:
                job.result, job.error, job.changes = None, None, []
                mark = len(con.changes)
                if single:
                    job.result = job.fn(con, *job.args)
                    job.changes = con.changes[mark:]
                    continue
                con.execute("SAVEPOINT urgent")
                try:
                    job.result = job.fn(con, *job.args)
                except Exception as exc:  # this write's own data: it fails alone
                    if pools.failure_of(exc, raw) is not None:
                        raise  # the connection, or a deadlock: the whole group runs again
                    con.execute("ROLLBACK TO SAVEPOINT urgent")
                    del con.changes[mark:]
                    job.error = exc
                con.execute("RELEASE SAVEPOINT urgent")
                job.changes = con.changes[mark:]
            xid.append(self._before_commit(con, con.changes))
            con.execute("COMMIT")
        finally:
            changes, con.changes = con.changes, None
        return changes or []
