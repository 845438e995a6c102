"""Processing one batch of queued messages, from cleaning to the snapshot refresh.

clean → extract (one call per batch, the guild's ``extract_model``) → guards
→ the write decision (an LLM call per batch, ``memory.ingest.llm_decision``,
else and for what it leaves undecided the offline rules) → journal lines and
one short write transaction per message (decisions applied with history —
or, for a candidate the guild's ``review_policy`` holds, an item in the
moderators' review queue instead — archive beyond the limits, mark done) →
embeddings and a snapshot refresh.

A failed extraction call leaves its messages waiting for a retry
(``memory.ingest.retry``); a message whose own data breaks its journal line
or its write fails alone: its transaction part is rolled back and it is
marked ``failed`` with the reason, while the rest of the batch goes on.

A message a sensitive fact was queued from (``sensitive_facts = ask``) is
withheld with it (``SensitiveGate.holds``): its journal line says so instead
of quoting it, its text leaves ``messages`` in its write, and it is not
embedded (``memory.store.held_messages``).

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

from memory.clock import Clock, iso, parse_iso
from memory.config import IngestConfig
from memory.db.core import Connection, Database
from memory.decision import DECISION_KINDS, DecisionKind
from memory.disk import TroubleLog, disk_problem
from memory.embed.service import EmbeddingService
from memory.errors import ExtractionError
from memory.extract.base import ExtractionItem, Extractor
from memory.extract.guards import FilterResult, clean_line, clean_message, filter_candidates
from memory.guild_settings import GuildSettings, GuildSettingsCache
from memory.ingest.batch_decision import Planned, WriteDecisions
from memory.ingest.budgets import BudgetKeeper
from memory.ingest.consent_gate import BatchLabels, Route, SensitiveGate
from memory.ingest.jobs import Job, extraction_done, wait_written
from memory.ingest.llm_decision import LLMDecider
from memory.ingest.retry import RetryPolicy, quarantine
from memory.ingest.review_gate import ReviewGate
from memory.ingest.stats import PipelineStats
from memory.journal import EDITED, HELD_LINE, Journal
from memory.llm import TokenTally, counting_tokens
from memory.models import Candidate, Fact
from memory.store import fact_decision
from memory.store import held_messages as store_held
from memory.store import messages as store_messages
from memory.store import ops as store_ops
from memory.store.lifecycle import current_content
from memory.usage.recorder import UsageRecorder, safe_reason
from memory.usage.series import Outcome

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Prepared:
    job: Job
    cleaned: str | None
    candidates: tuple[Candidate, ...]
    journaled: bool = False
    # Action-log rows that go into this message's transaction (the batch's
    # extraction call or error rides with its first message).
    actions: tuple[dict[str, Any], ...] = field(default=())
    extract_error: str | None = None  # the batch's extraction call failed
    broken: str | None = None  # why this message cannot be processed
    # The batch's write decisions by kind (shared by its messages; a
    # message adds its own once its write has gone through).
    tally: dict[str, int] = field(default_factory=dict)
    # The guild's ``sensitive_facts`` and the batch's sensitivity labels.
    sensitive: BatchLabels = field(default_factory=BatchLabels)
    guarded: FilterResult | None = None  # the candidates the guards let through
    # The LLM's answer for each accepted candidate (None: no LLM decided).
    planned: tuple[Planned, ...] | None = None
    settings: GuildSettings = field(default_factory=GuildSettings)  # the guild's
    # Withheld with the sensitive fact it holds (``SensitiveGate.holds``).
    held: bool = False


class BatchProcessor:
    def __init__(
        self,
        *,
        db: Database,
        journal: Journal | None,
        extractor: Extractor | None,
        cfg: IngestConfig,
        clock: Clock,
        embeddings: EmbeddingService,
        settings: GuildSettingsCache,
        on_memory_changed: Callable[[], None],
        gate: SensitiveGate,
        decider: LLMDecider | None = None,
        review: ReviewGate | None = None,
        usage: UsageRecorder | None = None,
    ) -> None:
        """``decider``: the LLM write decision; None derives it from an LLM
        extractor (same endpoint and model) when ``cfg.llm_decision``.
        ``usage``: where extraction calls and the tokens of a batch's model
        calls are counted (the request log and the daily series)."""
        self.db = db
        self.decisions = WriteDecisions(db, cfg, decider)
        self.budgets = BudgetKeeper(db, cfg, clock, embeddings, self.decisions, extractor)
        self.journal = journal
        self.extractor = extractor
        self.cfg = cfg
        self.clock = clock
        self.embeddings = embeddings
        self.settings = settings
        self.on_memory_changed = on_memory_changed
        self.gate = gate
        self.review = review or ReviewGate()
        self.retry = RetryPolicy.from_config(cfg)
        self._per_model: dict[str, Extractor] = {}
        self.stats = PipelineStats()
        self._trouble = TroubleLog(log)
        self.usage = usage

    async def __call__(self, jobs: Sequence[Job]) -> None:
        cleaned = [clean_message(j.msg.content, self.cfg.clean_max_chars) for j in jobs]
        actions: list[dict[str, Any]] = []
        try:
            candidates, errors = await self._extract(jobs, cleaned, actions)
        finally:
            extraction_done(jobs)
        guarded = [
            None
            if text is None or error is not None
            else filter_candidates(list(cands), text, author=job.msg.author_name)
            for job, text, cands, error in zip(jobs, cleaned, candidates, errors, strict=True)
        ]
        guild_id = jobs[0].msg.guild_id or "" if jobs else ""
        extractor = await self._extractor_for(guild_id) if self.extractor is not None else None
        with counting_tokens() as deciding:
            planned = await self.decisions.plan(jobs, guarded, actions, extractor)
        tally: dict[str, int] = {}
        prepared = [
            _Prepared(
                job,
                text,
                tuple(cands),
                actions=tuple(actions) if i == 0 else (),
                extract_error=error,
                tally=tally,
                guarded=guards,
                planned=plan,
            )
            for i, (job, text, cands, error, guards, plan) in enumerate(
                zip(jobs, cleaned, candidates, errors, guarded, planned, strict=True)
            )
        ]
        with counting_tokens() as labelling:
            sensitive = await self._labels(prepared)
        self._count_tokens(guild_id, deciding, labelling)
        settings = await self.settings.get(guild_id) if guild_id else GuildSettings()
        prepared = [
            replace(
                p,
                sensitive=sensitive,
                settings=settings,
                held=p.guarded is not None
                and p.extract_error is None
                and self.gate.holds(sensitive, p.guarded.accepted),
            )
            for p in prepared
        ]
        changed: list[Fact] = []
        async for group in self._in_turn(jobs, prepared):
            changed.extend(await self._commit(group))
        if tally:
            await self.db.write(self._log_decisions, jobs[0].msg.guild_id, tally, iso(self.clock()))
        if changed:
            self.embeddings.schedule_facts(changed)
        self.review.announce()
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
        journaled, error, broken = await self._journal(group)
        items = [
            replace(
                p,
                journaled=p.job.msg.id in journaled,
                actions=p.actions + (error,) if error is not None and i == 0 else p.actions,
                broken=broken.get(p.job.msg.id),
            )
            for i, p in enumerate(group)
        ]
        results = await self.db.write_each(self._write_isolated, items, iso(self.clock()))
        for p, (state, _) in zip(group, results, strict=True):
            p.job.outcome = state
            p.job.written.set()
        return [f for _, facts in results for f in facts]

    # -- step 2: journal ----------------------------------------------------------
    async def _journal(
        self, group: Sequence[_Prepared]
    ) -> tuple[set[str], dict[str, Any] | None, dict[str, str]]:
        """Append the lines; the ids whose line is in the journal, the action-log
        row of a write failure, and why a message's line could not be made (id →
        reason). Without a journal (days rendered from the database) nothing
        is appended; a message no day can show fails alone all the same."""
        if self.journal is None:
            return set(), None, _unplaceable(group)
        done_before: set[str] = set()
        resumed = [p.job.msg.id for p in group if p.job.resumed]
        if resumed:
            # Accepted by an earlier run: the line may be there already.
            states = await self.db.read(store_messages.message_states, resumed)
            done_before = {i for i, (_, journaled) in states.items() if journaled}
        # The line is cut at a word, not where extraction's input was cut.
        todo = [
            (
                p.job,
                HELD_LINE
                if p.held
                else clean_line(p.job.msg.content, self.cfg.clean_max_chars) or p.cleaned,
            )
            for p in group
            if p.cleaned is not None and p.job.msg.id not in done_before
        ]
        if not todo:
            return done_before, None, {}
        written, broken, exc = await asyncio.to_thread(self._append_lines, self.journal, todo)
        if exc is None:
            self._trouble.ok("journal write")
            return done_before | set(written), None, broken
        # The file system failed, not the message: go on without the line,
        # which is owed (the message is finished with journaled = 0) and
        # written later (``memory.roles.journal_owed``).
        self.stats.journal_errors += 1
        problem = disk_problem(exc)
        if problem is not None:
            self._trouble.failed(
                "journal write",
                problem,
                "the messages are stored and their lines are owed: written at the next start, "
                "or by the journal job once there is room",
            )
        else:
            log.error("journal write failed: %s; the lines are owed", exc)
        error = {"kind": "bot_error", "message": f"memory_daily_log_write: {exc}", "detail": None}
        return done_before | set(written), error, broken

    @staticmethod
    def _append_lines(
        journal: Journal, todo: Sequence[tuple[Job, str]]
    ) -> tuple[list[str], dict[str, str], OSError | None]:
        """(ids written, broken id → reason, the file system error that stopped it)."""
        done: list[str] = []
        broken: dict[str, str] = {}
        for job, text in todo:
            m = job.msg
            if m.edited_at:
                text = EDITED + text
            line = (m.created_at, m.author_name, m.author_id, m.guild_id or "", m.channel_id, text)
            try:
                if job.resumed:
                    # Accepted by an earlier run, which may have died between
                    # writing the line and recording it.
                    journal.append_once(*line)
                else:
                    journal.append(*line)
            except OSError as exc:
                return done, broken, exc
            except Exception as exc:  # this message's data: it fails alone
                broken[m.id] = f"journal line: {_describe(exc)}"
                continue
            done.append(m.id)
        return done, broken, None

    # -- step 3: extract ----------------------------------------------------------------
    async def _extract(
        self, jobs: Sequence[Job], cleaned: Sequence[str | None], actions: list[dict[str, Any]]
    ) -> tuple[list[list[Candidate]], list[str | None]]:
        """Candidates per message, and per message why its extraction failed."""
        out: list[list[Candidate]] = [[] for _ in jobs]
        errors: list[str | None] = [None for _ in jobs]
        if self.extractor is None:
            return out, errors
        # Other bots' messages are extracted like anyone's: the operator's
        # switch for them (global or per guild) rejects them at ingest instead.
        picks = [
            i
            for i, (job, text) in enumerate(zip(jobs, cleaned, strict=True))
            if text is not None and len(text) >= 4 and job.msg.guild_id
        ]
        if not picks:
            return out, errors
        # A batch is one channel, so one guild.
        extractor = await self._extractor_for(jobs[picks[0]].msg.guild_id or "")
        items = [
            ExtractionItem(text=cleaned[i] or "", author=jobs[i].msg.author_name) for i in picks
        ]
        started = time.monotonic()
        self.stats.extract_calls += 1
        guild_id = jobs[picks[0]].msg.guild_id or ""
        try:
            with counting_tokens() as spent:
                results = await extractor.extract_batch(items, self.cfg.max_facts_per_message)
        except ExtractionError as exc:
            self._request(guild_id, extractor, started, spent, "error", safe_reason(exc))
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
            for i in picks:
                errors[i] = str(exc)[:300]
            return out, errors
        elapsed = (time.monotonic() - started) * 1000
        self.stats.extract_ms_total += elapsed
        for i, cands in zip(picks, results, strict=False):
            out[i] = list(cands)[: self.cfg.max_facts_per_message]
        found = sum(len(c) for c in out)
        self._request(
            guild_id,
            extractor,
            started,
            spent,
            "ok" if found else "empty",
            f"{len(items)} message{'s' if len(items) != 1 else ''}, "
            f"{found} candidate{'s' if found != 1 else ''}",
        )
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
        return out, errors

    def _request(
        self,
        guild_id: str,
        extractor: Extractor,
        started: float,
        spent: TokenTally,
        outcome: Outcome,
        detail: str,
    ) -> None:
        """The extraction call's request-log row (and its series)."""
        if self.usage is None:
            return
        self.usage.request(
            guild_id,
            "extraction",
            outcome,
            (time.monotonic() - started) * 1000,
            model=getattr(extractor, "model", None) or extractor.name,
            prompt_tokens=spent.prompt if spent.calls > spent.unreported else None,
            completion_tokens=spent.completion if spent.calls > spent.unreported else None,
            detail=detail,
        )

    def _count_tokens(self, guild_id: str, *tallies: TokenTally) -> None:
        """Tokens of a batch's other model calls (the write decision, the
        sensitivity labels): in the series, not rows of the request log."""
        if self.usage is not None:
            self.usage.add(guild_id, "tokens_prompt", sum(t.prompt for t in tallies))
            self.usage.add(guild_id, "tokens_completion", sum(t.completion for t in tallies))

    async def _labels(self, prepared: Sequence[_Prepared]) -> BatchLabels:
        """The batch's sensitivity labels under its guild's ``sensitive_facts``."""
        gid = prepared[0].job.msg.guild_id if prepared else None
        if not gid or not any(p.candidates for p in prepared):
            return BatchLabels()
        mode = (await self.settings.get(gid)).sensitive_mode
        items = [(p.candidates, p.cleaned, p.job.msg.author_name) for p in prepared]
        return await self.gate.label(mode, items)

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
    def _write_isolated(self, con: Connection, p: _Prepared, now: str) -> tuple[str, list[Fact]]:
        """The message's write, inside a savepoint: if its own data breaks it,
        only its part is rolled back and it is marked failed, alone."""
        m = p.job.msg
        for a in p.actions:
            store_ops.log_action(
                con, a["kind"], a["message"], now, guild_id=m.guild_id, detail=a["detail"]
            )
        reason = p.broken
        if reason is None:
            con.execute("SAVEPOINT message")
            try:
                return self._write_one(con, p, now)
            except Exception as exc:
                con.execute("ROLLBACK TO message")
                if disk_problem(exc) is not None:
                    # The disk, not this message: the whole write fails and
                    # the message stays unfinished, processed again later.
                    raise
                reason = _describe(exc)
            finally:
                con.execute("RELEASE message")
        self.stats.messages_failed += 1
        log.error("message %s cannot be processed: %s", m.id, reason)
        store_ops.log_action(
            con,
            "bot_error",
            f"memory_message_failed: message {m.id}: {reason}"[:500],
            now,
            guild_id=m.guild_id,
            detail={"message_id": m.id, "error": "memory_message_failed", "reason": reason},
        )
        return quarantine(con, m.id, reason, now, journaled=p.journaled), []

    def _write_one(self, con: Connection, p: _Prepared, now: str) -> tuple[str, list[Fact]]:
        m = p.job.msg
        if current_content(con, m.id) != m.content:
            # Deleted, or edited after this job read it (the edit queued it
            # again): facts from the old text must not be written.
            return "superseded", []
        if p.cleaned is None:
            self.stats.skipped_short += 1
            store_messages.finish_message(con, m.id, "skipped", now, "too short after cleaning")
            return "skipped", []
        if p.extract_error is not None:
            state = self.retry.record(
                con, m.id, f"extraction failed: {p.extract_error}", now, journaled=p.journaled
            )
            if state == "retry":
                self.stats.retries_scheduled += 1
            else:
                self.stats.messages_failed += 1
            return state, []
        changed: list[Fact] = []
        decisions: list[DecisionKind] = []
        result = (
            p.guarded
            if p.guarded is not None
            else filter_candidates(list(p.candidates), p.cleaned, author=m.author_name)
        )
        self.stats.candidates_rejected += len(result.rejected)
        refused = result.refusals()
        if refused:
            # Counts and rule names only: the refused text may be a secret.
            n = sum(refused.values())
            self.stats.guard_refused += n
            store_ops.log_action(
                con,
                "memory_guard_reject",
                f"refused {n} of {len(p.candidates)} candidates: {', '.join(sorted(refused))}",
                now,
                guild_id=m.guild_id,
                subject=m.author_id,
                detail={"message_id": m.id, "reasons": refused, "candidates": len(p.candidates)},
            )
        if p.held and m.guild_id:
            # Before the consent rows: taking the text out is an update of
            # the message, which drops the consent rows that exist for it.
            store_held.hold(con, m.guild_id, m.id, m.author_id, now)
        routes: list[Route] = []
        for n, cand in enumerate(result.accepted):
            routes.append(self.gate.route(con, p.sensitive, cand, m, now))
            if routes[-1] not in ("store", "review"):
                continue
            new = fact_decision.NewFact(
                guild_id=m.guild_id or "",
                channel_id=m.channel_id,
                subject=m.author_id,
                fact=cand.fact,
                fact_type=cand.type,
                evidence=cand.evidence,
                source_message_id=m.id,
                confidence=max(0.0, min(1.0, float(cand.confidence))),
                observed_at=m.created_at,
            )
            plan = p.planned[n] if p.planned is not None else None
            decision, text = self.decisions.decide(con, new, m.author_name, plan, now)
            if text is not None:
                new = replace(new, fact=text)
            held = self.review.consider(
                con, p.settings, new, decision, kind="fact", author_id=m.author_id, now=now,
                message=p.cleaned, author_name=m.author_name,
                sensitive=self.gate.category(p.sensitive, cand) if routes[-1] == "review" else None,
            )  # fmt: skip
            if held is not None:
                continue
            actor = f"extractor:{cand.source}" if cand.source else "extractor"  # its rule
            applied = fact_decision.apply_decision(con, new, decision, now=now, actor=actor)
            decisions.append(decision.kind)
            if applied.changed:
                changed.append(applied.fact)
            store_ops.log_action(
                con,
                "memory_fact",
                f"{decision.kind} fact {applied.fact.id}",
                now,
                guild_id=m.guild_id,
                subject=m.author_id,
                detail={
                    "fact_id": applied.fact.id,
                    "event": decision.kind,
                    "targets": list(decision.targets),
                    "reason": decision.reason,
                    "message_id": m.id,
                },
            )
        if p.held and m.guild_id:
            # Nothing of it waits after all (its fact was already pending from
            # another message): the text comes straight back.
            store_held.settle(con, m.guild_id, m.id, refused=False)
        self.gate.log(con, m, routes, now)
        if result.accepted and m.guild_id:
            self.budgets.after_write(con, m.guild_id, m.author_id, now, channel_id=m.channel_id)
        store_messages.finish_message(con, m.id, "done", now, journaled=p.journaled)
        for kind in decisions:
            self.stats.count_decision(kind)
            if kind in ("add", "supersede"):
                self.stats.facts_added += 1
            else:
                self.stats.facts_updated += 1
            p.tally[kind] = p.tally.get(kind, 0) + 1
        return "done", changed

    @staticmethod
    def _log_decisions(
        con: Connection, guild_id: str | None, tally: dict[str, int], now: str
    ) -> None:
        counts: dict[str, Any] = {kind: tally.get(kind, 0) for kind in DECISION_KINDS}
        store_ops.log_action(
            con,
            "memory_decision",
            ", ".join(f"{n} {kind}" for kind, n in counts.items()),
            now,
            guild_id=guild_id,
            detail=counts,
        )


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


def _unplaceable(group: Sequence[_Prepared]) -> dict[str, str]:
    """id → why, for the messages whose time is not one (no day can show them)."""
    broken: dict[str, str] = {}
    for p in group:
        try:
            parse_iso(p.job.msg.created_at)
        except (ValueError, TypeError) as exc:
            broken[p.job.msg.id] = f"journal line: {_describe(exc)}"
    return broken
