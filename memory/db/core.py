"""What the engine needs from a database, whichever it is.

Two backends implement ``Database``: ``memory.db.sqlite.database.SqliteDatabase``
(the reference: one file, a writer thread, reader threads) and
``memory.db.postgres.database.PgDatabase`` (a server shared by several
processes). Neither inherits from the other: this Protocol is the interface,
and the store functions — plain synchronous ``fn(con, *args)`` over a
``Connection`` — are the same for both.

A ``Connection`` is what a store function receives: SQLite's connection, or
``PgConnection``, which speaks the same SQL (``memory.db.postgres.driver``
translates SQLite's few spellings) and raises the SQLite driver's exception
classes, so ``except sqlite.Error`` holds for both backends.

``Subscribers`` is the after-commit fan-out both backends share: the change
events of one committed transaction (``memory.db.changes``) go to every
subscriber, in commit order, on the committing thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from memory.db.changes import Change
from memory.db.status import DbStatus

log = logging.getLogger(__name__)

T = TypeVar("T")

Subscriber = Callable[[Sequence[Change]], None]


class Cursor(Protocol):
    """The rows of one statement."""

    @property
    def rowcount(self) -> int: ...

    @property
    def lastrowid(self) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """The connection a store function runs on (inside the transaction the
    database opened for it)."""

    # The change events of the transaction in progress; None outside one
    # (``memory.db.changes.record``).
    changes: list[Any] | None

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, parameters: Any = ..., /) -> Cursor: ...

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> Cursor: ...


class Database(Protocol):
    """How the engine reaches its database: whole functions run as one
    transaction (``write``) or in one consistent snapshot (``read``)."""

    # Where the data lives, for messages and diagnostics (a PostgreSQL URL
    # without its password).
    path: Path
    # The versions of what serves the data (SQLite, sqlite-vec; or PostgreSQL, pgvector).
    versions: dict[str, str]
    # Urgent writes done (the acknowledgement path), for diagnostics and tests.
    inline_writes: int
    # Whether the database answers, since when not, and whether to give up
    # (``memory.db.status``): health, ``/metrics`` and the process's exit read it.
    status: DbStatus

    @property
    def dialect(self) -> str: ...

    @property
    def is_open(self) -> bool: ...

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    def read(self, fn: Callable[..., T], *args: Any) -> Awaitable[T]:
        """Run ``fn(con, *args)`` in one read-only snapshot, off the event loop."""
        ...

    def write(self, fn: Callable[..., T], *args: Any, urgent: bool = False) -> Awaitable[T]:
        """Run ``fn(con, *args)`` as one transaction; ``urgent``: a caller
        waits on it for an acknowledgement (the durable inbox)."""
        ...

    def write_each(
        self, fn: Callable[..., T], items: Sequence[Any], *args: Any
    ) -> Awaitable[list[T]]:
        """``fn(con, item, *args)`` for each item, one transaction per item."""
        ...

    def exclusive(self, fn: Callable[..., T], *args: Any, hold_reads: bool = False) -> Awaitable[T]:
        """Run ``fn(con, *args)`` on the writer connection outside a transaction."""
        ...

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Call ``fn(changes)`` after every commit that recorded changes;
        returns the call that ends the subscription."""
        ...


class Subscribers:
    """The after-commit subscribers of one database."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fns: tuple[Subscriber, ...] = ()

    def __bool__(self) -> bool:
        return bool(self._fns)

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """``fn`` must be quick and must not touch the database."""
        with self._lock:
            self._fns = (*self._fns, fn)

        def unsubscribe() -> None:
            with self._lock:
                self._fns = tuple(f for f in self._fns if f is not fn)

        return unsubscribe

    def publish(self, changes: Sequence[Change]) -> None:
        for fn in self._fns:
            try:
                fn(changes)
            except Exception:  # the transaction has committed: a cache must not fail it
                log.exception("change subscriber failed")
