"""``Memory.upkeep``: what keeps memory bounded over time besides budgets —
memory pins, expiry by type, the purge of archived facts, an admin purge of
a guild's or a member's facts, and the usage the dashboard shows.

- Pins: an operator pins any fact, a member their own. A pinned fact is
  exempt from budgets, expiry and the purge (and counts in no budget).
- Expiry: a fact of a type with a TTL (``ttl_days_<type>``; 0: never) not
  observed again for that many days is archived with history ``expire``.
  Lore, canon, profile, preference and relationship facts never expire.
- Purge: an archived fact stays restorable for ``purge_after_days`` (0:
  never purged), then the daily job deletes it for good, leaving a history
  row without its text, and the file is rewritten so no byte of it remains.
- Admin purge: every fact of a guild or of one member (their messages
  stay), deleted for good at once, same history and rewrite.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from memory.clock import Clock, iso
from memory.db.core import Connection, Database
from memory.guild_settings import resolve
from memory.ingest.budgets import BudgetKeeper, CompactionStats, budget_of
from memory.ingest.pipeline import BatchProcessor
from memory.models import Fact
from memory.snapshot import SnapshotRefresher
from memory.store import budgets as store_budgets
from memory.store import ops as store_ops
from memory.store.erase import ErasureCompactor
from memory.store.facts import get_fact

log = logging.getLogger(__name__)

# Fact types that expire, and the setting holding their days.
TTL_KEYS = {"project": "ttl_days_project", "episode": "ttl_days_episode", "other": "ttl_days_other"}
# Rows one transaction expires or purges; the job loops until none are left.
BATCH = 500


@dataclass(frozen=True)
class ScopeBudget:
    kind: str
    key: str | None
    used: int
    budget: int


@dataclass(frozen=True)
class GuildUsage:
    scopes: list[ScopeBudget]  # the guild, lore, then members and channels by use
    pinned: int
    archived: int
    expired: int  # history rows: facts expired so far
    purged: int  # history rows: facts purged (daily job and admin purges)
    purge_after_days: int
    ttl_days: dict[str, int]
    compaction: CompactionStats


@dataclass(frozen=True)
class UpkeepRun:
    expired: int
    purged: int


class MemoryUpkeep:
    def __init__(
        self,
        db: Database,
        pipeline: BatchProcessor,
        snapshot: SnapshotRefresher,
        compactor: ErasureCompactor,
        clock: Clock,
    ) -> None:
        self._db = db
        self.budgets: BudgetKeeper = pipeline.budgets
        self._cfg = pipeline.cfg
        self._snapshot = snapshot
        self._compactor = compactor
        self._clock = clock

    # -- pins -------------------------------------------------------------------------

    async def pin(self, guild_id: str, fact_id: int, *, actor: str = "operator") -> Fact | None:
        """Pin a fact of the guild; None when there is no such fact."""
        now = iso(self._clock())
        fact: Fact | None = await self._db.write(store_budgets.pin, guild_id, fact_id, actor, now)
        return fact

    async def unpin(self, guild_id: str, fact_id: int, *, actor: str = "operator") -> bool:
        now = iso(self._clock())
        done: bool = await self._db.write(store_budgets.unpin, guild_id, fact_id, actor, now)
        return done

    async def member_pin(self, guild_id: str, user_id: str, fact_id: int, pinned: bool) -> bool:
        """A member pins (or unpins) one of their own facts; False when the
        fact is not theirs, or already so."""
        now = iso(self._clock())
        actor = f"user:{user_id}"

        def work(con: Connection) -> bool:
            fact = get_fact(con, guild_id, fact_id)
            if fact is None or fact.subject != user_id:
                return False
            if not pinned:
                return store_budgets.unpin(con, guild_id, fact_id, actor, now)
            if fact_id in store_budgets.pinned_ids(con, guild_id, [fact_id]):
                return False
            return store_budgets.pin(con, guild_id, fact_id, actor, now) is not None

        done: bool = await self._db.write(work)
        return done

    async def pinned(self, guild_id: str, limit: int = 200) -> list[Fact]:
        found: list[Fact] = await self._db.read(store_budgets.pinned_facts, guild_id, limit)
        return found

    async def pinned_ids(self, guild_id: str, fact_ids: list[int] | None = None) -> set[int]:
        found: set[int] = await self._db.read(store_budgets.pinned_ids, guild_id, fact_ids)
        return found

    # -- expiry and purge -------------------------------------------------------------

    async def run_daily(self, owned: Callable[[str], bool] | None = None) -> UpkeepRun:
        """The daily job: expire, then purge, in every guild (``owned``: every
        guild this process owns)."""
        guilds: list[str] = await self._db.read(store_budgets.guild_ids)
        if owned is not None:
            guilds = [g for g in guilds if owned(g)]
        expired = purged = 0
        for guild_id in guilds:
            expired += await self.expire(guild_id)
            purged += await self.purge_archived(guild_id)
        if expired or purged:
            log.info("upkeep: %d facts expired, %d purged", expired, purged)
        return UpkeepRun(expired, purged)

    async def expire(self, guild_id: str) -> int:
        """Archive the guild's facts past their type's TTL (history ``expire``)."""
        now_dt = self._clock()
        now = iso(now_dt)

        def work(con: Connection) -> int:
            settings = resolve(store_ops.get_guild_settings(con, guild_id))
            n = 0
            for fact_type, key in TTL_KEYS.items():
                days = settings.number(key)
                if days <= 0:
                    continue
                before = iso(now_dt - timedelta(days=days))
                for f in store_budgets.expired(con, guild_id, fact_type, before, BATCH):
                    store_budgets.archive(
                        con,
                        f,
                        now=now,
                        actor="system:expire",
                        reason=f"not observed for {days} days ({fact_type} TTL)",
                        event="expire",
                    )
                    n += 1
            if n:
                store_ops.log_action(
                    con, "memory_expire", f"{n} facts expired", now, guild_id=guild_id
                )
            return n

        total = 0
        while (n := await self._db.write(work)) > 0:
            total += n
        if total:
            self._snapshot.request()
        return total

    async def purge_archived(self, guild_id: str) -> int:
        """Delete for good the guild's facts archived more than
        ``purge_after_days`` ago, then rewrite the file."""
        now_dt = self._clock()
        now = iso(now_dt)

        def work(con: Connection) -> int:
            days = resolve(store_ops.get_guild_settings(con, guild_id)).number("purge_after_days")
            if days <= 0:
                return 0
            ids = store_budgets.purgeable(con, guild_id, iso(now_dt - timedelta(days=days)), BATCH)
            n = store_budgets.hard_delete(
                con, guild_id, ids, "system:purge", now, f"archived for over {days} days"
            )
            if n:
                store_ops.log_action(
                    con,
                    "memory_purge",
                    f"{n} archived facts purged",
                    now,
                    guild_id=guild_id,
                    detail={"deleted": n, "after_days": days},
                )
            return n

        total = 0
        while (n := await self._db.write(work)) > 0:
            total += n
        if total:
            await self._compactor.run_now()
        return total

    async def purge_facts(
        self, guild_id: str, user_id: str | None = None, *, actor: str = "operator"
    ) -> int:
        """Admin purge: delete every fact of the guild (or of one member; their
        messages stay) for good, then rewrite the file. Returns the count."""
        now = iso(self._clock())

        def work(con: Connection) -> int:
            ids = store_budgets.fact_ids_of(con, guild_id, user_id)
            who = "the guild" if user_id is None else f"member {user_id}"
            n = store_budgets.hard_delete(con, guild_id, ids, actor, now, f"admin purge of {who}")
            store_ops.log_action(
                con,
                "memory_purge",
                f"admin purge of {who}: {n} facts",
                now,
                guild_id=guild_id,
                subject=user_id,
                detail={"deleted": n, "admin": True, "actor": actor},
            )
            return n

        # Compaction under way must not merge into a fact being purged.
        await self.budgets.settle()
        n: int = await self._db.write(work)
        self._snapshot.request()
        await self._compactor.run_now()
        return n

    # -- usage ------------------------------------------------------------------------

    async def usage(self, guild_id: str) -> GuildUsage:
        def work(con: Connection) -> GuildUsage:
            settings = resolve(store_ops.get_guild_settings(con, guild_id))
            scopes = [
                ScopeBudget(u.kind, u.key, u.used, budget_of(settings, u.kind, self._cfg))
                for u in store_budgets.usage(con, guild_id)
            ]
            if not any(s.kind == "lore" for s in scopes):
                scopes.insert(
                    1, ScopeBudget("lore", None, 0, budget_of(settings, "lore", self._cfg))
                )
            return GuildUsage(
                scopes=scopes,
                pinned=len(store_budgets.pinned_ids(con, guild_id)),
                archived=store_budgets.archived_count(con, guild_id),
                expired=store_budgets.history_count(con, guild_id, "expire"),
                purged=store_budgets.history_count(con, guild_id, "purge"),
                purge_after_days=settings.number("purge_after_days"),
                ttl_days={t: settings.number(k) for t, k in TTL_KEYS.items()},
                compaction=self.budgets.stats,
            )

        found: GuildUsage = await self._db.read(work)
        return found

    # -- lifecycle --------------------------------------------------------------------

    async def settle(self, timeout: float = 30.0) -> None:
        """Compactions under way, then a pending rewrite after an erase."""
        await self.budgets.settle(timeout)
        await self._compactor.flush()

    async def close(self) -> None:
        await self.budgets.close()
