"""APScheduler wiring for the periodic jobs; the work itself lives in memory/.

* snapshot refresh every ``snapshot.interval_s`` (default 5 min);
* embedding re-index every ``jobs.reindex_interval_min`` (vectors missing
  after a crash or a model change);
* action log and request log pruning every hour (first a minute after
  start), by the retention in ``memory.config.action_log`` and ``usage``;
* retention every ``retention_interval_min`` (default 10 min, first a
  minute after start): the forget of members and the purge of guilds whose
  leave timers are due (``memory.retention``; the timers live in the
  database, so a restart loses none);
* channel episodes every minute (first a minute after start): channels
  quiet for their guild's ``episode_idle_minutes`` after enough new
  messages are summarised (``Memory.episodes``); the idle time is read from
  the messages' own times, so a restart loses none;
* consent expiry every 15 minutes: sensitive facts a member left unanswered
  for 7 days are dropped (``Memory.consent.expire``);
* review expiry every 15 minutes: memories no moderator decided within
  their guild's ``review_expire_days`` are rejected (``Memory.review.expire``);
* memory upkeep daily at 03:30 in the configured time zone: facts past
  their type's TTL are archived, archived facts past ``purge_after_days``
  are deleted for good and the file rewritten (``Memory.upkeep``);
* consolidation once a day (04:00 in the configured time zone): one
  bounded run per guild (``Memory.consolidation``);
* with the journal rendered from the database (several processes sharing
  PostgreSQL, ``Memory.journals``), the journal files every
  ``JOURNAL_FILES_S``: the days whose messages changed
  since the last round, plus today, are rendered into the journal folder of
  the process holding the lease;
* with the journal appended (SQLite), the journal lines a full or read-only
  disk refused (``Memory.journal_owed``) every ``JOURNAL_FILES_S``, so they
  are written soon after there is room again, not only at the next start;
* the daily journal roll-over check, just after midnight in the configured
  time zone: the journal folder must still be writable, and MEMORY.md is
  regenerated so its highlights and source list move to the new day.

Several processes may share one database, each holding some of Discord's
shards (``memory.config.ownership``). The per-guild jobs (retention,
episodes, consent and review expiry, upkeep, consolidation) then run only for the
guilds this process owns. The others must run once across processes
(MEMORY.md refresh, the journal files and roll-over, action-log pruning,
re-index): each
round first takes the job's lease in the database (``Memory.leases``),
for a little longer than the job's interval, so the process that has it
keeps it while it lives and another takes it over once it expires (or at
once after a clean stop, which gives the leases back); a process without
the lease skips the round.

The scheduler must be started inside the running loop; all jobs are
coroutines (they run on the loop thread, next to discord.py; their database
and embedding work goes to the engine's threads),
with one instance at a time and missed runs coalesced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from memory import Memory, PairChecker, RetentionTimer

log = logging.getLogger(__name__)

# A run-once job's lease lasts this many of its intervals: its holder's next
# round renews it before it expires, another process's round skips.
LEASE_SLACK = 1.5
DAILY_LEASE_S = 3600.0  # the daily jobs: long enough to cover one run everywhere
# How often the lease holder renders changed journal days into its files: an
# erased message leaves them within this.
JOURNAL_FILES_S = 60.0


class Jobs:
    def __init__(
        self,
        memory: Memory,
        *,
        timezone: str = "UTC",
        snapshot_interval_s: float = 300.0,
        reindex_interval_min: float = 60.0,
        retention_interval_min: float = 10.0,
    ) -> None:
        self.memory = memory
        self.timezone = timezone
        self.snapshot_interval_s = snapshot_interval_s
        self.reindex_interval_min = reindex_interval_min
        self.retention_interval_min = retention_interval_min
        # Set by the runtime once the bot exists: is a timer's member (or the
        # bot) still away from the guild? None: no one to ask.
        self.still_away: Callable[[RetentionTimer], Awaitable[bool]] | None = None
        # Set by the runtime when an LLM is configured: consolidation asks it
        # about the pairs offline rules cannot judge.
        self.pair_checker: PairChecker | None = None
        self.scheduler: AsyncIOScheduler | None = None
        self._running: set[asyncio.Task[Any]] = set()
        self._leased: set[str] = set()  # the jobs that run under a lease
        self.runs: dict[str, int] = {}
        self.owned = memory.config.ownership.owns

    def start(self) -> None:
        """Schedule the jobs; call from inside the running event loop."""
        sched = AsyncIOScheduler(timezone=self.timezone)
        common: dict[str, Any] = {"max_instances": 1, "coalesce": True, "misfire_grace_time": 60}
        # Not at start: the engine already renders the snapshot when it opens.
        first = datetime.now(UTC) + timedelta(seconds=self.snapshot_interval_s)
        sched.add_job(
            self._wrap("snapshot", self.refresh_snapshot, self.snapshot_interval_s * LEASE_SLACK),
            IntervalTrigger(seconds=self.snapshot_interval_s, start_date=first),
            id="snapshot",
            name="MEMORY.md refresh",
            **common,
        )
        if self.memory.journals.from_database:
            sched.add_job(
                self._wrap("journal_files", self.journal_files, JOURNAL_FILES_S * LEASE_SLACK),
                IntervalTrigger(
                    seconds=JOURNAL_FILES_S,
                    start_date=datetime.now(UTC) + timedelta(seconds=JOURNAL_FILES_S),
                ),
                id="journal_files",
                name="journal files rendered from the database",
                **common,
            )
        else:
            sched.add_job(
                self._wrap("journal_owed", self.journal_owed, JOURNAL_FILES_S * LEASE_SLACK),
                IntervalTrigger(
                    seconds=JOURNAL_FILES_S,
                    start_date=datetime.now(UTC) + timedelta(seconds=JOURNAL_FILES_S),
                ),
                id="journal_owed",
                name="journal lines a full disk refused, written once there is room",
                **common,
            )
        if self.reindex_interval_min > 0:
            sched.add_job(
                self._wrap("reindex", self.reindex, self.reindex_interval_min * 60 * LEASE_SLACK),
                IntervalTrigger(minutes=self.reindex_interval_min),
                id="reindex",
                name="embedding re-index",
                **common,
            )
        sched.add_job(
            self._wrap("action_log_prune", self.prune_action_log, 3600 * LEASE_SLACK),
            IntervalTrigger(hours=1, start_date=datetime.now(UTC) + timedelta(minutes=1)),
            id="action_log_prune",
            name="action log and request log pruning",
            **common,
        )
        sched.add_job(
            self._wrap("retention", self.retention),
            IntervalTrigger(
                minutes=self.retention_interval_min,
                start_date=datetime.now(UTC) + timedelta(minutes=1),
            ),
            id="retention",
            name="leave policies (timed forget and purge)",
            **common,
        )
        sched.add_job(
            self._wrap("episodes", self.episodes),
            IntervalTrigger(minutes=1, start_date=datetime.now(UTC) + timedelta(minutes=1)),
            id="episodes",
            name="channel episodes",
            **common,
        )
        sched.add_job(
            self._wrap("consent_expiry", self.expire_consent),
            IntervalTrigger(minutes=15, start_date=datetime.now(UTC) + timedelta(seconds=30)),
            id="consent_expiry",
            name="consent queue expiry",
            **common,
        )
        sched.add_job(
            self._wrap("review_expiry", self.expire_reviews),
            IntervalTrigger(minutes=15, start_date=datetime.now(UTC) + timedelta(seconds=30)),
            id="review_expiry",
            name="review queue expiry",
            **common,
        )
        sched.add_job(
            self._wrap("consolidation", self.consolidate),
            CronTrigger(hour=4, minute=0, timezone=self.timezone),
            id="consolidation",
            name="daily consolidation",
            **common,
        )
        sched.add_job(
            self._wrap("journal_rollover", self.journal_rollover, DAILY_LEASE_S),
            CronTrigger(hour=0, minute=0, second=30, timezone=self.timezone),
            id="journal_rollover",
            name="daily journal roll-over check",
            **common,
        )
        sched.add_job(
            self._wrap("memory_upkeep", self.memory_upkeep),
            CronTrigger(hour=3, minute=30, timezone=self.timezone),
            id="memory_upkeep",
            name="expiry and purge of archived memory",
            **common,
        )
        sched.start()
        self.scheduler = sched
        log.info("scheduled jobs: %s", ", ".join(j.id for j in sched.get_jobs()))

    async def stop(self, timeout: float = 10.0) -> None:
        """No new runs; wait for running ones (a cut-off job would log a
        traceback), then give back the leases held, so another process's
        next round runs the job instead of waiting for them to expire."""
        sched = self.scheduler
        if sched is None:
            return
        self.scheduler = None
        sched.pause()
        running = [t for t in self._running if not t.done()]
        if running:
            _, pending = await asyncio.wait(running, timeout=timeout)
            for t in pending:
                t.cancel()
            if pending:  # a cancelled job ends at its next await: before its lease goes
                await asyncio.wait(pending, timeout=1.0)
        sched.shutdown(wait=False)
        for name in sorted(self._leased):
            try:
                await self.memory.leases.release(name)
            except Exception:  # it expires on its own: a pause, not a loss
                log.warning("could not give back the lease of job %s", name, exc_info=True)

    def _wrap(
        self, name: str, job: Callable[[], Awaitable[None]], lease_s: float | None = None
    ) -> Callable[[], Awaitable[None]]:
        """The scheduled form of a job body: errors logged, runs counted; with
        ``lease_s``, a round runs only in the process holding the job's lease."""
        if lease_s is not None:
            self._leased.add(name)

        async def run() -> None:
            task = asyncio.current_task()
            if task is not None:
                self._running.add(task)
            try:
                if lease_s is not None and not await self.memory.leases.try_round(name, lease_s):
                    return
                await job()
                self.runs[name] = self.runs.get(name, 0) + 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("job %s failed", name)
                with contextlib.suppress(Exception):
                    await self.memory.admin.log_action(
                        "bot_error",
                        f"job_error: {name}: {str(exc)[:200]}",
                        detail={"job": name, "error": type(exc).__name__},
                    )
            finally:
                if task is not None:
                    self._running.discard(task)

        run.__name__ = f"job_{name}"
        return run

    # -- job bodies (thin: the engine does the work) -------------------------------------------
    async def refresh_snapshot(self) -> None:
        await self.memory.write_snapshot()

    async def reindex(self) -> None:
        report = await self.memory.admin.reindex()
        if report.facts or report.messages:
            log.info("re-index embedded %d facts, %d messages", report.facts, report.messages)

    async def prune_action_log(self) -> None:
        deleted = await self.memory.admin.prune_action_log()
        if deleted:
            log.info("pruned %d action log rows", deleted)
        requests = await self.memory.usage.prune_requests()
        if requests:
            log.info("pruned %d request log rows", requests)

    async def retention(self) -> None:
        done = await self.memory.retention.run_due(self.still_away, self.owned)
        if done.forgotten or done.purged or done.cancelled:
            log.info(
                "retention: forgot %d members, purged %d guilds, %d timers cancelled",
                len(done.forgotten),
                len(done.purged),
                done.cancelled,
            )

    async def episodes(self) -> None:
        done = await self.memory.episodes.run(owned=self.owned)
        if done.created or done.rebuilt:
            log.info("episodes: %d written, %d rebuilt", len(done.created), done.rebuilt)

    async def consolidate(self) -> None:
        for done in await self.memory.consolidation.run_all(
            checker=self.pair_checker, owned=self.owned
        ):
            applied = done.report.get("applied", [])
            if applied:
                log.info(
                    "consolidation of guild %s (run %d): %d changes",
                    done.guild_id,
                    done.run_id,
                    len(applied),
                )

    async def expire_consent(self) -> None:
        await self.memory.consent.expire(self.owned)

    async def expire_reviews(self) -> None:
        await self.memory.review.expire(self.owned)

    async def memory_upkeep(self) -> None:
        await self.memory.upkeep.run_daily(self.owned)

    async def journal_files(self) -> None:
        await self.memory.journals.publish()

    async def journal_owed(self) -> None:
        await self.memory.journal_owed.write()

    async def journal_rollover(self) -> None:
        folder = self.memory.config.journal_dir
        problem = await asyncio.to_thread(_writable_problem, folder)
        if problem is not None:
            log.error("journal folder %s is not writable: %s", folder, problem)
            await self.memory.admin.log_action(
                "bot_error",
                f"memory_daily_log_write: journal folder not writable: {problem}",
                detail={"error": "memory_daily_log_write", "path": str(folder)},
            )
        await self.memory.write_snapshot()


def _writable_problem(folder: Any) -> str | None:
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".rollover-", delete=True):
            pass
    except OSError as exc:
        return str(exc)
    return None
