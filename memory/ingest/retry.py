"""When a message whose processing failed is tried again, and when not.

A failed attempt (the extraction call, or the message's batch) puts the
message in state ``retry`` with a due time: ``retry_base_s`` after the first
failure, doubling with each further one up to ``retry_max_delay_s``. The
``retry_max_attempts``-th failure gives up: state ``failed``, with the reason,
until an operator asks for another try. A message that cannot be processed at
all (its own data breaks a step) is ``failed`` at once: trying it again
changes nothing until someone changes something.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from memory.clock import iso, parse_iso
from memory.config import IngestConfig
from memory.db.core import Connection
from memory.store import messages as store_messages


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    base_s: float = 30.0
    max_delay_s: float = 3600.0

    @classmethod
    def from_config(cls, cfg: IngestConfig) -> RetryPolicy:
        return cls(cfg.retry_max_attempts, cfg.retry_base_s, cfg.retry_max_delay_s)

    def delay_s(self, failures: int) -> float:
        """The wait after the ``failures``-th failure (1-based)."""
        return float(min(self.max_delay_s, self.base_s * 2 ** max(0, failures - 1)))

    def record(
        self, con: Connection, message_id: str, reason: str, now: str, *, journaled: bool = False
    ) -> str:
        """Record one failed attempt in the open transaction; the new state."""
        failures = store_messages.failed_attempts(con, message_id) + 1
        if failures >= self.max_attempts:
            state, retry_at = "failed", None
            reason = f"gave up after {failures} attempts: {reason}"
        else:
            state = "retry"
            retry_at = iso(parse_iso(now) + timedelta(seconds=self.delay_s(failures)))
        store_messages.record_failure(
            con, message_id, state, reason, now, retry_at, journaled=journaled
        )
        return state


def quarantine(con: Connection, message_id: str, reason: str, now: str, *, journaled: bool) -> str:
    """Mark a message that cannot be processed ``failed`` at once; the new state."""
    store_messages.record_failure(con, message_id, "failed", reason, now, None, journaled=journaled)
    return "failed"
