"""Whether the database answers: since when it does not, how often this
process tried to reach it again, and whether the process should give up.

Both backends keep one ``DbStatus``. PostgreSQL's connections report every
connection that broke and every attempt to connect again
(``memory.db.postgres.pools``); SQLite reports an error that does not pass
by itself (a damaged file, an I/O error, the file gone) as a failure at once.

While the database is unreachable, work waits for it (the writer, the urgent
writer, the readers and the listener reconnect with back-off) instead of
failing: a restart of the server costs the process nothing. Past
``unreachable_exit_s`` the status records a failure: from then on every call
on the database raises ``DatabaseUnavailable``, and the process (``guildlore
run``, ``import``, ``dashboard``) logs why in one line and exits non-zero so
a supervisor starts it again. ``unreachable_exit_s = 0`` waits for ever.

Thread-safe: the store's threads report, the event loop reads.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from memory.errors import DatabaseUnavailable

log = logging.getLogger(__name__)

WATCH_S = 0.5  # how often ``wait_failure`` looks at the limit (and runs the probe)
SETTING = "database.unreachable_exit_s"


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


class DbStatus:
    """One database's reachability, as this process sees it."""

    def __init__(
        self,
        unreachable_exit_s: float = 300.0,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.unreachable_exit_s = max(0.0, float(unreachable_exit_s))
        self._monotonic = monotonic
        self._wall = wall
        self._lock = threading.Lock()
        self.reachable = True
        self._down_at: float | None = None  # monotonic, start of this outage
        self._down_wall: float | None = None
        self.outages = 0  # times it went away
        self.reconnects = 0  # times it came back
        self.reconnect_attempts = 0  # connection attempts that failed, in every outage
        self.last_error: str | None = None
        self._failure: str | None = None
        self.failure_kind: str | None = None  # "unreachable" or "damaged", once failed
        # Looked at with the limit: a check that finds a failure no error shows
        # (SQLite: the file deleted under the process).
        self.probe: Callable[[], str | None] | None = None

    # -- reports from the connections ----------------------------------------------------
    def suspect(self, error: object) -> None:
        """A connection in use broke. Not yet an outage: a connection found
        broken after the server came back is replaced at once; the attempt
        that cannot connect (``attempt_failed``) starts the outage."""
        with self._lock:
            self.last_error = _one_line(error)

    def lost(self, error: object) -> None:
        """The database cannot be reached (an attempt to connect failed)."""
        text = _one_line(error)
        with self._lock:
            self.last_error = text
            if not self.reachable:
                return
            self.reachable = False
            self._down_at = self._monotonic()
            self._down_wall = self._wall()
            self.outages += 1
        limit = (
            f"giving up after {self.unreachable_exit_s:g} s ({SETTING})"
            if self.unreachable_exit_s
            else f"waiting for ever ({SETTING} = 0)"
        )
        log.warning("database unreachable: %s; reconnecting with back-off, %s", text, limit)

    def attempt_failed(self, error: object) -> None:
        """An attempt to connect failed."""
        with self._lock:
            self.reconnect_attempts += 1
        self.lost(error)
        self.check()

    def connected(self) -> None:
        """A connection opened: the database answers (again)."""
        with self._lock:
            if self.reachable:
                return
            self.reachable = True
            away = self._monotonic() - (self._down_at or self._monotonic())
            self._down_at = self._down_wall = None
            self.reconnects += 1
            attempts = self.reconnect_attempts
        log.warning(
            "database reachable again after %.1f s (%d failed reconnect attempts so far)",
            away,
            attempts,
        )

    def fail(self, reason: str, *, unreachable: bool = False) -> None:
        """The database cannot be used any more by this process (the first
        reason stays): damaged, or (``unreachable``) away past the limit."""
        with self._lock:
            if self._failure is not None:
                return
            self._failure = reason
            self.failure_kind = "unreachable" if unreachable else "damaged"

    # -- what the process asks ---------------------------------------------------------
    @property
    def failure(self) -> str | None:
        return self._failure

    def unreachable_for(self) -> float:
        """Seconds since the current outage began (0 when reachable)."""
        down = self._down_at
        return 0.0 if down is None or self.reachable else max(0.0, self._monotonic() - down)

    def check(self, *, probe: bool = True) -> str | None:
        """Record a failure if the database has been unreachable past the limit
        (or the probe finds one); the failure, if any."""
        if probe and self._failure is None and self.probe is not None:
            found = self.probe()
            if found:
                self.fail(found)
        if self._failure is None and self.unreachable_exit_s and not self.reachable:
            away = self.unreachable_for()
            if away >= self.unreachable_exit_s:
                since = _iso(self._down_wall) if self._down_wall else "?"
                self.fail(
                    f"database unreachable since {since} ({away:.0f} s, past {SETTING} = "
                    f"{self.unreachable_exit_s:g}): {self.last_error or 'no answer'}",
                    unreachable=True,
                )
        return self._failure

    def raise_if_failed(self) -> None:
        """Raise ``DatabaseUnavailable`` once the process has given up (cheap:
        every transaction asks)."""
        if self._failure is not None or (not self.reachable and self.check(probe=False)):
            raise DatabaseUnavailable(
                str(self._failure), unreachable=self.failure_kind == "unreachable"
            )

    async def wait_failure(self) -> str:
        """Return once the process should stop using the database: why."""
        while True:
            found = self.check()
            if found is not None:
                return found
            await asyncio.sleep(WATCH_S)

    def as_dict(self) -> dict[str, Any]:
        """For health and ``/metrics``."""
        with self._lock:
            since = self._down_wall if not self.reachable else None
            return {
                "reachable": self.reachable,
                "unreachable_since": _iso(since) if since is not None else None,
                "unreachable_s": round(self.unreachable_for(), 1),
                "outages": self.outages,
                "reconnects": self.reconnects,
                "reconnect_attempts": self.reconnect_attempts,
                "last_error": self.last_error,
                "failure": self._failure,
                "failure_kind": self.failure_kind,
                "unreachable_exit_s": self.unreachable_exit_s,
            }


def _one_line(error: object) -> str:
    text = " ".join(str(error).split())
    return text[:300] or type(error).__name__
