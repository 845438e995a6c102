"""The write decision of a batch's candidates, as the pipeline (and a single
lore line) uses it: the LLM's answers when an LLM decides, checked against
the facts current when each candidate is written; the offline rules for the
rest — no LLM, nothing to compare with, a failed call, or an answer that is
missing or unusable. Every fallback is logged and counted."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

from memory.config import IngestConfig
from memory.db.core import Connection, Database
from memory.decision import Decision, decide
from memory.errors import DecisionError
from memory.extract.base import Extractor
from memory.extract.guards import FilterResult
from memory.extract.llm import LLMExtractor
from memory.ingest.jobs import Job
from memory.ingest.llm_decision import DecisionCandidate, LLMDecider, Proposal, prepare, resolve
from memory.models import LORE_SUBJECT
from memory.store import fact_decision

log = logging.getLogger(__name__)


class Planned(NamedTuple):
    """The LLM's answer for one candidate (None: the rules decide it) and the
    ids of the facts it was shown for it."""

    proposal: Proposal | None
    shown: tuple[int, ...]


class WriteDecisions:
    """Decisions for candidates; counts the LLM's calls, failed calls and the
    candidates the rules decided in its place."""

    def __init__(self, db: Database, cfg: IngestConfig, decider: LLMDecider | None) -> None:
        self._db = db
        self._cfg = cfg
        self._decider = decider
        self._per_model: dict[str, LLMDecider] = {}
        self.llm_calls = 0
        self.llm_errors = 0
        self.llm_fallbacks = 0

    def decider_for(self, extractor: Extractor | None) -> LLMDecider | None:
        """The given decider; else one on the LLM extractor's endpoint and
        model (the guild's extraction model) when the LLM decision is on."""
        if self._decider is not None:
            return self._decider
        if not self._cfg.llm_decision or not isinstance(extractor, LLMExtractor):
            return None
        found = self._per_model.get(extractor.model)
        if found is None:
            found = LLMDecider(extractor.client, extractor.model, extractor.timeout_s)
            self._per_model[extractor.model] = found
        return found

    async def plan(
        self,
        jobs: Sequence[Job],
        guarded: Sequence[FilterResult | None],
        actions: list[dict[str, Any]],
        extractor: Extractor | None,
    ) -> list[tuple[Planned, ...] | None]:
        """Per message, the LLM's answer for each of its accepted candidates;
        None for every message when no LLM decides, no subject has a current
        fact to compare with, or the call failed (an action-log row says why)."""
        out: list[tuple[Planned, ...] | None] = [None] * len(jobs)
        guild_id = jobs[0].msg.guild_id if jobs else None
        cands = [
            (i, DecisionCandidate(j.msg.author_id, j.msg.author_name, c.fact, j.msg.created_at))
            for i, (j, g) in enumerate(zip(jobs, guarded, strict=True))
            if g is not None
            for c in g.accepted
        ]
        decider = self.decider_for(extractor) if cands and guild_id else None
        if decider is None:
            return out
        per_candidate = await self.ask(decider, guild_id or "", [c for _, c in cands], actions)
        if per_candidate is None:
            return out
        per_message: dict[int, list[Planned]] = {}
        for (i, _), planned in zip(cands, per_candidate, strict=True):
            per_message.setdefault(i, []).append(planned)
        for i, answers in per_message.items():
            out[i] = tuple(answers)
        return out

    async def ask(
        self,
        decider: LLMDecider,
        guild_id: str,
        cands: Sequence[DecisionCandidate],
        actions: list[dict[str, Any]],
    ) -> list[Planned] | None:
        """One call for ``cands``; None when there is nothing to compare with
        or the call failed."""
        subjects = sorted({c.subject for c in cands})
        current = await self._db.read(fact_decision.current_facts_of, guild_id, subjects)
        if not any(current.values()):
            return None  # every candidate is new: nothing for a model to weigh
        request = prepare(cands, current)
        self.llm_calls += 1
        try:
            proposals = await decider.decide_batch(request)
        except DecisionError as exc:
            self.llm_errors += 1
            self.llm_fallbacks += len(cands)
            log.warning("LLM write decision failed for %d candidates: %s", len(cands), exc)
            actions.append(
                {
                    "kind": "memory_decision_error",
                    "message": str(exc)[:300],
                    "detail": {"candidates": len(cands), "model": decider.model},
                }
            )
            return None
        return [Planned(p, shown) for p, shown in zip(proposals, request.shown, strict=True)]

    async def plan_one(
        self,
        guild_id: str,
        fact: str,
        observed_at: str,
        extractor: Extractor | None,
        actions: list[dict[str, Any]],
    ) -> Planned | None:
        """The LLM's answer for one lore line, or None (the rules decide)."""
        decider = self.decider_for(extractor)
        if decider is None:
            return None
        cand = DecisionCandidate(LORE_SUBJECT, "", fact, observed_at)
        answers = await self.ask(decider, guild_id, [cand], actions)
        return answers[0] if answers else None

    def decide(
        self,
        con: Connection,
        new: fact_decision.NewFact,
        name: str,
        planned: Planned | None,
        now: str,
    ) -> tuple[Decision, str | None]:
        """The decision for one candidate, inside its write transaction, and
        an update's new text: the LLM's answer checked against the facts
        current now, else the rules."""
        current = fact_decision.current_facts(con, new.guild_id, new.subject)
        seen = fact_decision.observed_time(con, new, now)
        if planned is not None:
            cand = DecisionCandidate(new.subject, name, new.fact, seen)
            resolved = (
                resolve(planned.proposal, cand, current, planned.shown)
                if planned.proposal is not None
                else None
            )
            if resolved is not None:
                return resolved
            self.llm_fallbacks += 1
            log.info("candidate %r: no usable LLM decision, the rules decide", new.fact[:80])
        return decide(new.fact, seen, current, name), None
