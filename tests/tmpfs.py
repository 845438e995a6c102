"""Small real file systems for disk-trouble tests: a tmpfs of a few hundred KB
mounted on a folder of ``tmp_path`` (grown, made read-only, unmounted), so a
full or read-only disk is the kernel's, not a mock. Mounting needs root (and
CAP_SYS_ADMIN in a container): the suite runs as root; where it cannot mount,
these tests fail saying so (the suite skips nothing but the optional local
speech-to-text extra)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. "300k") mounted on ``path`` for the block."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        _mount("-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path))
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        pytest.fail(
            f"cannot mount a tmpfs for a real full disk ({detail.strip()}): "
            "run the suite as root (in a container: with CAP_SYS_ADMIN)"
        )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def resize(path: Path, size: str) -> None:
    """Grow (or shrink) the tmpfs on ``path``: "free space"."""
    _mount("-o", f"remount,size={size}", str(path))


def read_only(path: Path, ro: bool = True) -> None:
    _mount("-o", f"remount,{'ro' if ro else 'rw'}", str(path))


def fill(path: Path, leave_bytes: int = 0) -> Path:
    """A file that takes all but ``leave_bytes`` of the free space on ``path``'s
    file system (whole 4 KiB pages); removing it frees the space again."""
    filler = path / "filler"
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    size = max(0, (free - leave_bytes) // 4096 * 4096)
    with open(filler, "wb") as f:
        try:
            f.write(b"\0" * size)
            f.flush()
        except OSError:  # metadata took a page: full is what was wanted
            pass
    return filler
