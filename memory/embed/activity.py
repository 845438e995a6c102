"""What the embedding service did: its counters (``EmbeddingStats``) and its
action-log rows, ``memory_embedding_call`` and ``memory_embedding_error``,
written so that a busy worker or a failing endpoint cannot flood the log.

* Calls: background batches are tallied per (guild, model); the first batch
  after a quiet minute is written at once, later ones are added to the tally
  and written with the next row (at the latest when the service stops). A
  re-index run is one row per guild, written when the guild is done. Query embeddings are not logged: one runs per
  reply or search, and the dashboard's counters already show them.
* Errors: at most one row a minute, carrying how many errors occurred since
  the previous row.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from memory.clock import Clock, iso
from memory.db.core import Database
from memory.disk import disk_problem
from memory.store import ops as store_ops
from memory.throttle import Throttle

log = logging.getLogger(__name__)

LOG_INTERVAL_S = 60.0

_Key = tuple[str, str, str]  # (guild id, model, source)


@dataclass
class EmbeddingStats:
    """Totals since start, for the dashboard, /metrics and command summaries."""

    fact_vectors: int = 0
    message_vectors: int = 0
    calls: int = 0
    errors: int = 0
    query_cache_hits: int = 0
    last_error: str | None = None


@dataclass
class _Tally:
    facts: int = 0
    messages: int = 0
    batches: int = 0


class EmbeddingActivity:
    def __init__(self, db: Database, clock: Clock, interval_s: float = LOG_INTERVAL_S) -> None:
        self.db = db
        self.clock = clock
        self._calls = Throttle(interval_s, self._seconds)
        self._errors = Throttle(interval_s, self._seconds)
        self._tallies: dict[_Key, _Tally] = {}

    def _seconds(self) -> float:
        return self.clock().timestamp()

    async def batch(
        self, guild_id: str, model: str, *, facts: int, messages: int, source: str
    ) -> None:
        """Count one embedding call's vectors; write the tally if its minute is up."""
        key = (guild_id, model, source)
        if self.count(guild_id, model, facts=facts, messages=messages, source=source):
            await self._write_tally(key)

    def count(self, guild_id: str, model: str, *, facts: int, messages: int, source: str) -> bool:
        """Add to the tally of (guild, model, ``source``: background or reindex)
        without writing; True when a row for it is due."""
        if not facts and not messages:
            return False
        key = (guild_id, model, source)
        tally = self._tallies.setdefault(key, _Tally())
        tally.facts += facts
        tally.messages += messages
        tally.batches += 1
        return self._calls.admit(key) is not None

    async def flush(self) -> None:
        """Write every tally not yet in the log."""
        for key in list(self._tallies):
            await self._write_tally(key)

    async def _write_tally(self, key: _Key) -> None:
        tally = self._tallies.pop(key, None)
        if tally is None:
            return
        guild_id, model, source = key
        plural = "es" if tally.batches != 1 else ""
        await self._write(
            "memory_embedding_call",
            f"{source}: {tally.facts} facts and {tally.messages} messages embedded "
            f"in {tally.batches} batch{plural} ({model})",
            guild_id,
            {
                "model": model,
                "source": source,
                "facts": tally.facts,
                "messages": tally.messages,
                "batches": tally.batches,
            },
        )

    async def error(
        self, exc: BaseException, *, guild_id: str | None, model: str | None, source: str
    ) -> None:
        """Log a failed embedding call (``source``: facts, messages, query or reindex)."""
        held = self._errors.admit()
        if held is None:
            return
        await self._write(
            "memory_embedding_error",
            f"{source}: {exc}",
            guild_id,
            {
                "model": model,
                "source": source,
                "error": type(exc).__name__,
                "errors": held + 1,
            },
        )

    async def _write(
        self, kind: str, message: str, guild_id: str | None, detail: dict[str, Any]
    ) -> None:
        now = iso(self.clock())
        try:
            await self.db.write(
                lambda con: store_ops.log_action(
                    con, kind, message, now, guild_id=guild_id, detail=detail
                )
            )
        except Exception as exc:  # the log is best effort; the embedding work goes on
            # A full or read-only disk is said where the write failed first.
            level = logging.DEBUG if disk_problem(exc) is not None else logging.WARNING
            log.log(level, "could not write a %s row: %s", kind, exc)
