"""PostgreSQL connections that come back after the server went away.

``PgDatabase`` keeps its shape — one writer connection, one urgent
connection, a connection per reader thread, one listener — but each role
takes its connection from a ``psycopg_pool.ConnectionPool`` of its own size
(1, 1, the readers, 1) instead of holding a bare connection for ever. The
pool is psycopg's reconnection machinery: a connection handed back broken is
dropped and replaced in the background, with an exponential back-off and
jitter between attempts (1, 2, 4 … s for ``RECONNECT_CYCLE_S``, then again
from 1 s while someone still waits); ``getconn`` waits for the replacement.

What this module adds around it:

* ``tracked_connection``: the connection class the pools open, reporting
  every connect attempt to the database's ``DbStatus`` (reachable since a
  connection opened; unreachable since an attempt failed) — the health page,
  ``/metrics`` and the give-up limit read it;
* ``take``: wait for a pool's connection in slices, so a wait notices the
  process giving up (``DatabaseUnavailable``) or the database closing;
* ``failure_of``: whether an error means the connection is gone (``LOST``:
  the work runs again on a new one) or PostgreSQL chose the transaction as a
  deadlock's or a serialisation conflict's victim (``CONFLICT``: it was
  rolled back; run it again);
* ``commit_outcome``: a connection lost while ``COMMIT`` was in flight leaves
  the outcome unknown; the transaction's id (read inside it, with the commit
  notification, at no extra round trip) tells on a new connection whether it
  committed (``pg_xact_status``), so a write is neither lost nor done twice.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any, Literal

import psycopg
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from memory.db.postgres import driver as postgres
from memory.db.status import DbStatus
from memory.errors import StorageError

log = logging.getLogger(__name__)

# psycopg_pool's back-off runs this long before starting over at 1 s: no gap
# between two attempts is longer than about half of it.
RECONNECT_CYCLE_S = 30.0
WAIT_SLICE_S = 1.0  # a wait for a connection looks at the limit this often
CONNECT_TIMEOUT_S = 10  # one connection attempt (a server that does not answer)
CONFLICT_ATTEMPTS = (
    10  # a transaction a deadlock or a conflict aborted runs again this often at most
)
# A transaction that loses this many connections in a row, each one new (the
# pool hands out a new connection once the server answers), is taken to be
# what breaks them (a statement that crashes its backend): its error is raised.
LOST_ATTEMPTS = 10
# SQLSTATE classes and codes: the connection is gone (08: connection
# exception; 57P01-3: the server shutting down, crashed, or starting).
_LOST_CLASSES = ("08",)
_LOST_STATES = frozenset({"57P01", "57P02", "57P03"})
# The transaction was rolled back and may simply run again.
_CONFLICT_STATES = frozenset({"40P01", "40001"})

Failure = Literal["lost", "conflict"]
LOST: Failure = "lost"
CONFLICT: Failure = "conflict"


class _AttemptsCounted(logging.Filter):
    """psycopg_pool logs a warning for every failed connection attempt, every
    back-off cycle given up and every broken connection handed back;
    ``DbStatus`` counts the attempts (health,
    ``/metrics``) and logs the outage's start and end once each, so an outage
    of minutes does not flood the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = str(record.msg)
        return not msg.startswith(
            ("error connecting in", "reconnection attempt in pool", "discarding closed connection")
        )


logging.getLogger("psycopg.pool").addFilter(_AttemptsCounted())


def tracked_connection(status: DbStatus) -> type[psycopg.Connection[Any]]:
    """A connection class whose ``connect`` reports to ``status``."""

    class TrackedConnection(psycopg.Connection[Any]):
        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:
            try:
                conn = super().connect(conninfo, **kwargs)
            except psycopg.Error as exc:
                status.attempt_failed(exc)
                raise
            status.connected()
            return conn

    return TrackedConnection


def make_pool(url: str, status: DbStatus, size: int, name: str) -> ConnectionPool[Any]:
    """A pool of ``size`` connections (opened by ``open_pool``), autocommit,
    with guildlore's rows, reporting to ``status``."""
    return ConnectionPool(
        url,
        connection_class=tracked_connection(status),
        kwargs={
            "autocommit": True,
            "row_factory": postgres.row_factory,
            "application_name": postgres.APPLICATION_NAME,
            "connect_timeout": CONNECT_TIMEOUT_S,
        },
        min_size=size,
        max_size=size,
        open=False,
        name=name,
        reconnect_timeout=RECONNECT_CYCLE_S,
        num_workers=1,
    )


def open_pool(pool: ConnectionPool[Any], timeout: float = 30.0) -> None:
    """Open ``pool`` with all its connections (blocking)."""
    try:
        pool.open(wait=True, timeout=timeout)
    except (PoolTimeout, psycopg.Error) as exc:
        pool.close(timeout=0)
        raise StorageError(f"cannot open {pool.name} connections: {exc}") from exc


def take(
    pool: ConnectionPool[Any], status: DbStatus, closing: Callable[[], bool]
) -> psycopg.Connection[Any]:
    """A connection of ``pool``, waiting for the database as long as it takes
    — until the process gives up (``DatabaseUnavailable``) or ``closing``."""
    while True:
        status.raise_if_failed()
        if closing():
            raise StorageError("database is closed")
        try:
            return pool.getconn(timeout=WAIT_SLICE_S)
        except PoolTimeout:
            continue
        except PoolClosed as exc:
            raise StorageError("database is closed") from exc


def give_back(pool: ConnectionPool[Any], raw: psycopg.Connection[Any]) -> None:
    """Return a connection (a broken one is replaced by the pool)."""
    try:
        pool.putconn(raw)
    except PoolClosed:
        raw.close()


def failure_of(exc: BaseException, raw: psycopg.Connection[Any]) -> Failure | None:
    """What ``exc``, raised while ``raw`` ran a transaction, says about it."""
    if raw.broken or raw.closed:
        return LOST
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, psycopg.Error):
            state = cur.sqlstate or ""
            if state in _CONFLICT_STATES:
                return CONFLICT
            if state[:2] in _LOST_CLASSES or state in _LOST_STATES:
                return LOST
        cur = cur.__cause__ or cur.__context__
    return None


def can_roll_back(raw: psycopg.Connection[Any]) -> bool:
    return not raw.closed and raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE


class Retries:
    """How often one piece of work ran again, and whether it may once more."""

    def __init__(self) -> None:
        self.lost = 0
        self.conflicts = 0

    def again(self, failure: Failure | None) -> bool:
        """Whether work that failed with ``failure`` runs again (after a short
        random pause for a deadlock's victim, so the two do not meet at the
        same step once more)."""
        if failure == LOST and self.lost < LOST_ATTEMPTS:
            self.lost += 1
            return True
        if failure == CONFLICT and self.conflicts < CONFLICT_ATTEMPTS:
            self.conflicts += 1
            time.sleep(random.uniform(0, 0.01 * min(self.conflicts, 8)))
            return True
        return False


def committed(
    cons: ConnectionPool[Any], status: DbStatus, closing: Callable[[], bool], xid: str
) -> bool:
    """Whether transaction ``xid``, whose connection broke during its
    ``COMMIT``, committed — asked on the pool's next connection. A backend
    still finishing it (the connection was cut, not the server) is asked
    again until it has."""
    while True:
        raw = take(cons, status, closing)
        try:
            outcome = commit_outcome(raw, xid)
        except psycopg.Error as exc:
            if failure_of(exc, raw) != LOST:
                raise StorageError(f"cannot tell whether a commit happened: {exc}") from exc
            status.suspect(exc)
            continue
        finally:
            give_back(cons, raw)
        if outcome is not None:
            return outcome
        time.sleep(WAIT_SLICE_S)


def commit_outcome(raw: psycopg.Connection[Any], xid: str) -> bool | None:
    """Did transaction ``xid`` commit? True, False (rolled back: run it
    again), None (still in progress: ask again)."""
    try:
        row = raw.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
    except psycopg.errors.InvalidParameterValue:
        # "transaction ID … is in the future": the server restarted without
        # having logged it, so it never committed (a commit is logged).
        return False
    status = None if row is None else row[0]
    if status == "committed":
        return True
    if status == "aborted":
        return False
    if status == "in progress":
        return None
    raise StorageError(f"cannot tell whether transaction {xid} committed ({status!r})")
