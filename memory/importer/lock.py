"""One import at a time into a data dir.

Two imports of the same export into one data dir at once both take the
messages the other has accepted but not processed yet (a message found
``pending`` is resumed, as after a crash) and process them twice: journal
lines twice, fact history rows twice. So an import holds an exclusive
``flock`` on a lock file beside the database from before the engine opens
(its start-up replay already processes the inbox) until it has closed. A
second import is refused at once, in one line naming the process that holds
the lock; the lock goes with the process however it ends (a crash, SIGKILL),
so a stale file never blocks the next import. The file stays (removing it
would let a third import lock a new file while the second still waits on the
old one) and holds the holder's pid, start time and command line.

The lock is on the machine: with PostgreSQL (``database_url``) it is taken in
the journal folder, which keeps imports on one host apart, not imports run
on several hosts against one server.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from memory.config import MemoryConfig
from memory.db.url import is_postgres_url
from memory.errors import GuildloreError

LOCK_SUFFIX = ".import-lock"


class ImportBusy(GuildloreError):
    """Another import holds the data dir's import lock."""


def lock_path(config: MemoryConfig) -> Path:
    if is_postgres_url(config.database_url):
        return config.journal_dir / LOCK_SUFFIX
    return config.db_path.with_name(config.db_path.name + LOCK_SUFFIX)


@contextlib.contextmanager
def import_lock(config: MemoryConfig) -> Iterator[Path]:
    """Hold the import lock of ``config``'s data while the block runs;
    ``ImportBusy`` when another process holds it. A folder where the lock
    file cannot be made raises the ``OSError`` (a read-only or full disk,
    said in one line by the caller)."""
    path = lock_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ImportBusy(_busy(path, fd)) from None
        holder = {
            "pid": os.getpid(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv)[:500],
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode("utf-8") + b"\n", 0)
        yield path
    finally:
        os.close(fd)  # releases the lock


def _busy(path: Path, fd: int) -> str:
    where = path.parent
    try:
        holder = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace") or "{}")
    except ValueError:
        holder = {}
    who = ""
    if isinstance(holder, dict) and holder.get("pid"):
        who = f" (pid {holder['pid']}, started {holder.get('started', '?')}"
        if holder.get("command"):
            who += f": {holder['command']}"
        who += ")"
    return (
        f"another import is running into {where}{who}; wait for it to finish (or stop it), "
        "then run this one: it skips what that one imported"
    )
