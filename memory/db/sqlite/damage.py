"""What tells a running process that its SQLite file is gone for good: an
error that does not pass by trying again, or the file at the database's path
no longer being the one it opened.

``SqliteDatabase`` records either in its ``status`` (``memory.db.status``)
as a failure: every later call raises ``DatabaseUnavailable`` instead of
failing the same way for ever, and the process says why and exits non-zero.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from memory.db.status import DbStatus

T = TypeVar("T")

# SQLite's errors that do not pass by trying again (extended codes included:
# SQLITE_IOERR_READ, SQLITE_CORRUPT_VTAB …). A full disk and a read-only file
# are not among them: freeing space or fixing permissions ends those.
FATAL_ERRORS = ("SQLITE_IOERR", "SQLITE_CORRUPT", "SQLITE_NOTADB")

FileId = tuple[int, int]  # (device, inode)


def fatal(exc: BaseException, path: Path) -> str | None:
    """Why ``exc`` means the database at ``path`` cannot be used any more, if it does."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    if name.startswith(FATAL_ERRORS):
        return f"the database {path} failed: {exc} ({name})"
    return None


def file_id(path: Path) -> FileId:
    st = os.stat(path)
    return (st.st_dev, st.st_ino)


def file_changed(path: Path, opened: FileId) -> str | None:
    """Why the file at ``path`` is no longer the one opened, if it is not
    (deleted, or another file moved there): writes would go nowhere."""
    try:
        now = file_id(path)
    except FileNotFoundError:
        return f"the database file {path} was deleted under the process"
    except OSError as exc:
        return f"the database file {path} cannot be looked at: {exc}"
    if now != opened:
        return f"the database file {path} was replaced under the process"
    return None


class Watch:
    """The damage checks of one database file, reporting to its ``status``."""

    def __init__(self, path: Path, status: DbStatus) -> None:
        self.path = path
        self.status = status
        self._opened: FileId | None = None
        status.probe = self.probe

    def opened(self) -> None:
        """The file is open: later, another file at its path is a failure."""
        self._opened = file_id(self.path)

    def probe(self) -> str | None:
        return None if self._opened is None else file_changed(self.path, self._opened)

    def note(self, exc: BaseException) -> None:
        """Record ``exc`` as the database's failure if it will not pass."""
        reason = fatal(exc, self.path)
        if reason is not None:
            self.status.fail(reason)

    async def watched(self, work: Awaitable[T]) -> T:
        """``work``'s result; its error noted (``note``) on the way out."""
        try:
            return await work
        except Exception as exc:
            self.note(exc)
            raise
