"""Processing one batch of queued messages (SPEC §3 steps 1–8).

clean → journal line → extract (one call per batch) → guards → one write
transaction (upserts with history, archive beyond the limits, mark done,
action log) → schedule embeddings and a snapshot refresh.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import store, store_ops
from .clock import Clock, iso
from .config import IngestConfig
from .db import Database
from .errors import ExtractionError
from .extract import ExtractionItem, Extractor
from .guards import clean_message, filter_candidates
from .ingest import Job
from .journal import Journal, JournalLine, format_line
from .models import Candidate, Fact

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


class BatchProcessor:
    def __init__(
        self,
        *,
        db: Database,
        journal: Journal,
        extractor: Extractor | None,
        cfg: IngestConfig,
        clock: Clock,
        on_facts_changed: Callable[[Sequence[Fact]], None],
        on_memory_changed: Callable[[], None],
    ) -> None:
        self.db = db
        self.journal = journal
        self.extractor = extractor
        self.cfg = cfg
        self.clock = clock
        self.on_facts_changed = on_facts_changed
        self.on_memory_changed = on_memory_changed
        self.stats = PipelineStats()

    async def __call__(self, jobs: Sequence[Job]) -> None:
        cleaned = [clean_message(j.msg.content, self.cfg.clean_max_chars) for j in jobs]
        await self._journal(jobs, cleaned)
        candidates = await self._extract(jobs, cleaned)
        prepared = [
            _Prepared(job, text, tuple(cands))
            for job, text, cands in zip(jobs, cleaned, candidates, strict=True)
        ]
        changed = await self.db.write(self._write, prepared, iso(self.clock()))
        if changed:
            self.on_facts_changed(changed)
        self.on_memory_changed()

    # -- step 2: journal ----------------------------------------------------------
    async def _journal(self, jobs: Sequence[Job], cleaned: Sequence[str | None]) -> None:
        ids = [j.msg.id for j in jobs]
        states = await self.db.read(store.message_states, ids)
        todo = [
            (job, text)
            for job, text in zip(jobs, cleaned, strict=True)
            if text is not None and not states.get(job.msg.id, ("", False))[1]
        ]
        if not todo:
            return
        try:
            written = await asyncio.to_thread(self._append_lines, todo)
        except OSError as exc:
            self.stats.journal_errors += 1
            log.error("journal write failed: %s", exc)
            await self.db.write(
                store_ops.log_action,
                "bot_error",
                f"memory_daily_log_write: {exc}",
                iso(self.clock()),
            )
            return
        await self.db.write(store.mark_journaled, written)

    def _append_lines(self, todo: Sequence[tuple[Job, str]]) -> list[str]:
        done: list[str] = []
        for job, text in todo:
            m = job.msg
            if job.resumed:
                # This message was accepted by an earlier run that may have
                # died between writing the line and recording it.
                day = self.journal.day_of(m.created_at)
                line = JournalLine(
                    day=day,
                    path=self.journal.path_for(day),
                    text=format_line(
                        m.created_at,
                        m.author_name,
                        m.author_id,
                        m.guild_id or "",
                        m.channel_id,
                        text,
                    ),
                )
                if self.journal.contains(line):
                    done.append(m.id)
                    continue
            self.journal.append(
                m.created_at, m.author_name, m.author_id, m.guild_id or "", m.channel_id, text
            )
            done.append(m.id)
        return done

    # -- step 3: extract ----------------------------------------------------------------
    async def _extract(
        self, jobs: Sequence[Job], cleaned: Sequence[str | None]
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
        items = [
            ExtractionItem(text=cleaned[i] or "", author=jobs[i].msg.author_name) for i in picks
        ]
        started = time.monotonic()
        self.stats.extract_calls += 1
        try:
            results = await self.extractor.extract_batch(items, self.cfg.max_facts_per_message)
        except ExtractionError as exc:
            self.stats.extract_errors += 1
            log.warning("extraction failed for %d messages: %s", len(items), exc)
            err_detail = {
                "messages": [jobs[i].msg.id for i in picks],
                "extractor": self.extractor.name,
            }
            err_text = str(exc)[:300]
            now = iso(self.clock())
            await self.db.write(
                lambda con: store_ops.log_action(
                    con, "memory_extract_error", err_text, now, detail=err_detail
                )
            )
            return out
        elapsed = (time.monotonic() - started) * 1000
        self.stats.extract_ms_total += elapsed
        for i, cands in zip(picks, results, strict=False):
            out[i] = list(cands)[: self.cfg.max_facts_per_message]
        if self.extractor.name != "rules":
            # The LLM call is the expensive, observable event; rule extraction
            # runs per message and would flood the log.
            summary = f"{len(items)} messages, {sum(len(r) for r in results)} candidates"
            detail: dict[str, object] = {"ms": round(elapsed, 1), "extractor": self.extractor.name}
            now = iso(self.clock())
            await self.db.write(
                lambda con: store_ops.log_action(
                    con, "memory_extract_call", summary, now, detail=detail
                )
            )
        return out

    # -- steps 4, 5, 7: one write transaction ---------------------------------------------
    def _write(self, con: Any, prepared: Sequence[_Prepared], now: str) -> list[Fact]:
        changed: list[Fact] = []
        for p in prepared:
            m = p.job.msg
            if p.cleaned is None:
                self.stats.skipped_short += 1
                store.mark_messages(con, [m.id], "skipped", now, "too short after cleaning")
                continue
            result = filter_candidates(list(p.candidates), p.cleaned, author=m.author_name)
            self.stats.candidates_rejected += len(result.rejected)
            touched_subject = False
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
                touched_subject = True
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
            if touched_subject and m.guild_id:
                store.archive_excess(
                    con, m.guild_id, m.author_id, self.cfg.keep_facts_per_subject, now
                )
            store.mark_messages(con, [m.id], "done", now)
        return changed
