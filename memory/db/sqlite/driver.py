"""The one place that picks a sqlite3 module and loads sqlite-vec.

CPython may be built without extension loading, and then the stdlib module
cannot load sqlite-vec. ``sqlean`` bundles a recent SQLite with
extension loading; it is a drop-in DB-API module. Everything else imports
``driver``, ``Error`` and ``connect`` from here.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlean as driver
import sqlite_vec

from memory.text import fts_index_text

Error = driver.Error
OperationalError = driver.OperationalError
IntegrityError = driver.IntegrityError
Row = driver.Row

BUSY_TIMEOUT_MS = 10_000
MIN_VERSION = (3, 35)  # RETURNING, and the FTS5 and JSON features the store uses
# The SQL function the full-text index's triggers call on every text they index.
FTS_TEXT_FUNCTION = "guildlore_fts_text"


class Connection(driver.Connection):
    """A connection that can carry the change events of its open transaction
    (``memory.db.changes``); ``None`` while no one collects them."""

    changes: list[Any] | None = None


def prepare_connection(con: Any, *, read_only: bool = False) -> None:
    """Pragmas and extensions every connection gets."""
    con.enable_load_extension(True)
    try:
        sqlite_vec.load(con)
    finally:
        con.enable_load_extension(False)
    con.row_factory = driver.Row
    con.create_function(FTS_TEXT_FUNCTION, 1, fts_index_text, deterministic=True)
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


def ordinary_tables(con: Any) -> list[str]:
    """The database's own tables, by name: not SQLite's, not FTS5 or vec0
    virtual tables (their rows follow their base rows) nor their shadow tables."""
    rows = con.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name"
    ).fetchall()
    virtual = [str(r[0]) for r in rows if str(r[1] or "").upper().startswith("CREATE VIRTUAL")]
    return [
        str(r[0])
        for r in rows
        if not str(r[0]).startswith("sqlite_")
        and str(r[0]) not in virtual
        and not any(str(r[0]).startswith(f"{v}_") for v in virtual)
    ]


def versions(con: Any) -> dict[str, str]:
    sqlite_version, vec_version = con.execute("select sqlite_version(), vec_version()").fetchone()
    fts5 = True
    try:
        con.execute("create virtual table temp.__fts5_probe using fts5(x)")
        con.execute("drop table temp.__fts5_probe")
    except Error:
        fts5 = False
    return {"sqlite": sqlite_version, "sqlite_vec": vec_version, "fts5": "yes" if fts5 else "no"}


@dataclass(frozen=True)
class Capabilities:
    """What this interpreter's SQLite can do. An error field is None when the
    feature works, or when it was not tried: sqlite-vec and FTS5 are not tried
    without extension loading, secure-delete not without FTS5."""

    version: str
    driver: str
    stdlib_loads_extensions: bool  # this Python's own sqlite3 (guildlore needs it not)
    extension_error: str | None
    vec_version: str | None
    vec_error: str | None
    fts5_error: str | None
    secure_delete_error: str | None

    @property
    def version_ok(self) -> bool:
        return tuple(int(p) for p in self.version.split(".")[:3]) >= MIN_VERSION


def capabilities() -> Capabilities:
    """Probe an in-memory database: extension loading, a sqlite-vec KNN query,
    FTS5 and its secure-delete option."""
    con = driver.connect(":memory:", isolation_level=None)
    try:
        found: dict[str, Any] = {
            "version": con.execute("select sqlite_version()").fetchone()[0],
            "driver": driver.__name__,
            "stdlib_loads_extensions": hasattr(sqlite3.Connection, "enable_load_extension"),
            "extension_error": None,
            "vec_version": None,
            "vec_error": None,
            "fts5_error": None,
            "secure_delete_error": None,
        }
        try:
            con.enable_load_extension(True)
            con.enable_load_extension(False)
        except Exception as exc:
            return Capabilities(**{**found, "extension_error": str(exc)})
        try:
            prepare_connection(con)
            found["vec_version"] = con.execute("select vec_version()").fetchone()[0]
            con.execute("create virtual table temp.v using vec0(e float[3])")
            con.execute("insert into temp.v(rowid, e) values (1, '[1,0,0]'), (2, '[0,1,0]')")
            nearest = con.execute(
                "select rowid from temp.v where e match '[0.9,0.1,0]' and k = 1"
            ).fetchone()[0]
            if nearest != 1:
                raise RuntimeError(f"KNN returned row {nearest}, expected 1")
        except Exception as exc:
            found["vec_error"] = str(exc)
        try:
            con.execute("create virtual table temp.f using fts5(x)")
            con.execute("insert into temp.f(x) values ('hello world')")
            con.execute("select rowid from temp.f where f match 'hello'").fetchall()
        except Exception as exc:
            return Capabilities(**{**found, "fts5_error": str(exc)})
        try:
            con.execute("insert into temp.f(f, rank) values ('secure-delete', 1)")
        except Exception as exc:
            found["secure_delete_error"] = str(exc)
        return Capabilities(**found)
    finally:
        con.close()
