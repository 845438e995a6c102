"""Small in-process meters: ingest rate from counter samples, login throttling."""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict, deque
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
    """Refuse a client for a while after too many wrong tokens from it in a minute.

    Counted per client key (``client_key``), so one address guessing locks
    out only itself. At most ``max_clients`` keys are tracked; past that the
    one tracked longest is forgotten first, which bounds memory however many
    addresses guess.
    """

    WINDOW_S = 60.0

    def __init__(
        self,
        per_minute: int,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = 10_000,
    ):
        self.per_minute = per_minute
        self.max_clients = max_clients
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def _recent(self, key: str) -> deque[float] | None:
        failures = self._failures.get(key)
        if failures is None:
            return None
        now = self._clock()
        while failures and now - failures[0] > self.WINDOW_S:
            failures.popleft()
        if not failures:
            del self._failures[key]
            return None
        return failures

    def blocked(self, key: str) -> bool:
        failures = self._recent(key)
        return failures is not None and len(failures) >= self.per_minute

    def retry_after(self, key: str) -> int:
        """Whole seconds until ``key`` may try again (0 if it may now)."""
        failures = self._recent(key)
        if failures is None or len(failures) < self.per_minute:
            return 0
        # Only the last ``per_minute`` failures are kept: the oldest leaves first.
        return max(1, math.ceil(self.WINDOW_S - (self._clock() - failures[0])))

    def failed(self, key: str) -> None:
        failures = self._recent(key)
        if failures is None:
            failures = self._failures[key] = deque(maxlen=self.per_minute)
            while len(self._failures) > self.max_clients:
                self._failures.popitem(last=False)
        failures.append(self._clock())


def client_key(remote: str | None, forwarded_for: str | None, trust_forwarded_for: bool) -> str:
    """Who is guessing: the peer address, or with ``trust_forwarded_for`` the
    address a reverse proxy put last in ``X-Forwarded-For``.

    Only the last entry can be trusted (the proxy appended it; anything before
    came from the client). IPv6 clients are counted per /64, the block one
    host usually holds, so stepping through addresses in it does not help.
    """
    address = remote or ""
    if trust_forwarded_for and forwarded_for:
        last = forwarded_for.rsplit(",", 1)[-1].strip()
        if last:
            address = last
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return address[:100] or "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)
