"""``Memory.lore``: server lore lines (a model's ``memoryLine``, ``/memory
remember``), grounded in the text they came from and written through the same
write decision as extracted facts: a paraphrase of known lore is a noop that
gains the source, a contradiction supersedes. A line the guild's
``review_policy`` holds waits in the moderators' review queue instead."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from memory.clock import Clock, iso
from memory.config import IngestConfig
from memory.db.core import Connection, Database
from memory.embed.service import EmbeddingService
from memory.extract.base import Extractor
from memory.extract.guards import normalise_lore_line
from memory.ingest import write_caps
from memory.ingest.pipeline import BatchProcessor
from memory.ingest.write_caps import CapReached
from memory.models import LORE_SUBJECT, Remembered
from memory.review_policy import Queued, Standing
from memory.snapshot import SnapshotRefresher
from memory.store import ops as store_ops
from memory.store.fact_decision import NewFact, apply_decision

# Lore a member or the model states is believed a little less than an
# extracted fact the extractor was confident about.
LORE_CONFIDENCE = 0.72


class LoreOps:
    def __init__(
        self,
        db: Database,
        pipeline: BatchProcessor,
        extractor: Extractor | None,
        embeddings: EmbeddingService,
        snapshot: SnapshotRefresher,
        cfg: IngestConfig,
        clock: Clock,
    ) -> None:
        self._db = db
        self._pipeline = pipeline
        self._extractor = extractor
        self._embeddings = embeddings
        self._snapshot = snapshot
        self._cfg = cfg
        self._clock = clock

    async def remember(
        self,
        guild_id: str,
        line: str,
        *,
        source_text: str,
        channel_id: str | None = None,
        source_message_id: str | None = None,
        actor: str = "lore",
        author_id: str | None = None,
        standing: Standing | None = None,
    ) -> Remembered | Queued | None:
        """Store a lore line grounded in ``source_text`` through the write
        decision, with what it did ("add", "noop": already known, the fact
        gets the source; "update", "supersede"); ``Queued`` when it waits for
        a moderator instead. None when the line fails the guards.
        ``author_id`` (else the ``user:`` actor's id) and ``standing``: the
        member whose words or request it is, for the review policy; their
        daily lore cap applies (``CapReached`` when it is used up)."""
        text = normalise_lore_line(line, source_text)
        if text is None:
            return None
        if author_id is None and actor.startswith("user:"):
            author_id = actor.removeprefix("user:")
        settings = await self._pipeline.settings.get(guild_id)
        review = self._pipeline.review
        now = iso(self._clock())
        limit = 0
        if author_id is not None:
            limit = write_caps.limit_of(settings, "lore")
        new = NewFact(
            guild_id,
            channel_id,
            LORE_SUBJECT,
            text,
            "lore",
            None,
            source_message_id,
            LORE_CONFIDENCE,
        )
        actions: list[dict[str, Any]] = []
        decisions = self._pipeline.decisions
        planned = await decisions.plan_one(guild_id, new.fact, now, self._extractor, actions)

        def work(con: Connection) -> Remembered | Queued | None:
            if author_id is not None and not write_caps.take(
                con,
                guild_id=guild_id,
                author_id=author_id,
                kind="lore",
                limit=limit,
                text=text,
                now=now,
                detail={"source_message_id": source_message_id, "channel_id": channel_id},
            ):
                return None
            for a in actions:
                store_ops.log_action(
                    con, a["kind"], a["message"], now, guild_id=guild_id, detail=a["detail"]
                )
            decision, better = decisions.decide(con, new, "", planned, now)
            line = replace(new, fact=better or new.fact)
            held = review.consider(
                con, settings, line, decision, kind="lore", author_id=author_id, now=now,
                standing=standing,
            )  # fmt: skip
            if held is not None:
                return held
            applied = apply_decision(con, line, decision, now=now, actor=actor)
            self._pipeline.budgets.after_write(con, guild_id, LORE_SUBJECT, now)
            fact = applied.fact
            store_ops.log_action(
                con,
                "memory_fact",
                f"{decision.kind} lore fact {fact.id}",
                now,
                guild_id=guild_id,
                subject=actor.removeprefix("user:") if actor.startswith("user:") else None,
                detail={
                    "fact_id": fact.id,
                    "event": decision.kind,
                    "targets": list(decision.targets),
                    "reason": decision.reason,
                    "lore": True,
                },
            )
            self._pipeline.stats.count_decision(decision.kind)
            return Remembered(fact, decision.kind)

        remembered: Remembered | Queued | None = await self._db.write(work)
        if remembered is None:
            raise CapReached("lore", limit)
        if isinstance(remembered, Queued):
            review.announce()
            return remembered
        self._embeddings.schedule_facts([remembered.fact])
        self._snapshot.request()
        return remembered
