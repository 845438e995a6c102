"""``Memory.consent``: the member's side of the consent queue for sensitive
facts (``memory.ingest.consent_gate`` fills it).

A member sees and decides only their own pending facts. Accepting stores the
fact through the same write decision as an extracted one (history actor
``user:<id>``); rejecting and expiry store nothing and delete the pending
text. Operators see counts per guild and category, never the texts.

The message a pending fact came from is withheld meanwhile
(``memory.store.held_messages``): once none of its facts is pending, its text
comes back if every one was accepted (and is embedded), and is deleted for
good if one was rejected or expired.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from memory.clock import Clock, iso
from memory.config import IngestConfig
from memory.db.core import Connection, Database
from memory.decision import decide
from memory.embed.service import EmbeddingService
from memory.ingest.budgets import archive_over_budget
from memory.ingest.consent_gate import ConsentStats
from memory.models import Fact, PendingFact
from memory.snapshot import SnapshotRefresher
from memory.store import consent as store_consent
from memory.store import fact_decision
from memory.store import held_messages as store_held

log = logging.getLogger(__name__)


class ConsentOps:
    def __init__(
        self,
        db: Database,
        embeddings: EmbeddingService,
        snapshot: SnapshotRefresher,
        cfg: IngestConfig,
        clock: Clock,
        stats: ConsentStats,
    ) -> None:
        self._db = db
        self._embeddings = embeddings
        self._snapshot = snapshot
        self._cfg = cfg
        self._clock = clock
        self.stats = stats
        self.expired_total = 0

    async def pending(self, guild_id: str, user_id: str) -> list[PendingFact]:
        """The member's own pending facts that have not expired, oldest first."""
        now = iso(self._clock())
        return list(await self._db.read(store_consent.pending_for, guild_id, user_id, now))

    async def take_prompt(self, guild_id: str, user_id: str) -> list[PendingFact]:
        """The member's pending facts never shown to them, marked as shown: the
        one prompt at their next interaction (empty when there is nothing new)."""
        now = iso(self._clock())
        return list(await self._db.write(store_consent.take_unprompted, guild_id, user_id, now))

    async def accept(self, guild_id: str, user_id: str, item_id: int) -> Fact | None:
        """Store the member's pending fact; None if it is not theirs, decided or expired."""
        now = iso(self._clock())
        actor = f"user:{user_id}"

        released: list[str] = []

        def work(con: Connection) -> Fact | None:
            item = store_consent.get_pending(con, guild_id, user_id, item_id)
            if item is None or item.expires_at <= now:
                return None
            new = fact_decision.NewFact(
                guild_id=guild_id,
                channel_id=item.channel_id,
                subject=user_id,
                fact=item.fact,
                fact_type=item.fact_type,
                evidence=item.evidence_text,
                source_message_id=item.message_id,
                confidence=item.confidence,
                observed_at=item.observed_at,
            )
            current = fact_decision.current_facts(con, guild_id, user_id)
            seen = fact_decision.observed_time(con, new, now)
            decision = decide(
                item.fact, seen, current, store_consent.member_name(con, guild_id, user_id)
            )
            applied = fact_decision.apply_decision(con, new, decision, now=now, actor=actor)
            store_consent.record_decision(con, item, "accept", actor, now, applied.fact.id)
            back = store_held.settle(con, guild_id, item.message_id, refused=False)
            if back is not None:
                released.append(back)
            archive_over_budget(con, self._cfg, guild_id, user_id, now)
            return applied.fact

        fact: Fact | None = await self._db.write(work)
        if fact is not None:
            self._embeddings.schedule_facts([fact])
            if released:
                self._embeddings.schedule_messages([(m, guild_id) for m in released])
            self._snapshot.request()
        return fact

    async def reject(self, guild_id: str, user_id: str, item_id: int) -> bool:
        """Drop the member's pending fact (nothing stored, its text deleted)."""
        now = iso(self._clock())
        actor = f"user:{user_id}"

        def work(con: Connection) -> bool:
            item = store_consent.get_pending(con, guild_id, user_id, item_id)
            if item is None:
                return False
            store_consent.record_decision(con, item, "reject", actor, now)
            store_held.settle(con, guild_id, item.message_id, refused=True)
            return True

        return bool(await self._db.write(work))

    async def expire(self, owned: Callable[[str], bool] | None = None) -> int:
        """Delete every pending fact whose 7 days are over (``owned``: in the
        guilds this process owns); how many went."""
        now = iso(self._clock())
        guilds = await self._db.read(store_consent.guilds_with_expired, now)
        if owned is not None:
            guilds = [g for g in guilds if owned(g)]
        total = 0
        for guild_id in guilds:
            total += await self._expire_guild(guild_id, now)
        if total:
            log.info("consent: %d pending sensitive facts expired unanswered", total)
        self.expired_total += total
        return total

    async def _expire_guild(self, guild_id: str, now: str) -> int:
        def work(con: Connection) -> int:
            items = store_consent.expired(con, now, guild_id=guild_id)
            for item in items:
                store_consent.record_decision(con, item, "expire", "system", now)
                store_held.settle(con, guild_id, item.message_id, refused=True)
            return len(items)

        total = 0
        while True:
            n = int(await self._db.write(work))
            total += n
            if n == 0:
                break
        return total

    async def counts(self) -> dict[str, dict[str, int]]:
        """Pending facts per guild and category: numbers only."""
        return dict(await self._db.read(store_consent.counts))
