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
touch a row they lock (a member's display name): PostgreSQL then aborts one
of the two transactions ("deadlock detected"); a group it aborts is run
again, up to ``ATTEMPTS`` times.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memory.db.postgres import driver as postgres
from memory.db.sqlite import driver as sqlite
from memory.errors import StorageError

log = logging.getLogger(__name__)

ATTEMPTS = 3  # a group a deadlock aborted is run this often at most
GROUP_MAX = 256  # writes in one transaction at most


@dataclass
class _Write:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    result: Any = None
    error: BaseException | None = None


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the caller was cancelled meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class UrgentWriter:
    """One thread and one connection for urgent writes (see the module).

    ``finish`` is what the database does around every commit: ``finish(con,
    changes)`` runs inside the transaction just before ``COMMIT`` (the
    notification to other processes); ``publish(changes)`` after it."""

    def __init__(
        self,
        url: str,
        identities: dict[str, str],
        before_commit: Callable[[postgres.PgConnection, Sequence[Any]], None],
        after_commit: Callable[[Sequence[Any]], None],
    ) -> None:
        self._url = url
        self._identities = identities
        self._before_commit = before_commit
        self._after_commit = after_commit
        self._queue: deque[_Write] = deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._con: postgres.PgConnection | None = None
        self._thread: threading.Thread | None = None
        self.writes = 0
        self.groups = 0  # transactions (a group of one included)

    def start(self) -> None:
        """Connect (blocking: call it off the event loop) and start the thread."""
        self._con = postgres.connect(self._url, self._identities)
        self._thread = threading.Thread(target=self._main, name="guildlore-pg-u", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Finish what is queued, then close (blocking)."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._con is not None:
            self._con.close()
            self._con = None

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
        for attempt in range(ATTEMPTS):
            try:
                changes = self._transaction(group)
            except sqlite.OperationalError as exc:
                if "deadlock detected" in str(exc) and attempt < ATTEMPTS - 1:
                    log.warning("urgent writes chosen as a deadlock's victim; running them again")
                    continue
                for job in group:
                    job.error = job.error or exc
                return
            except BaseException as exc:  # the connection, the server: every write fails
                for job in group:
                    job.error = job.error or exc
                return
            self.writes += len(group)
            self.groups += 1
            if changes:
                self._after_commit(changes)
            return

    def _transaction(self, group: list[_Write]) -> list[Any]:
        con = self._con
        if con is None:
            raise StorageError("database is closed")
        single = len(group) == 1
        con.execute("BEGIN")
        con.changes = []
        try:
            for job in group:
                job.result, job.error = None, None
                if single:
                    job.result = job.fn(con, *job.args)
                    continue
                mark = len(con.changes)
                con.execute("SAVEPOINT urgent")
                try:
                    job.result = job.fn(con, *job.args)
                except Exception as exc:  # this write's own data: it fails alone
                    if "deadlock detected" in str(exc):
                        raise  # the whole group runs again
                    con.execute("ROLLBACK TO SAVEPOINT urgent")
                    del con.changes[mark:]
                    job.error = exc
                con.execute("RELEASE SAVEPOINT urgent")
            self._before_commit(con, con.changes)
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        finally:
            changes, con.changes = con.changes, None
        return changes or []
