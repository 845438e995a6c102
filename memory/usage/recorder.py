"""The buffered half of the daily series and the request log.

Searches are reads and extraction or reply calls happen outside any write
transaction, so what they count is kept in memory — a dict of increments and
a list of request rows, nothing on the hot path but that — and written every
``UsageConfig.flush_s`` seconds in one transaction, which also folds the
increments the write path inserted (``memory.store.usage.fold``). Closing
the engine writes what is left. A crash loses at most the last few seconds
of these counts; what the write path counts (messages, facts) is committed
with the work itself.

The database being unreachable keeps the rows for the next round, at most
``buffer_max_rows`` of them (the oldest go first, counted in ``dropped``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass

from memory.clock import Clock, iso
from memory.config import UsageConfig
from memory.db.core import Connection, Database
from memory.disk import disk_problem
from memory.errors import DatabaseUnavailable
from memory.models import RequestLogEntry
from memory.store import usage as store
from memory.usage.series import (
    REQUEST_KINDS,
    REQUEST_OUTCOMES,
    REQUEST_SERIES,
    Outcome,
    RequestKind,
)

log = logging.getLogger(__name__)

DETAIL_MAX = 160


def safe_reason(exc: BaseException) -> str:
    """An error for the request log: its type and its message up to the
    first quote — model replies and member text are quoted in messages such
    as "reply is not a JSON object: '…'", and the log keeps no text."""
    text = str(exc).replace("\n", " ")
    for quote in ("'", '"', "“", "«"):
        text = text.split(quote, 1)[0]
    text = text.rstrip(" :,-([{")
    name = type(exc).__name__
    return f"{name}: {text}"[:DETAIL_MAX] if text else name


@dataclass
class SearchCall:
    """What a search found, filled in by the caller of ``searching``."""

    hits: int = 0


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


@dataclass
class RecorderStats:
    flushes: int = 0
    requests_written: int = 0
    folded: int = 0
    errors: int = 0
    dropped: int = 0  # request rows dropped while the database could not take them


class UsageRecorder:
    def __init__(self, db: Database, cfg: UsageConfig, clock: Clock) -> None:
        self._db = db
        self._cfg = cfg
        self._clock = clock
        self._deltas: dict[tuple[str, str, str], float] = {}
        self._requests: list[RequestLogEntry] = []
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # one flush at a time
        self.stats = RecorderStats()
        self._waiting = False  # a flush failed for the disk or database: said once

    # -- counting (synchronous, cheap) -------------------------------------------------
    def add(self, guild_id: str | None, metric: str, n: float = 1.0) -> None:
        """Count ``n`` of ``metric`` for the guild, today (UTC)."""
        if n:
            key = (guild_id or "", iso(self._clock())[:10], metric)
            self._deltas[key] = self._deltas.get(key, 0.0) + float(n)

    def request(
        self,
        guild_id: str | None,
        kind: RequestKind,
        outcome: Outcome,
        latency_ms: float,
        *,
        model: str | None = None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        detail: str | None = None,
    ) -> None:
        """One reply, search or extraction call: a request-log row, and the
        series it feeds (its count, its time, its error, its tokens)."""
        if kind not in REQUEST_KINDS or outcome not in REQUEST_OUTCOMES:
            raise ValueError(f"unknown request kind or outcome: {kind!r}, {outcome!r}")
        gid = guild_id or ""
        latency = max(0.0, float(latency_ms))
        self._requests.append(
            RequestLogEntry(
                id=0,
                at=iso(self._clock()),
                guild_id=gid,
                kind=kind,
                outcome=outcome,
                latency_ms=round(latency, 1),
                model=model[:120] if model else None,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                detail=detail[:DETAIL_MAX] if detail else None,
            )
        )
        overflow = len(self._requests) - self._cfg.buffer_max_rows
        if overflow > 0:
            del self._requests[:overflow]
            self.stats.dropped += overflow
        calls, ms, errors = REQUEST_SERIES[kind]
        self.add(gid, calls)
        self.add(gid, ms, latency)
        if outcome == "error":
            self.add(gid, errors)
        self.add(gid, "tokens_prompt", prompt_tokens or 0)
        self.add(gid, "tokens_completion", completion_tokens or 0)

    @contextlib.contextmanager
    def searching(
        self, guild_id: str, consumer: str | Sequence[str] | None, model: str | None
    ) -> Iterator[SearchCall]:
        """Time the search inside the block and record its request-log row:
        who asked (the consumer), how many hits, how long, how it ended —
        never the query's words. The caller sets ``hits``; an exception
        raised inside is recorded as an error and goes on."""
        via = consumer if isinstance(consumer, str) else "+".join(consumer or ()) or "engine"
        call = SearchCall()
        started = time.perf_counter()
        try:
            yield call
        except Exception as exc:
            self.request(
                guild_id, "search", "error", _ms_since(started), model=model,
                detail=safe_reason(exc),
            )  # fmt: skip
            raise
        self.request(
            guild_id,
            "search",
            "ok" if call.hits else "empty",
            _ms_since(started),
            model=model,
            detail=f"via {via}, {call.hits} hits",
        )

    @contextlib.asynccontextmanager
    async def settled(self) -> AsyncIterator[None]:
        """No flush runs inside: what the database holds and what ``buffered``
        returns add up to every count of this process, none twice or lost
        (a flush in flight holds its rows in neither)."""
        async with self._lock:
            yield

    def buffered(
        self, guild_id: str | None, first_day: str, last_day: str
    ) -> dict[str, dict[str, float]]:
        """series → day → what this process counted and has not written yet
        (of one guild, or of all), so its own pages are up to date at once."""
        out: dict[str, dict[str, float]] = {}
        for (g, d, m), v in self._deltas.items():
            if (guild_id is None or g == guild_id) and first_day <= d <= last_day:
                per = out.setdefault(m, {})
                per[d] = per.get(d, 0.0) + v
        return out

    @property
    def pending(self) -> int:
        """Buffered increments and rows not written yet."""
        return len(self._deltas) + len(self._requests)

    # -- writing -----------------------------------------------------------------------------
    async def flush(self) -> int:
        """Write what is buffered and fold every pending increment; returns the
        request rows written. A failure keeps the buffer for the next round."""
        async with self._lock:
            deltas, self._deltas = self._deltas, {}
            rows, self._requests = self._requests, []

            def work(con: Connection) -> int:
                store.add(con, [(g, d, m, v) for (g, d, m), v in sorted(deltas.items())])
                store.insert_requests(con, rows)
                return store.fold(con)

            try:
                folded = await self._db.write(work)
            except Exception as exc:
                self.stats.errors += 1
                if disk_problem(exc) is not None or isinstance(exc, DatabaseUnavailable):
                    # The disk or the database: said in one line where the work
                    # itself fails; the counts wait in the buffer, said here once.
                    if not self._waiting:
                        log.info("usage: the series and request log wait: %s", exc)
                    self._waiting = True
                else:
                    log.warning("usage: could not write the series and request log: %s", exc)
                for key, v in deltas.items():
                    self._deltas[key] = self._deltas.get(key, 0.0) + v
                self._requests[:0] = rows
                overflow = len(self._requests) - self._cfg.buffer_max_rows
                if overflow > 0:
                    del self._requests[:overflow]
                    self.stats.dropped += overflow
                return 0
            self._waiting = False
            self.stats.flushes += 1
            self.stats.requests_written += len(rows)
            self.stats.folded += folded
            return len(rows)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="usage-recorder")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._cfg.flush_s)
            try:
                await self.flush()
            except Exception:  # a meter must never stop; flush logs and keeps its rows
                log.exception("usage: flush failed")

    async def close(self) -> None:
        """Stop the loop and write what is left (only if there is something:
        a read-only command leaves the database as it found it)."""
        if self._task is not None:
            # Not in the middle of a flush: a write cancelled half way would
            # lose the rows it had taken from the buffer.
            async with self._lock:
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.pending:
            await self.flush()
