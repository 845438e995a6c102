"""Rate limiting for log rows: one event per interval gets through, the rest are counted.

A failing endpoint or a busy worker produces the same event many times a
second; an operator needs to see that it happens and how often, not every
occurrence.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable


class Throttle:
    """Lets one event of a key through per ``interval_s`` and counts the ones held back."""

    def __init__(self, interval_s: float, clock: Callable[[], float]) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._last: dict[Hashable, float] = {}
        self._held: dict[Hashable, int] = {}

    def admit(self, key: Hashable = None) -> int | None:
        """None when this event is held back (and counted); otherwise how many
        events of ``key`` were held back since the last one let through."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval_s:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._held.pop(key, 0)
