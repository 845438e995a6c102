"""What ``guildlore doctor`` finds on the disk under a SQLite memory, read-only.

* the database file's integrity (``PRAGMA quick_check`` on a connection of
  its own);
* journal lines owed: processed messages whose line the disk refused
  (``memory.roles.journal_owed`` writes them at the next start);
* what interrupted writes left in the journal folder: temp files of a killed
  writer (they may hold text erased since; removed at the next start) and
  daily files ending in an unfinished line (cut at the next start);
* processes that still have the database file open after it was deleted or
  replaced (Linux: their ``/proc/PID/fd`` links): they write to a file no
  one else will see.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from memory.db.sqlite import driver as sqlite
from memory.db.sqlite.integrity import quick_check
from memory.db.sqlite.migrations import MIGRATIONS, recorded
from memory.file_writes import TEMP_NAME
from memory.store.journal_owed import count_owed

_DELETED = " (deleted)"
_DAILY_SUFFIX = ".md"


@dataclass(frozen=True)
class StaleHolder:
    """A process with the database open whose file is no longer at its path."""

    pid: int
    state: str  # "deleted" or "replaced"
    command: str


@dataclass(frozen=True)
class DiskStatus:
    quick_check: list[str] | None  # problems (empty: none); None: no database file
    journal_owed: int | None  # None: not counted (no database, not migrated)
    leftovers: list[str] = field(default_factory=list)  # temp files in the journal folder
    unfinished: list[str] = field(default_factory=list)  # daily files ending mid-line
    stale_holders: list[StaleHolder] = field(default_factory=list)


def disk_status(db_path: Path, journal_dir: Path) -> DiskStatus:
    """The checks of the module doc for the SQLite file ``db_path`` and its
    journal folder. Reads only; the file's integrity check reads it whole."""
    problems: list[str] | None = None
    owed: int | None = None
    if db_path.exists():
        problems = quick_check(db_path)
        if not problems:
            owed = _owed(db_path)
    return DiskStatus(
        quick_check=problems,
        journal_owed=owed,
        leftovers=_leftovers(journal_dir),
        unfinished=_unfinished(journal_dir),
        stale_holders=stale_holders(db_path),
    )


def _owed(db_path: Path) -> int | None:
    try:
        con = sqlite.connect(db_path, read_only=True)
    except sqlite.Error:
        return None
    try:
        if MIGRATIONS[0][0] not in set(recorded(con)):
            return None
        return count_owed(con)
    except sqlite.Error:
        return None
    finally:
        con.close()


def _leftovers(folder: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(folder) if TEMP_NAME.match(n))
    except OSError:
        return []


def _unfinished(folder: Path) -> list[str]:
    out = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    for name in names:
        if not name.endswith(_DAILY_SUFFIX) or name.startswith("."):
            continue
        try:
            with open(folder / name, "rb") as f:
                f.seek(0, os.SEEK_END)
                if f.tell() and (f.seek(-1, os.SEEK_END), f.read(1))[1] != b"\n":
                    out.append(name)
        except OSError:
            continue
    return out


def stale_holders(db_path: Path, proc: Path = Path("/proc")) -> list[StaleHolder]:
    """Processes (other than this one) holding the file once at ``db_path``
    open after it was deleted, or replaced by another file. Processes this
    one may not look into are skipped."""
    target = str(db_path.absolute())
    try:
        current = os.stat(db_path)
    except FileNotFoundError:
        current = None
    try:
        pids = [int(p) for p in os.listdir(proc) if p.isdigit()]
    except OSError:  # no /proc: not Linux
        return []
    found: list[StaleHolder] = []
    for pid in pids:
        if pid == os.getpid():
            continue
        fd_dir = proc / str(pid) / "fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        state = None
        for fd in fds:
            try:
                link = os.readlink(fd_dir / fd)
            except OSError:
                continue
            if link == target + _DELETED:
                state = "replaced" if current is not None else "deleted"
            elif link == target and current is not None:
                try:
                    held = os.stat(fd_dir / fd)
                except OSError:
                    continue
                if (held.st_dev, held.st_ino) != (current.st_dev, current.st_ino):
                    state = "replaced"
            if state is not None:
                break
        if state is not None:
            found.append(StaleHolder(pid, state, _command(proc / str(pid))))
    return found


def _command(proc_dir: Path) -> str:
    try:
        raw = (proc_dir / "cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:200] or "?"
