"""Processing one batch of queued messages (SPEC §3 steps 1–8).

clean → extract (one call per batch, with the guild's ``extract_model``) →
guards → journal lines and one short write transaction per message (upserts
with history, archive beyond the limits, mark done) → schedule embeddings
and a snapshot refresh.

Batches run concurrently. The extraction call — the slow part — waits for
nothing. The ordered part (journal line, write) of a message waits until the
same author's previous message has written (``job.prev.written``), so a
member's facts are written in the order they spoke; messages of other
authors in the batch do not wait with it.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memory.clock import Clock, iso
from memory.config import IngestConfig
from memory.embed.service import EmbeddingService
from memory.errors import ExtractionError
from memory.extract.guards import clean_message, filter_candidates
from memory.extract.llm import ExtractionItem, Extractor
from memory.guild_settings import GuildSettingsCache
from memory.ingest.jobs import Job, extraction_done, wait_written
from memory.journal import Journal
from memory.models import Candidate, Fact
from memory.store import facts as store
from memory.store import ops as store_ops
from memory.store.db import Database

log = logging.getLogger(__name__)


@dataclass
class PipelineStats:
    extract_calls: int = 0
    extract_errors: int = 0
    extract_ms_total: float = 0.0
    facts_added: int = 0
    facts_updated: int = 0
    candidates_rejected: int = 0
    journal_errors: int = 0
    skipped_short: int = 0


@dataclass(frozen=True)
class _Prepared:
    job: Job
    cleaned: str | None
    candidates: tuple[Candidate, ...]
    journaled: bool = False
    # Action-log rows that go into this message's transaction (the batch's
    # extraction call or error rides with its first message).
    actions: tuple[dict[str, Any], ...] = field(default=())


class BatchProcessor:
    def __init__(
        self,
        *,
        db: Database,
        journal: Journal,
        extractor: Extractor | None,
        cfg: IngestConfig,
        clock: Clock,
        embeddings: EmbeddingService,
        settings: GuildSettingsCache,
        on_memory_changed: Callable[[], None],
    ) -> None:
        self.db = db
        self.journal = journal
        self.extractor = extractor
        self.cfg = cfg
        self.clock = clock
        self.embeddings = embeddings
        self.settings = settings
        self.on_memory_changed = on_memory_changed
        self._per_model: dict[str, Extractor] = {}
        self.stats = PipelineStats()

    async def __call__(self, jobs: Sequence[Job]) -> None:
        cleaned = [clean_message(j.msg.content, self.cfg.clean_max_chars) for j in jobs]
        actions: list[dict[str, Any]] = []
        try:
            candidates = await self._extract(jobs, cleaned, actions)
        finally:
            extraction_done(jobs)
        prepared = [
            _Prepared(job, text, tuple(cands), actions=tuple(actions) if i == 0 else ())
            for i, (job, text, cands) in enumerate(zip(jobs, cleaned, candidates, strict=True))
        ]
        changed: list[Fact] = []
        async for group in self._in_turn(jobs, prepared):
            changed.extend(await self._commit(group))
        if changed:
            self.embeddings.schedule_facts(changed)
        self.embeddings.schedule_messages([(j.msg.id, j.msg.guild_id or "") for j in jobs])
        self.on_memory_changed()

    @staticmethod
    async def _in_turn(
        jobs: Sequence[Job], prepared: Sequence[_Prepared]
    ) -> AsyncIterator[list[_Prepared]]:
        """Groups of messages, in queue order, whose authors' earlier messages
        have all written; one blocked author does not hold up the others."""
        pending = list(prepared)
        while pending:
            group: list[_Prepared] = []
            blocked: list[_Prepared] = []
            mine: set[int] = set()
            for p in pending:
                prev = p.job.prev
                if prev is None or prev.written.is_set() or id(prev) in mine:
                    group.append(p)
                    mine.add(id(p.job))
                else:
                    blocked.append(p)
            if not group:
                # The first blocked one waits for a message of another batch.
                first = blocked[0].job.prev
                assert first is not None
                await wait_written(jobs, first)
                continue
            pending = blocked
            yield group

    async def _commit(self, group: Sequence[_Prepared]) -> list[Fact]:
        """Journal lines, then one short transaction per message; each job is
        marked written (its author's next message may go)."""
        journaled, error = await self._journal(group)
        items = [
            replace(
                p,
                journaled=p.job.msg.id in journaled,
                actions=p.actions + (error,) if error is not None and i == 0 else p.actions,
            )
            for i, p in enumerate(group)
        ]
        results = await self.db.write_each(self._write_one, items, iso(self.clock()))
        for p in group:
            p.job.written.set()
        return [f for facts in results for f in facts]

    # -- step 2: journal ----------------------------------------------------------
    async def _journal(self, group: Sequence[_Prepared]) -> tuple[set[str], dict[str, Any] | None]:
        """Append the lines; the ids whose line is in the journal, and the
        action-log row of a failure."""
        done_before: set[str] = set()
        resumed = [p.job.msg.id for p in group if p.job.resumed]
        if resumed:
            # Accepted by an earlier run: the line may be there already.
            states = await self.db.read(store.message_states, resumed)
            done_before = {i for i, (_, journaled) in states.items() if journaled}
        todo = [
            (p.job, p.cleaned)
            for p in group
            if p.cleaned is not None and p.job.msg.id not in done_before
        ]
        if not todo:
            return done_before, None
        try:
            written = await asyncio.to_thread(self._append_lines, todo)
        except OSError as exc:
            self.stats.journal_errors += 1
            log.error("journal write failed: %s", exc)
            error = {
                "kind": "bot_error",
                "message": f"memory_daily_log_write: {exc}",
                "detail": None,
            }
            return done_before, error
        return done_before | set(written), None

    def _append_lines(self, todo: Sequence[tuple[Job, str]]) -> list[str]:
        done: list[str] = []
        for job, text in todo:
            m = job.msg
            line = (m.created_at, m.author_name, m.author_id, m.guild_id or "", m.channel_id, text)
            if job.resumed:
                # Accepted by an earlier run, which may have died between
                # writing the line and recording it.
                self.journal.append_once(*line)
            else:
                self.journal.append(*line)
            done.append(m.id)
        return done

    # -- step 3: extract ----------------------------------------------------------------
    async def _extract(
        self, jobs: Sequence[Job], cleaned: Sequence[str | None], actions: list[dict[str, Any]]
    ) -> list[list[Candidate]]:
        out: list[list[Candidate]] = [[] for _ in jobs]
        if self.extractor is None:
            return out
        picks = [
            i
            for i, (job, text) in enumerate(zip(jobs, cleaned, strict=True))
            if text is not None and len(text) >= 4 and job.msg.guild_id and not job.msg.is_bot
        ]
        if not picks:
            return out
        # A batch is one channel, so one guild.
        extractor = await self._extractor_for(jobs[picks[0]].msg.guild_id or "")
        items = [
            ExtractionItem(text=cleaned[i] or "", author=jobs[i].msg.author_name) for i in picks
        ]
        started = time.monotonic()
        self.stats.extract_calls += 1
        try:
            results = await extractor.extract_batch(items, self.cfg.max_facts_per_message)
        except ExtractionError as exc:
            self.stats.extract_errors += 1
            log.warning("extraction failed for %d messages: %s", len(items), exc)
            actions.append(
                {
                    "kind": "memory_extract_error",
                    "message": str(exc)[:300],
                    "detail": {
                        "messages": [jobs[i].msg.id for i in picks],
                        "extractor": extractor.name,
                    },
                }
            )
            return out
        elapsed = (time.monotonic() - started) * 1000
        self.stats.extract_ms_total += elapsed
        for i, cands in zip(picks, results, strict=False):
            out[i] = list(cands)[: self.cfg.max_facts_per_message]
        if extractor.name != "rules":
            # The LLM call is the expensive, observable event; rule extraction
            # runs per message and would flood the log.
            detail: dict[str, object] = {"ms": round(elapsed, 1), "extractor": extractor.name}
            model = getattr(extractor, "model", None)
            if model:
                detail["model"] = model
            actions.append(
                {
                    "kind": "memory_extract_call",
                    "message": f"{len(items)} messages, {sum(len(r) for r in results)} candidates",
                    "detail": detail,
                }
            )
        return out

    async def _extractor_for(self, guild_id: str) -> Extractor:
        """The extractor with the guild's ``extract_model`` setting applied."""
        base = self.extractor
        assert base is not None
        default_model = getattr(base, "model", None)
        if default_model is None:  # not model-based (the offline rules)
            return base
        model = (await self.settings.get(guild_id)).extract_model
        if not model or model == default_model:
            return base
        found = self._per_model.get(model)
        if found is None:
            # Same client and timeouts, other model: a shallow copy shares the
            # connection pool.
            found = copy.copy(base)
            found.model = model  # type: ignore[attr-defined]
            self._per_model[model] = found
        return found

    # -- steps 4, 5, 7: one short transaction per message --------------------------------
    def _write_one(self, con: Any, p: _Prepared, now: str) -> list[Fact]:
        m = p.job.msg
        for a in p.actions:
            store_ops.log_action(
                con, a["kind"], a["message"], now, guild_id=m.guild_id, detail=a["detail"]
            )
        if p.cleaned is None:
            self.stats.skipped_short += 1
            store.finish_message(con, m.id, "skipped", now, "too short after cleaning")
            return []
        changed: list[Fact] = []
        result = filter_candidates(list(p.candidates), p.cleaned, author=m.author_name)
        self.stats.candidates_rejected += len(result.rejected)
        for cand in result.accepted:
            up = store.upsert_fact(
                con,
                guild_id=m.guild_id or "",
                channel_id=m.channel_id,
                subject=m.author_id,
                fact=cand.fact,
                fact_type=cand.type,
                evidence=cand.evidence,
                source_message_id=m.id,
                confidence=max(0.0, min(1.0, float(cand.confidence))),
                now=now,
                actor="extractor",
            )
            if up.event == "add":
                self.stats.facts_added += 1
            else:
                self.stats.facts_updated += 1
            if up.changed:
                changed.append(up.fact)
            store_ops.log_action(
                con,
                "memory_fact",
                f"{up.event} fact {up.fact.id}",
                now,
                guild_id=m.guild_id,
                subject=m.author_id,
                detail={"fact_id": up.fact.id, "event": up.event, "message_id": m.id},
            )
        if result.accepted and m.guild_id:
            store.archive_excess(con, m.guild_id, m.author_id, self.cfg.keep_facts_per_subject, now)
        store.finish_message(con, m.id, "done", now, journaled=p.journaled)
        return changed
