"""The one place that picks a sqlite3 module and loads sqlite-vec.

This machine's CPython was built without extension loading, so the stdlib
module cannot load sqlite-vec. ``sqlean`` bundles a recent SQLite with
extension loading; it is a drop-in DB-API module. Everything else imports
``driver``, ``Error`` and ``connect`` from here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlean as driver
import sqlite_vec

Error = driver.Error
OperationalError = driver.OperationalError
IntegrityError = driver.IntegrityError
Row = driver.Row

BUSY_TIMEOUT_MS = 10_000


class Connection(driver.Connection):
    """A connection that can carry the change events of its open transaction
    (``memory.store.changes``); ``None`` while no one collects them."""

    changes: list[Any] | None = None


def prepare_connection(con: Any, *, read_only: bool = False) -> None:
    """Pragmas and extensions every connection gets."""
    con.enable_load_extension(True)
    try:
        sqlite_vec.load(con)
    finally:
        con.enable_load_extension(False)
    con.row_factory = driver.Row
    con.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    con.execute("PRAGMA foreign_keys = ON")
    if not read_only:
        con.execute("PRAGMA journal_mode = WAL")
        # NORMAL in WAL mode survives process crashes (SIGKILL) without an
        # fsync per commit; only an OS crash can lose the last commits.
        con.execute("PRAGMA synchronous = NORMAL")
    con.execute("PRAGMA temp_store = MEMORY")
    # Deleted content is overwritten in the file, so a forgotten member's text
    # does not linger in free pages (forget means forget, on disk too).
    con.execute("PRAGMA secure_delete = ON")


def connect(path: Path | str, *, read_only: bool = False) -> Any:
    """A prepared connection in autocommit mode (transactions are explicit)."""
    target = str(path)
    if read_only and target != ":memory:":
        con = driver.connect(
            f"file:{target}?mode=ro",
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            factory=Connection,
        )
    else:
        con = driver.connect(
            target, isolation_level=None, check_same_thread=False, factory=Connection
        )
    prepare_connection(con, read_only=read_only)
    return con


def versions(con: Any) -> dict[str, str]:
    sqlite_version, vec_version = con.execute("select sqlite_version(), vec_version()").fetchone()
    fts5 = True
    try:
        con.execute("create virtual table temp.__fts5_probe using fts5(x)")
        con.execute("drop table temp.__fts5_probe")
    except Error:
        fts5 = False
    return {"sqlite": sqlite_version, "sqlite_vec": vec_version, "fts5": "yes" if fts5 else "no"}
