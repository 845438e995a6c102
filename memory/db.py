"""Connections: one writer thread, a small pool of reader threads.

Every write is a synchronous function ``fn(con, *args)`` run as one
transaction on the single writer thread, so a multi-statement change is atomic
without an asyncio lock and costs one thread hop, not one per statement.
Reads run on reader threads, each with its own connection; WAL lets them read
while the writer writes. The event loop never touches SQLite directly.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from . import sqlite
from .errors import StorageError
from .migrations import migrate

log = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")


class Database:
    def __init__(self, path: Path, *, readers: int = 2) -> None:
        self.path = path
        self._readers = max(1, readers)
        self._writer: ThreadPoolExecutor | None = None
        self._reader_pool: ThreadPoolExecutor | None = None
        self._writer_con: Any = None
        self._local = threading.local()
        self._reader_cons: list[Any] = []
        self._reader_lock = threading.Lock()
        self.versions: dict[str, str] = {}

    # -- lifecycle -------------------------------------------------------
    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="guildlore-db-w")
        self._reader_pool = ThreadPoolExecutor(
            max_workers=self._readers, thread_name_prefix="guildlore-db-r"
        )
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._writer, self._open_writer)

    def _open_writer(self) -> None:
        try:
            self._writer_con = sqlite.connect(self.path)
            migrate(self._writer_con)
            self.versions = sqlite.versions(self._writer_con)
        except sqlite.Error as exc:
            raise StorageError(f"cannot open database {self.path}: {exc}") from exc

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        if self._reader_pool is not None:
            pool, self._reader_pool = self._reader_pool, None
            await loop.run_in_executor(None, partial(pool.shutdown, wait=True))
            with self._reader_lock:
                for con in self._reader_cons:
                    con.close()
                self._reader_cons.clear()
        if self._writer is not None:
            writer, self._writer = self._writer, None
            if self._writer_con is not None:
                con, self._writer_con = self._writer_con, None
                await loop.run_in_executor(writer, _checkpoint_and_close, con)
            await loop.run_in_executor(None, partial(writer.shutdown, wait=True))

    @property
    def is_open(self) -> bool:
        return self._writer is not None

    # -- running work ----------------------------------------------------
    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(con, *args)`` in one IMMEDIATE transaction on the writer thread."""
        if self._writer is None:
            raise StorageError("database is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writer, self._run_write, fn, args)

    def _run_write(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        con = self._writer_con
        con.execute("BEGIN IMMEDIATE")
        try:
            result = fn(con, *args)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
        return result

    async def checkpoint(self) -> None:
        """Fold the WAL into the main file and truncate it (after an erase, the
        WAL would otherwise still hold the old page images)."""
        if self._writer is None:
            raise StorageError("database is closed")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(
            self._writer, lambda: self._writer_con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        )

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(con, *args)`` on a reader thread inside one read transaction."""
        if self._reader_pool is None:
            raise StorageError("database is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader_pool, self._run_read, fn, args)

    def _reader(self) -> Any:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite.connect(self.path)
            con.execute("PRAGMA query_only = ON")
            self._local.con = con
            with self._reader_lock:
                self._reader_cons.append(con)
        return con

    def _run_read(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        con = self._reader()
        # One transaction gives the function a consistent snapshot.
        con.execute("BEGIN")
        try:
            return fn(con, *args)
        finally:
            con.execute("COMMIT")


def _checkpoint_and_close(con: Any) -> None:
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite.Error:  # a checkpoint is an optimisation; closing still matters
        log.warning("WAL checkpoint failed at close", exc_info=True)
    con.close()
