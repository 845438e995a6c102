"""``Memory.retention``: what happens to memory when a member leaves a guild or
the bot is removed from one.

Per guild, ``member_leave_policy`` and ``guild_leave_policy`` say ``keep``
(the default) or ``forget:Nd`` / ``purge:Nd``. A leave under a timed policy
writes a timer row (``retention_timers``, so a restart keeps it) due N days
later by the engine's clock; a re-join deletes it; ``run_due`` (a scheduled
job) runs the timers that are due: a member's timer is the ordinary
``forget``, a guild's is ``purge_guild``. The policy in force when the
member or the bot left decides; changing it later does not move a timer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from memory.clock import Clock, iso
from memory.db.core import Connection, Database
from memory.embed.service import EmbeddingService
from memory.guild_settings import GuildSettingsCache, retention_days
from memory.ingest.queue import IngestQueue
from memory.journal import Journal
from memory.models import ForgetReport
from memory.snapshot import SnapshotRefresher
from memory.store import lifecycle_events as store_events
from memory.store import ops as store_ops
from memory.store import retention as store_retention
from memory.store.erase import ErasureCompactor
from memory.store.retention import RetentionTimer

log = logging.getLogger(__name__)

Forget = Callable[..., Awaitable[ForgetReport]]
# Asked before a due timer runs: is the member (or the bot) still away? A
# re-join the bot did not see (it was offline) cancels the timer then.
StillAway = Callable[[RetentionTimer], Awaitable[bool]]


@dataclass(frozen=True)
class PurgeReport:
    guild_id: str
    rows: dict[str, int]  # rows deleted per table
    journal_lines: int
    compaction_s: float

    @property
    def messages(self) -> int:
        return self.rows.get("messages", 0)

    @property
    def facts(self) -> int:
        return self.rows.get("memory_facts", 0)


@dataclass(frozen=True)
class RetentionRun:
    forgotten: list[tuple[str, str]]  # (guild, member) forgotten
    purged: list[str]  # guilds purged
    cancelled: int  # timers dropped because the member or the bot was back


class Retention:
    def __init__(
        self,
        *,
        db: Database,
        journal: Journal,
        queue: IngestQueue,
        snapshot: SnapshotRefresher,
        compactor: ErasureCompactor,
        embeddings: EmbeddingService,
        settings: GuildSettingsCache,
        clock: Clock,
        forget: Forget,
        drain_timeout_s: float,
    ) -> None:
        self._db = db
        self._journal = journal
        self._queue = queue
        self._snapshot = snapshot
        self._compactor = compactor
        self._embeddings = embeddings
        self._settings = settings
        self._clock = clock
        self._forget = forget
        self._drain_timeout_s = drain_timeout_s
        self._running = asyncio.Lock()

    # -- events ------------------------------------------------------------------------
    async def member_left(self, guild_id: str, user_id: str) -> RetentionTimer | None:
        """A member left (or was kicked or banned): start their timer if the
        guild's policy says so; the timer, or None (``keep``)."""
        policy = (await self._settings.get(guild_id)).member_leave_policy
        return await self._start(guild_id, user_id, policy, "forget")

    async def member_joined(self, guild_id: str, user_id: str) -> bool:
        """A member (re)joined: cancel their timer; whether there was one."""
        return await self._cancel(guild_id, user_id)

    async def guild_left(self, guild_id: str) -> RetentionTimer | None:
        """The bot was removed from the guild: start the guild's timer if its
        policy says so."""
        policy = (await self._settings.get(guild_id)).guild_leave_policy
        return await self._start(guild_id, store_retention.GUILD, policy, "purge")

    async def guild_joined(self, guild_id: str) -> bool:
        """The bot is in the guild (again): cancel the guild's timer."""
        return await self._cancel(guild_id, store_retention.GUILD)

    async def timers(self, guild_id: str | None = None) -> list[RetentionTimer]:
        """Timers waiting to run (of one guild), soonest first."""
        return list(await self._db.read(store_retention.timers, guild_id))

    async def _start(
        self, guild_id: str, user_id: str, policy: str, action: str
    ) -> RetentionTimer | None:
        parsed = retention_days(policy)
        if parsed is None or parsed[0] != action:
            return None
        now = self._clock()
        timer = RetentionTimer(guild_id, user_id, action, iso(now + timedelta(days=parsed[1])))
        stamp = iso(now)
        who = f"member {user_id}" if user_id else "the guild"

        def work(con: Connection) -> None:
            store_retention.set_timer(con, guild_id, user_id, action, timer.due_at, stamp)
            store_ops.log_action(
                con,
                "retention_scheduled",
                f"{action} of {who} scheduled for {timer.due_at} ({policy})",
                stamp,
                guild_id=guild_id,
                subject=user_id or None,
                detail={"action": action, "due_at": timer.due_at, "policy": policy},
            )

        await self._db.write(work)
        return timer

    async def _cancel(self, guild_id: str, user_id: str) -> bool:
        # Every guild reports in at each connect: a read, not a write, when
        # there is nothing to cancel (the common case).
        if not await self._db.read(store_retention.has_timer, guild_id, user_id):
            return False
        stamp = iso(self._clock())

        def work(con: Connection) -> bool:
            gone = store_retention.cancel_timer(con, guild_id, user_id)
            if gone is not None:
                who = f"member {user_id}" if user_id else "the guild"
                store_ops.log_action(
                    con,
                    "retention_cancelled",
                    f"{gone.action} of {who} cancelled: back before {gone.due_at}",
                    stamp,
                    guild_id=guild_id,
                    subject=user_id or None,
                    detail={"action": gone.action, "due_at": gone.due_at},
                )
            return gone is not None

        cancelled: bool = await self._db.write(work)
        return cancelled

    # -- running -----------------------------------------------------------------------
    async def run_due(
        self, still_away: StillAway | None = None, owned: Callable[[str], bool] | None = None
    ) -> RetentionRun:
        """Run every timer due by the engine's clock, soonest first (``owned``:
        only those of the guilds this process owns)."""
        forgotten: list[tuple[str, str]] = []
        purged: list[str] = []
        cancelled = 0
        async with self._running:
            due = await self._db.read(store_retention.timers, None, iso(self._clock()))
            if owned is not None:
                due = [t for t in due if owned(t.guild_id)]
            for timer in due:
                if not await self._db.read(store_retention.still_due, timer):
                    continue  # cancelled meanwhile
                if still_away is not None:
                    try:
                        away = await still_away(timer)
                    except Exception:
                        log.exception("could not tell whether %s is back; next run", timer)
                        continue
                    if not away:
                        cancelled += await self._cancel(timer.guild_id, timer.user_id)
                        continue
                try:
                    if timer.action == "forget":
                        await self._forget(timer.guild_id, timer.user_id, actor="retention")
                        forgotten.append((timer.guild_id, timer.user_id))
                    else:
                        await self.purge_guild(timer.guild_id, actor="retention")
                        purged.append(timer.guild_id)
                except Exception:
                    # The timer stays: the next run does it again (both erases
                    # can run twice), and the other timers still run now.
                    log.exception("retention %s failed; tried again on the next run", timer)
                    continue
                await self._db.write(store_retention.finish_timer, timer)
        return RetentionRun(forgotten, purged, cancelled)

    async def purge_guild(self, guild_id: str, *, actor: str = "operator") -> PurgeReport:
        """Erase everything memory holds for a guild: messages, facts, vectors,
        traces, history, journal lines, settings, timers; MEMORY.md is
        rewritten and so is the database file (no byte of it left). Members'
        voice opt-outs stay (consent, not memory). One ``guild_purged``
        action-log row, with counts only, records it."""
        # Anything of the guild still queued must not be processed after the erase.
        await self._queue.drain(self._drain_timeout_s)
        now = iso(self._clock())
        await self._db.write(store_events.owe_compaction, now)

        def work(con: Connection) -> dict[str, int]:
            rows = store_retention.purge_guild(con, guild_id)
            store_ops.log_action(
                con,
                "guild_purged",
                f"guild {guild_id} purged by {actor}: {rows.get('messages', 0)} messages, "
                f"{rows.get('memory_facts', 0)} facts",
                now,
                guild_id=guild_id,
                detail={"actor": actor, "rows": rows},
            )
            return rows

        rows: dict[str, int] = await self._db.write(work)
        self._settings.invalidate(guild_id)
        self._embeddings.set_guild_model(guild_id, None)
        self._embeddings.forget_queries()
        lines = await asyncio.to_thread(self._journal.remove_guild, guild_id)
        await self._snapshot.refresh_now()
        compaction = await self._compactor.run_now()
        log.info("purged guild %s: %s, %d journal lines", guild_id, rows, lines)
        return PurgeReport(guild_id, rows, lines, compaction.seconds)
