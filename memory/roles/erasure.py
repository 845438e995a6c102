"""``Memory.erasure`` (``Memory.forget`` for one guild): erasing a member — from
one guild (``/memory forget-me``, ``/memory-admin forget-member``, a leave
policy, ``guildlore forget``) or from every guild at once (Discord's
data-deletion request for a deleted account) — with one deletion receipt.

Each guild's erase is one transaction (facts, vectors, FTS rows, messages,
traces, history texts, their daily write counts and withheld message texts),
then their journal lines are redacted; afterwards MEMORY.md is regenerated
and the database file rewritten once, so no byte of them is left. The
receipt (``Memory.receipts``) holds the counts per kind, never a text. A
member's opt-out is consent, not memory: the erase keeps it, and
``opt_out`` records it first, so nothing they send meanwhile is kept.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from memory.clock import Clock, iso
from memory.config import IngestConfig
from memory.db.core import Connection, Database
from memory.embed.service import EmbeddingService
from memory.ingest.queue import IngestQueue
from memory.journal import Journal
from memory.models import ForgetReport
from memory.roles.opt_outs import OptOuts
from memory.roles.receipts import Receipts
from memory.store import facts as store
from memory.store import held_messages as store_held
from memory.store import lifecycle_events as store_events
from memory.store import members as store_members
from memory.store import write_quota as store_quota
from memory.store.erase import ErasureCompactor

log = logging.getLogger(__name__)

KINDS = ("facts", "vectors", "messages", "traces", "journal_lines")


class Erasure:
    def __init__(
        self,
        *,
        db: Database,
        queue: IngestQueue,
        journal: Journal,
        embeddings: EmbeddingService,
        compactor: ErasureCompactor,
        receipts: Receipts,
        opt_outs: OptOuts,
        refresh_snapshot: Callable[[], Awaitable[object]],
        cfg: IngestConfig,
        clock: Clock,
    ) -> None:
        self._db = db
        self._queue = queue
        self._journal = journal
        self._embeddings = embeddings
        self._compactor = compactor
        self._receipts = receipts
        self._opt_outs = opt_outs
        self._refresh_snapshot = refresh_snapshot
        self._cfg = cfg
        self._clock = clock

    async def forget(
        self, guild_id: str, user_id: str, *, actor: str, opt_out: bool = False
    ) -> ForgetReport:
        if opt_out:
            await self._opt_outs.change(guild_id, user_id, True)
        report = await self._erase([guild_id], user_id, actor, scope="member")
        opted = await self._opt_outs.is_out(guild_id, user_id)
        return ForgetReport(**{**report.__dict__, "opted_out": opted})

    async def forget_everywhere(self, user_id: str, *, actor: str = "system") -> ForgetReport:
        """Erase a user from every guild at once (Discord's data-deletion
        request for a deleted account), with one receipt for all of them."""
        guilds = await self._db.read(store_members.guilds_holding, user_id)
        return await self._erase(guilds, user_id, actor, scope="everywhere")

    async def _erase(
        self, guild_ids: Sequence[str], user_id: str, actor: str, *, scope: str
    ) -> ForgetReport:
        now = iso(self._clock())
        # Anything of theirs still queued must not be processed after the erase.
        await self._queue.drain(self._cfg.drain_timeout_s)
        # Owed before the erase: a crash after it still rewrites the file at
        # the next start.
        await self._db.write(store_events.owe_compaction, now)
        totals = dict.fromkeys(KINDS, 0)
        for guild_id in guild_ids:
            counts = await self._db.write(_erase_member, guild_id, user_id, actor, now)
            totals["facts"] += counts.facts
            totals["vectors"] += counts.vectors
            totals["messages"] += counts.messages
            totals["traces"] += counts.traces
            totals["journal_lines"] += await asyncio.to_thread(
                self._journal.redact_user, guild_id, user_id
            )
        self._embeddings.forget_queries()
        one = scope == "member"
        receipt = await self._receipts.record(
            guild_id=guild_ids[0] if one else None,
            user_id=user_id,
            scope=scope,
            actor=actor,
            counts=totals if one else {**totals, "guilds": len(guild_ids)},
        )
        await self._refresh_snapshot()
        # The erase freed their rows; the rewrite also drops the stale copies
        # of them that earlier page rebuilds and the WAL still hold.
        compaction = await self._compactor.run_now()
        log.info(
            "forget: database rewritten (%d pages) in %.2f s", compaction.pages, compaction.seconds
        )
        return ForgetReport(
            guild_id=guild_ids[0] if one else "",
            user_id=user_id,
            facts=totals["facts"],
            vectors=totals["vectors"],
            messages=totals["messages"],
            traces=totals["traces"],
            journal_lines=totals["journal_lines"],
            compaction_s=compaction.seconds,
            receipt_id=receipt.id,
            guilds=len(guild_ids),
        )


def _erase_member(
    con: Connection, guild_id: str, user_id: str, actor: str, now: str
) -> store.ForgetCounts:
    counts = store.forget_user(con, guild_id, user_id, actor, now)
    # What the trust features keep of them: their daily write counts and the
    # texts of messages withheld for their consent.
    store_quota.forget_author(con, guild_id, user_id)
    store_held.forget_user(con, guild_id, user_id)
    return counts
