"""Disk trouble: a full, read-only or failing disk recognised in an error,
and the one line that tells an operator what happened and what to do.

A full disk reaches guildlore as an ``OSError`` (``ENOSPC``, ``EDQUOT``) from
a file write, as SQLite's "database or disk is full" (``SQLITE_FULL``) or as
PostgreSQL's ``53100 disk_full``; a read-only one as ``EROFS``/``EACCES``,
``SQLITE_READONLY`` or ``SQLITE_CANTOPEN``. These are not bugs and not the
fault of the message being stored: the user paths (``guildlore`` commands,
dashboard actions, the bot's log) say them in one line instead of a
traceback, and the write paths leave their work to be done again (a message
stays in the inbox, a journal line is owed) rather than marking it failed.

``disk_problem`` walks an exception and what caused it (``__cause__``,
``__context__``), so an error wrapped on its way up (``StorageError`` around
a driver error) is still recognised.
"""

from __future__ import annotations

import errno
import logging
import threading
from dataclasses import dataclass
from typing import Literal

DiskKind = Literal["full", "read-only", "damaged", "failing"]
# The attribute ``TroubleLog`` sets on its log records.
DISK_TROUBLE = "disk_trouble"

_ERRNO: dict[int, DiskKind] = {
    errno.ENOSPC: "full",
    errno.EDQUOT: "full",
    errno.EFBIG: "full",
    errno.EROFS: "read-only",
    errno.EACCES: "read-only",
    errno.EPERM: "read-only",
    errno.EIO: "failing",
}
# SQLite's primary result codes (``sqlite_errorname`` of a driver error
# starts with one of them: SQLITE_IOERR_WRITE is SQLITE_IOERR's).
_SQLITE: dict[str, DiskKind] = {
    "SQLITE_FULL": "full",
    "SQLITE_READONLY": "read-only",
    "SQLITE_CANTOPEN": "read-only",
    "SQLITE_PERM": "read-only",
    "SQLITE_CORRUPT": "damaged",
    "SQLITE_NOTADB": "damaged",
    "SQLITE_IOERR": "failing",
}
# The same, by message, for a driver error without the attribute.
_SQLITE_WORDS: tuple[tuple[str, DiskKind], ...] = (
    ("database or disk is full", "full"),
    ("attempt to write a readonly database", "read-only"),
    ("unable to open database file", "read-only"),
    ("database disk image is malformed", "damaged"),
    ("file is not a database", "damaged"),
    ("disk i/o error", "failing"),
)
# PostgreSQL's SQLSTATE codes.
_SQLSTATE: dict[str, DiskKind] = {
    "53100": "full",  # disk_full
    "58030": "failing",  # io_error
    "25006": "read-only",  # read_only_sql_transaction (a standby)
    "XX001": "damaged",  # data_corrupted
}

_WHAT: dict[DiskKind, str] = {
    "full": "is full",
    "read-only": "cannot be written (read-only, or no permission)",
    "damaged": "holds a damaged database file",
    "failing": "reports input/output errors",
}
_ADVICE: dict[DiskKind, str] = {
    "full": "free space there (or move the data dir to a disk with room)",
    "read-only": "make it writable (mount it read-write, or fix its owner and permissions)",
    "damaged": "stop guildlore, keep a copy of the file and restore a backup "
    "(`guildlore doctor` runs an integrity check)",
    "failing": "check the disk (dmesg, SMART) before anything else",
}


@dataclass(frozen=True)
class DiskProblem:
    """What went wrong with the disk, where, and the system's own words."""

    kind: DiskKind
    detail: str  # e.g. "No space left on device", "database or disk is full"
    path: str | None = None  # the file the OS named, when it named one

    def describe(self, where: str | None = None) -> str:
        """ "the disk holding /data is full (No space left on device)"."""
        place = where or self.path
        subject = f"the disk holding {place}" if place else "the disk"
        return f"{subject} {_WHAT[self.kind]} ({self.detail})"

    @property
    def advice(self) -> str:
        return _ADVICE[self.kind]

    def line(self, where: str | None = None, then: str = "run the same command again") -> str:
        """One sentence: what happened, and what to do."""
        return f"{self.describe(where)}: {self.advice}, then {then}"


def disk_problem(exc: BaseException | None) -> DiskProblem | None:
    """The disk trouble behind ``exc`` (or an error it was raised from), else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        found = _classify(exc)
        if found is not None:
            return found
        exc = exc.__cause__ or exc.__context__
    return None


def _classify(exc: BaseException) -> DiskProblem | None:
    if isinstance(exc, OSError) and exc.errno in _ERRNO:
        path = exc.filename if isinstance(exc.filename, str) else None
        return DiskProblem(_ERRNO[exc.errno], exc.strerror or str(exc), path)
    name = getattr(exc, "sqlite_errorname", None)
    if isinstance(name, str):
        for code, kind in _SQLITE.items():
            if name == code or name.startswith(code + "_"):
                return DiskProblem(kind, str(exc).splitlines()[0] if str(exc) else name)
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate in _SQLSTATE:
        return DiskProblem(_SQLSTATE[sqlstate], str(exc).splitlines()[0] if str(exc) else sqlstate)
    if type(exc).__name__ in ("OperationalError", "DatabaseError"):
        text = str(exc).lower()
        for words, kind in _SQLITE_WORDS:
            if words in text:
                return DiskProblem(kind, str(exc).splitlines()[0])
    return None


class TroubleLog:
    """Disk trouble said once, not once per batch: the first failure of a
    kind is logged as an error, the repeats at debug level until a success
    ends the episode (``ok``), and ``repeats`` counts them meanwhile."""

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._lock = threading.Lock()
        self._open: dict[str, int] = {}  # what fails now → its repeats since the first
        self.repeats = 0

    def failed(self, what: str, problem: DiskProblem, consequence: str) -> None:
        """``what`` failed because of ``problem``; ``consequence`` says what
        becomes of the work (e.g. "the lines are owed and written later")."""
        with self._lock:
            first = what not in self._open
            self._open[what] = self._open.get(what, -1) + 1
            if not first:
                self.repeats += 1
        # ``disk_trouble`` on the record: a command that says the trouble in
        # its own last line filters these out (``DISK_TROUBLE``).
        if first:
            self._log.error(
                "%s: %s; %s", what, problem.describe(), consequence, extra={DISK_TROUBLE: True}
            )
        else:
            self._log.debug("%s again: %s", what, problem.describe(), extra={DISK_TROUBLE: True})

    def error(self, what: str, exc: BaseException, consequence: str) -> None:
        """``what`` failed with ``exc``: disk trouble as ``failed`` says it,
        anything else logged with its traceback (a bug to look at)."""
        problem = disk_problem(exc)
        if problem is None:
            self._log.error("%s failed", what, exc_info=exc)
        else:
            self.failed(what, problem, consequence)

    def ok(self, what: str) -> None:
        with self._lock:
            repeats = self._open.pop(what, None)
        if repeats is not None:
            self._log.info("%s works again (%d more failures meanwhile)", what, repeats)
