"""``Memory.usage``: the operator's view over time — the daily series of a
guild (or of all of them) over a window of days, their all-time totals for
``/metrics``, the request log with its filters and its prune, and the
record of a reply (the bot's replies cog reports each one here).

The series and the log live in the database (``memory.store.usage``), so a
restart resets nothing, and every process sharing a PostgreSQL database sees
the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from memory.clock import Clock, iso
from memory.config import UsageConfig
from memory.db.core import Database
from memory.models import RequestLogEntry
from memory.store import usage as store
from memory.usage.recorder import UsageRecorder, safe_reason
from memory.usage.series import USAGE_SERIES

WINDOW_DAYS = (30, 90)
MAX_WINDOW_DAYS = 366
REQUESTS_LIMIT_MAX = 500


@dataclass(frozen=True)
class UsageWindow:
    """Daily series over ``days`` (oldest first, every day present, 0 where
    nothing was counted). ``message_days``: the first and the last day that
    has messages at all (an imported history may lie outside the window)."""

    days: tuple[str, ...]
    series: dict[str, tuple[float, ...]]
    message_days: tuple[str, str] | None

    def total(self, name: str) -> float:
        return sum(self.series.get(name, ()))


class UsageOps:
    def __init__(
        self, db: Database, recorder: UsageRecorder, cfg: UsageConfig, clock: Clock
    ) -> None:
        self._db = db
        self._recorder = recorder
        self._cfg = cfg
        self._clock = clock

    # -- the daily series ---------------------------------------------------------------
    async def window(
        self, guild_id: str | None, days: int = 30, end: date | None = None
    ) -> UsageWindow:
        """The series of one guild (None: all guilds) over the ``days`` days
        ending on ``end`` (None: today, UTC)."""
        days = max(1, min(MAX_WINDOW_DAYS, days))
        last = end or self._clock().date()
        async with self._recorder.settled():
            found = await self._read(guild_id, days, last)
        first = last - timedelta(days=days - 1)
        labels = tuple(str(first + timedelta(days=i)) for i in range(days))
        return UsageWindow(
            days=labels,
            series={
                s.name: tuple(found.get(s.name, {}).get(d, 0.0) for d in labels)
                for s in USAGE_SERIES
            },
            message_days=await self._db.read(store.day_range, guild_id, "messages"),
        )

    async def _read(
        self, guild_id: str | None, days: int, end: date
    ) -> dict[str, dict[str, float]]:
        first, last = str(end - timedelta(days=days - 1)), str(end)
        found = dict(await self._db.read(store.series, guild_id, first, last))
        for name, per_day in self._recorder.buffered(guild_id, first, last).items():
            mine = found.setdefault(name, {})
            for day, v in per_day.items():
                mine[day] = mine.get(day, 0.0) + v
        return found

    async def totals(self) -> list[tuple[str, str, float]]:
        """(guild id, series, total over every day) — counters that survive restarts."""
        return list(await self._db.read(store.totals))

    async def today(self) -> list[tuple[str, str, float]]:
        """(guild id, series, total of today, UTC)."""
        return list(await self._db.read(store.totals, iso(self._clock())[:10]))

    async def flush(self) -> int:
        """Write what the recorder holds now (tests, commands that end)."""
        return await self._recorder.flush()

    # -- the request log -------------------------------------------------------------------
    async def requests(
        self,
        *,
        guild_id: str | None = None,
        kind: str | None = None,
        outcome: str | None = None,
        since: str | None = None,
        until: str | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[RequestLogEntry]:
        """Newest first (see ``memory.store.usage.requests``); ``before_id`` pages."""
        return list(
            await self._db.read(
                lambda con: store.requests(
                    con,
                    guild_id=guild_id,
                    kind=kind,
                    outcome=outcome,
                    since=since,
                    until=until,
                    before_id=before_id,
                    limit=max(1, min(REQUESTS_LIMIT_MAX, limit)),
                )
            )
        )

    async def prune_requests(self) -> int:
        """Apply the request log's retention (``UsageConfig``); returns rows
        deleted, in chunks so a backlog never holds the writer for long."""
        cfg = self._cfg
        older_than = (
            iso(self._clock() - timedelta(days=cfg.request_log_keep_days))
            if cfg.request_log_keep_days > 0
            else None
        )
        if older_than is None and cfg.request_log_max_rows <= 0:
            return 0
        deleted = 0
        while True:
            n = await self._db.write(
                lambda con: store.prune_requests(
                    con,
                    older_than=older_than,
                    keep_rows=cfg.request_log_max_rows,
                    limit=cfg.prune_chunk,
                )
            )
            deleted += n
            if n < cfg.prune_chunk:
                return deleted

    # -- what the adapters report ------------------------------------------------------------
    def record_reply(
        self,
        guild_id: str,
        latency_ms: float,
        *,
        model: str | None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        error: BaseException | None = None,
        detail: str | None = None,
    ) -> None:
        """One reply the bot composed (or failed to): a request-log row and
        its series. ``detail`` must hold no message text or member id."""
        self._recorder.request(
            guild_id,
            "reply",
            "ok" if error is None else "error",
            latency_ms,
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            detail=safe_reason(error) if error is not None else detail,
        )
