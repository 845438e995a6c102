"""Is the SQLite file still the one this process writes, and is it whole?

Two things can go wrong under a running process without any write failing:

* the file is deleted or replaced (a restore copied over it, a clean-up
  removed the data dir): the process keeps writing to the inode it opened,
  which no other process and no backup will ever see. ``file_identity``
  (device and inode) taken at open, compared with the path's now, tells;
* pages are overwritten (a disk error, another program writing into the
  file): SQLite finds out only when it reads them. ``quick_check`` runs
  ``PRAGMA quick_check`` on a connection of its own, opened for the check, so
  it reads the pages from the file rather than from a long-lived
  connection's cache.
"""

from __future__ import annotations

import os
from pathlib import Path

from memory.db.sqlite import driver as sqlite

QUICK_CHECK_ROWS = 10  # problems reported at most


def file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``; None when there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def quick_check(path: Path, rows: int = QUICK_CHECK_ROWS) -> list[str]:
    """What ``PRAGMA quick_check`` finds wrong in the file (empty: nothing),
    read through a new read-only connection. A file that cannot be opened or
    read as a database is one problem, in SQLite's words."""
    try:
        con = sqlite.connect(path, read_only=True)
    except sqlite.Error as exc:
        return [str(exc)]
    try:
        found = [str(r[0]) for r in con.execute(f"PRAGMA quick_check({int(rows)})")]
    except sqlite.Error as exc:
        return [str(exc)]
    finally:
        con.close()
    return [] if found == ["ok"] else found
