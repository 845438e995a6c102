"""Small in-process meters: ingest rate from counter samples, login throttling."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any


class RateMeter:
    """Per-minute ingest rates from periodic samples of ``Memory.counters()``."""

    def __init__(self, window_s: float = 600.0, clock: Callable[[], float] = time.monotonic):
        self.window_s = window_s
        self._clock = clock
        self._samples: deque[tuple[float, int, int]] = deque()

    def sample(self, counters: Mapping[str, Any]) -> None:
        now = self._clock()
        self._samples.append(
            (now, int(counters.get("ingest_accepted", 0)), int(counters.get("ingest_processed", 0)))
        )
        while len(self._samples) > 2 and now - self._samples[0][0] > self.window_s:
            self._samples.popleft()

    def rates(self, counters: Mapping[str, Any]) -> dict[str, float | None]:
        """Messages per minute since the oldest sample in the window (None until one exists)."""
        now = self._clock()
        accepted = int(counters.get("ingest_accepted", 0))
        processed = int(counters.get("ingest_processed", 0))
        if not self._samples or now - self._samples[0][0] < 1.0:
            return {"accepted_per_min": None, "processed_per_min": None, "window_s": None}
        t0, a0, p0 = self._samples[0]
        minutes = (now - t0) / 60.0
        return {
            "accepted_per_min": round(max(0, accepted - a0) / minutes, 2),
            "processed_per_min": round(max(0, processed - p0) / minutes, 2),
            "window_s": round(now - t0, 1),
        }


class LoginThrottle:
    """Refuse logins for a while after too many wrong tokens in a minute."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic):
        self.per_minute = per_minute
        self._clock = clock
        self._failures: deque[float] = deque()

    def _trim(self) -> None:
        now = self._clock()
        while self._failures and now - self._failures[0] > 60.0:
            self._failures.popleft()

    def blocked(self) -> bool:
        self._trim()
        return len(self._failures) >= self.per_minute

    def failed(self) -> None:
        self._failures.append(self._clock())
        self._trim()
