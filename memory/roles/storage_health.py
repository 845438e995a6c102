"""``Memory.storage_health``: what health says about the disk under the memory.

Three things a process can be blind to while every write still succeeds:

* journal lines owed (``memory.roles.journal_owed``): the disk refused them,
  the messages are stored, the lines wait for room;
* the SQLite file replaced or deleted under the process (``file_identity``
  taken at start against the path's now): the process writes to a file no
  one else sees;
* pages of the file overwritten: ``PRAGMA quick_check`` on a connection of
  its own. It reads the whole file, so it runs at most once per
  ``check_every_s`` (and again at once when the file's identity changed);
  health in between shows the last result and when it was taken.

With PostgreSQL only the owed lines apply (none: the journal is rendered
from the database), and the two file checks say ``None``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from memory.clock import Clock, iso
from memory.db.core import Database
from memory.db.sqlite.integrity import file_identity, quick_check
from memory.disk import disk_problem
from memory.errors import DatabaseUnavailable
from memory.roles.journal_owed import OwedJournal

FileState = Literal["ok", "replaced", "deleted"]
CHECK_EVERY_S = 300.0


@dataclass(frozen=True)
class StorageReport:
    journal_owed: int | None  # None: could not be counted (the database is unreadable)
    database_file: FileState | None  # None: not a SQLite file
    quick_check: list[str] | None  # problems found (empty: none); None: not run
    quick_check_at: str | None
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "journal_owed": self.journal_owed,
            "database_file": self.database_file,
            "quick_check": (None if self.quick_check is None else (self.quick_check or ["ok"])),
            "quick_check_at": self.quick_check_at,
        }


class StorageHealth:
    def __init__(
        self,
        db: Database,
        owed: OwedJournal,
        clock: Clock,
        check_every_s: float = CHECK_EVERY_S,
    ) -> None:
        self._db = db
        self._owed = owed
        self._clock = clock
        self.check_every_s = check_every_s
        path = getattr(db, "path", None)
        self._path: Path | None = path if db.dialect == "sqlite" and path is not None else None
        self._identity: tuple[int, int] | None = None
        self._checked: list[str] | None = None
        self._checked_at: str | None = None
        self._checked_mono = 0.0
        self._checked_identity: tuple[int, int] | None = None
        self._lock = asyncio.Lock()

    def opened(self) -> None:
        """The database is open: remember which file it is."""
        if self._path is not None:
            self._identity = file_identity(self._path)

    def file_state(self) -> FileState | None:
        if self._path is None or self._identity is None:
            return None
        now = file_identity(self._path)
        if now is None:
            return "deleted"
        return "ok" if now == self._identity else "replaced"

    async def report(self) -> StorageReport:
        try:
            owed: int | None = await self._owed.count()
        except DatabaseUnavailable:
            owed = None  # away or given up on: health says so beside this
        except Exception as exc:
            if disk_problem(exc) is None:
                raise
            owed = None  # the database cannot be read: health says so beside this
        state = self.file_state()
        problems = await self._quick_check()
        warnings = []
        if owed:
            warnings.append(
                f"{owed} journal lines are owed: the disk refused them (full or read-only); "
                "they are written once there is room (the journal job, or the next start)"
            )
        if state == "deleted":
            warnings.append(
                f"the database file {self._path} was deleted under this process: what it "
                "writes now is lost when it stops; restore the file and restart"
            )
        elif state == "replaced":
            warnings.append(
                f"the database file {self._path} was replaced under this process: it still "
                "writes to the old file; restart it to use the new one"
            )
        if problems:
            warnings.append(
                f"PRAGMA quick_check found the database file damaged: {'; '.join(problems[:3])}"
                " — stop guildlore, keep a copy of the file and restore a backup"
            )
        return StorageReport(owed, state, problems, self._checked_at, warnings)

    async def _quick_check(self) -> list[str] | None:
        if self._path is None:
            return None
        async with self._lock:
            identity = file_identity(self._path)
            due = (
                self._checked_at is None
                or time.monotonic() - self._checked_mono >= self.check_every_s
                or identity != self._checked_identity
            )
            if due and identity is not None:
                self._checked = await asyncio.to_thread(quick_check, self._path)
                self._checked_at = iso(self._clock())
                self._checked_mono = time.monotonic()
                self._checked_identity = identity
            return self._checked
