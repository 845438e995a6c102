"""The gate the writer thread closes on new reads while it restarts the WAL: a
restart can only complete when no read transaction is open."""

from __future__ import annotations

import threading


class ReadGate:
    """Counts the reads in progress and lets the writer thread hold new ones back."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._held = False

    def enter(self) -> None:
        with self._cond:
            while self._held:
                self._cond.wait()
            self._active += 1

    def leave(self) -> None:
        with self._cond:
            self._active -= 1
            if not self._active:
                self._cond.notify_all()

    def hold(self, timeout: float) -> bool:
        """Hold new reads back; True once no read is in progress (within ``timeout``)."""
        with self._cond:
            self._held = True
            return self._cond.wait_for(lambda: not self._active, timeout)

    def release(self) -> None:
        with self._cond:
            self._held = False
            self._cond.notify_all()
