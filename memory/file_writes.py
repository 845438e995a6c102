"""Files written whole or not at all, and what an interrupted write leaves.

The journal and MEMORY.md are plain files beside the database. A process
can die in the middle of writing one (SIGKILL, power loss) and a disk can
fill up in the middle of a write; what a reader finds afterwards must be the
old content or the new, never half, and nothing a killed writer left behind
may keep text that was erased since.

* ``atomic_write_bytes`` replaces a file through a temp file beside it and a
  rename. While it writes, it holds an ``flock`` on the temp file, so
  ``remove_leftovers`` can tell a temp file whose writer is dead (removed:
  it may hold a message deleted or a member forgotten since) from one being
  written by a live process (kept).
* ``append_whole`` appends in one ``write`` call and, if the file system
  fails part-way (a full disk), cuts the file back to its size before: no
  line is left cut short.
* ``cut_partial_tail`` removes what a write cut short at the end of a file
  (a power loss, an older version's full disk) and returns it.
* ``folder_lock`` is an ``flock`` on a folder, for writers in several
  processes (the bot, ``guildlore dashboard``, an import).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

# What ``atomic_write_bytes`` names its temp files: ".NAME." + mkstemp's 8
# random characters + ".tmp".
TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.[A-Za-z0-9_]{8}\.tmp$")
_TEMP_TRIES = 5


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so readers see the old or the new file, never half.

    Temp file in the same directory (``os.replace`` must not cross file
    systems), fsync before the rename so a power cut cannot leave an empty
    file behind the new name, fsync the directory so the rename itself sticks.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o644  # mkstemp's 0600 would hide the file from the dashboard user
    fd, tmp = _locked_temp(path)
    try:
        # A second descriptor writes: the lock (on the first) lasts until
        # the file is in place.
        with os.fdopen(os.dup(fd), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)
    fsync_dir(path.parent)


def _locked_temp(path: Path) -> tuple[int, Path]:
    """A new temp file beside ``path``, open and ``flock``-ed by this process
    until it is closed: the lock tells ``remove_leftovers`` its writer lives.
    A clean-up that looked at it between its creation and the lock may have
    removed it; then it is made again."""
    for _ in range(_TEMP_TRIES):
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink > 0:
                return fd, Path(name)
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise OSError(f"could not create a temp file beside {path}")


def fsync_dir(directory: Path) -> None:
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open directories; the rename is still atomic
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        log.debug("fsync of directory %s not supported", directory)
    finally:
        os.close(dir_fd)


def remove_leftovers(folder: Path) -> list[str]:
    """Remove the temp files of ``atomic_write_bytes`` calls whose process
    died (no process holds their lock); the names removed. One that cannot
    be removed (a read-only folder) is logged and left."""
    try:
        names = sorted(n for n in os.listdir(folder) if TEMP_NAME.match(n))
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed: list[str] = []
    for name in names:
        path = folder / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:  # renamed into place meanwhile
            continue
        except OSError as exc:
            log.warning("cannot look at the leftover temp file %s: %s", path, exc)
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live writer's
            if os.fstat(fd).st_nlink == 0:
                continue  # its writer renamed or removed it meanwhile
            path.unlink()
            removed.append(name)
        except OSError as exc:
            log.warning("cannot remove the leftover temp file %s: %s", path, exc)
        finally:
            os.close(fd)  # the lock goes with it
    if removed:
        fsync_dir(folder)
    return removed


def append_whole(path: Path, body: bytes, header: bytes = b"") -> None:
    """Append ``body`` to ``path`` (created with ``header`` first), all or nothing.

    Opened per call rather than kept open: a rewrite swaps the file with
    ``os.replace``, and a cached handle would keep writing to the old,
    unlinked inode. One write call, handed to the OS before this returns (a
    SIGKILL right after cannot lose it; fsync only matters for power loss).
    If the write fails part-way (a full disk), the bytes it wrote are cut off
    again, and a file it created is removed."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            data = header + body
        elif os.pread(fd, 1, size - 1) != b"\n":
            # A writer in another process died mid-line since the start-up
            # repair: a fresh line keeps this one parseable.
            data = b"\n" + body
        else:
            data = body
        done = 0
        try:
            while done < len(data):
                done += os.write(fd, data[done:])
        except OSError:
            if done:
                with contextlib.suppress(OSError):  # shrinking needs no space
                    os.ftruncate(fd, size)
            if size == 0:
                with contextlib.suppress(OSError):
                    path.unlink()
            raise
    finally:
        os.close(fd)


def cut_partial_tail(path: Path) -> str | None:
    """If ``path`` does not end with a newline, cut what follows its last one
    (the file is removed when nothing is left) and return the cut text."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return None
        # The tail is one line: read back far enough to find its start.
        start, chunk = size, 4096
        tail = b""
        while start > 0:
            step = min(chunk, start)
            start -= step
            tail = os.pread(fd, step, start) + tail
            cut = tail.rfind(b"\n")
            if cut >= 0:
                start += cut + 1
                tail = tail[cut + 1 :]
                break
        os.ftruncate(fd, start)
    finally:
        os.close(fd)
    if start == 0:
        path.unlink()
    fsync_dir(path.parent)
    return tail.decode("utf-8", "replace")


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive ``flock`` on the folder itself (created if need be) while
    the block runs: no lock file to leave behind. A folder that cannot be
    created or opened gives no lock: nothing can be written there anyway."""
    fd = None
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd is not None:
            os.close(fd)  # closing releases the flock
