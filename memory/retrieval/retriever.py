"""Hybrid retrieval over the whole guild (SPEC §6).

A query is first read (``memory.query``): the members it names, the dates it
mentions, and its content — the words left once names are taken out, which is
what gets embedded (a small encoder lets a name swamp the vector; see
``memory.query``).

Facts: candidates are the guild's nearest active facts by vector, FTS5 BM25
matches and (for the prompt slice) the subject's own facts; they are scored
with SPEC §6's default fusion and gate (``memory.scoring.fuse``).

Messages: candidates are the nearest messages by vector and the BM25 matches
(over-fetched, 200 each); each gets a *base* relevance (cosine + normalised
BM25), borrows from its better neighbour in the same channel (a reply takes
meaning from the message it answers), and gains when its author is the member
the query names or its date is one the query mentions
(``memory.scoring.fuse_message``). Facts and messages share the 0..1 scale of
``combined``, so ``scope="all"`` merges them by score.

Vector KNN uses an in-memory matrix per (guild, model) (``memory.vector_index``)
and falls back to the sqlite-vec index while the matrix loads. The guild
filter is always in SQL; channel visibility is applied to candidates before
anything is ranked or borrowed.

The parts: ``memory.retrieval_base`` (what they share), this module (the
public API and facts), ``memory.retrieval_messages`` and ``memory.retrieval_sql``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memory.embed.base import blob_to_vector, vector_to_blob
from memory.models import LORE_SUBJECT, Fact, Hit, PromptSlice, ScoreParts, SearchScope
from memory.retrieval.context import Mode, QueryVector, RetrievalTuning, log
from memory.retrieval.messages import MessageSearch
from memory.retrieval.query import MAX_MATCH_TERMS, MAX_QUERY_CHARS, QueryPlan, fts_match_expression
from memory.retrieval.scoring import (
    LexicalQuery,
    bm25_normalise,
    channel_score,
    fuse,
    recency_score,
)
from memory.retrieval.vector_index import GuildMatrix
from memory.store import facts as store
from memory.store import vectors as store_vectors
from memory.store.search import (
    SharedPart,
    age_days,
    fact_hit,
    facts_by_ids,
    fts_fact_ranks,
    merge_ranks,
    recent_subject_facts,
)

__all__ = [
    "MAX_MATCH_TERMS",
    "MAX_QUERY_CHARS",
    "RetrievalTuning",
    "Retriever",
    "fts_match_expression",
]


# A guild with at least this many fact vectors has its FTS query split in two
# (``Retriever._split_fts``); below it the query takes a few milliseconds.
FTS_SPLIT_MIN_ROWS = 20_000
# (first id of the upper half, the upper half's FTS answer)
_UpperFts = tuple[int, SharedPart]


@dataclass
class _FactCand:
    fact: Fact
    semantic: float | None
    bm25_raw: float | None


def _offer_done(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.debug("FTS half offer failed (the search ran it itself): %s", task.exception())


class Retriever(MessageSearch):
    # -- public ---------------------------------------------------------------------------
    async def search(
        self,
        guild_id: str,
        query: str,
        *,
        channel_id: str | None = None,
        limit: int = 10,
        scope: SearchScope = "facts",
        visible_channels: set[str] | None = None,
        gate: bool = True,
    ) -> list[Hit]:
        """Hits best first, at most ``limit`` (clamped to 1..search_limit_max).

        With ``gate`` (the default; SPEC §6's strict search) only hits that
        pass the relevance gate are returned, maybe none. ``gate=False`` is a
        ranking view: every candidate, best first, whether it passes or not
        (each hit's ``parts.passed`` still tells) — what a retrieval benchmark
        measures, since the gate is a precision choice made after ranking.
        """
        started = time.perf_counter()
        limit = max(1, min(self.cfg.search_limit_max, int(limit)))
        query = (query or "")[:MAX_QUERY_CHARS]
        if not query.strip() or not guild_id:
            return []
        plan = await self.plan(guild_id, query)
        qv = await self._query_vector(guild_id, plan)
        mode: Mode = "strict" if gate else "all"
        hits: list[Hit] = []
        if scope in ("facts", "all"):
            hits.extend(
                await self._fact_hits(
                    guild_id, plan, qv, channel_id, None, limit, mode, visible_channels
                )
            )
        if scope in ("messages", "all"):
            hits.extend(
                await self._message_hits(
                    guild_id, plan, qv, channel_id, limit, mode, visible_channels, ()
                )
            )
        hits.sort(key=lambda h: -h.score)
        self.last_timings["search_ms"] = (time.perf_counter() - started) * 1000
        return hits[:limit]

    async def build_prompt_slice(
        self,
        guild_id: str,
        channel_id: str | None,
        user_id: str,
        query: str,
        *,
        visible_channels: set[str] | None = None,
        exclude_message_ids: Sequence[str] = (),
    ) -> PromptSlice:
        started = time.perf_counter()
        query = (query or "")[:MAX_QUERY_CHARS]
        plan = await self.plan(guild_id, query)
        qv = await self._query_vector(guild_id, plan) if query.strip() else None
        user_facts = await self._fact_hits(
            guild_id,
            plan,
            qv,
            channel_id,
            [user_id],
            self.cfg.user_facts,
            "fallback",
            visible_channels,
        )
        relevant = await self._fact_hits(
            guild_id,
            plan,
            qv,
            channel_id,
            [user_id, LORE_SUBJECT],
            self.cfg.relevant_facts,
            "fallback",
            visible_channels,
        )
        messages: list[Hit] = []
        if query.strip():
            messages = await self._message_hits(
                guild_id,
                plan,
                qv,
                channel_id,
                self.cfg.relevant_messages,
                "fallback",
                visible_channels,
                exclude_message_ids,
            )
        # SPEC §6: past messages of the same channel come first (stable sort
        # keeps the score order inside each group).
        messages.sort(key=lambda h: h.channel_id != channel_id)
        self.last_timings["slice_ms"] = (time.perf_counter() - started) * 1000
        return PromptSlice(tuple(user_facts), tuple(relevant), tuple(messages))

    # -- facts --------------------------------------------------------------------------------
    async def _fact_hits(
        self,
        guild_id: str,
        plan: QueryPlan,
        qv: QueryVector | None,
        channel_id: str | None,
        subjects: list[str] | None,
        limit: int,
        mode: Mode,
        visible: set[str] | None,
    ) -> list[Hit]:
        started = time.perf_counter()
        mat = self._matrix("facts", qv, guild_id) if not subjects else None
        upper = self._split_fts(guild_id, plan, mat) if not subjects else None
        gather = self._gather_facts
        cands, missing = await self.db.read(gather, guild_id, plan, qv, subjects, mat, upper)
        if missing and qv is not None:
            # Lazy back-fill: a few facts without vectors get one now.
            n = await self.embeddings.embed_facts(guild_id, missing[: self.cfg.backfill_per_query])
            if n:  # gathered again; only an offered upper FTS half (``upper``) is reused
                cands, _ = await self.db.read(gather, guild_id, plan, qv, subjects, mat, upper)
        if visible is not None:
            cands = [c for c in cands if c.fact.channel_id is None or c.fact.channel_id in visible]
        scored = self._score_facts(plan, cands, channel_id, qv is not None)
        ranked = self._rank(scored, mode, limit)
        self.last_timings["facts_ms"] = (time.perf_counter() - started) * 1000
        return [fact_hit(c.fact, parts) for c, parts in ranked]

    def _gather_facts(
        self,
        con: Any,
        guild_id: str,
        plan: QueryPlan,
        qv: QueryVector | None,
        subjects: list[str] | None,
        mat: GuildMatrix | None,
        upper: _UpperFts | None,
    ) -> tuple[list[_FactCand], list[int]]:
        sem: dict[int, float] = {}
        bm: dict[int, float] = {}
        facts: dict[int, Fact] = {}
        match = plan.fact_match
        if subjects:
            # A member has at most a few hundred active facts (archive limit):
            # score them all rather than hope they surface in a guild-wide KNN.
            for f in recent_subject_facts(con, guild_id, subjects, 400):
                facts[f.id] = f
            if facts and match:
                for f, raw in store.search_facts_fts(
                    con, guild_id, match, len(facts) + 1, subjects
                ):
                    bm[f.id] = raw
        else:
            k = self.cfg.knn_candidates + self.tuning.fact_overfetch
            knn = None
            if qv is not None:
                model, vec = qv
                if mat is not None:
                    mat.compact_if_needed(self.tuning.vector_cache.compact_dead_fraction)
                    knn = mat.submit_top_k(vec, k)  # runs beside the FTS query below
                else:
                    for fid, dist in store_vectors.knn_facts(
                        con, model, guild_id, vector_to_blob(vec), k
                    ):
                        sem[fid] = 1.0 - dist
            if match:
                n = self.cfg.fts_candidates
                if upper is None:
                    ranks = fts_fact_ranks(con, guild_id, match, n)
                else:
                    split, part = upper
                    lower = fts_fact_ranks(con, guild_id, match, n, None, split)
                    ranks = merge_ranks([lower, part.result(con)], n)
                found = facts_by_ids(con, guild_id, [i for i, _ in ranks])
                for fid, raw in ranks:
                    hit = found.get(fid)
                    if hit is not None:
                        facts[fid] = hit
                        bm[fid] = raw
            if knn is not None:
                sem.update(knn.result())
            need = [i for i in sem if i not in facts]
            # The join is the truth: only this guild's active facts survive.
            facts.update(facts_by_ids(con, guild_id, need))
        facts = {i: f for i, f in facts.items() if f.is_active}
        missing: list[int] = []
        if qv is not None:
            model, vec = qv
            need_vec = [i for i in facts if i not in sem]
            if mat is not None and need_vec:
                sem.update(mat.similarities(vec, need_vec))
                need_vec = [i for i in need_vec if i not in sem]
            stored = store_vectors.fact_vectors(con, model, need_vec)
            for fid, blob in stored.items():
                sem[fid] = float(np.dot(blob_to_vector(blob), vec))
            missing = [i for i in need_vec if i not in stored]
        out = [
            _FactCand(f, sem.get(i) if qv is not None else None, bm.get(i))
            for i, f in facts.items()
        ]
        return out, missing

    def _split_fts(
        self, guild_id: str, plan: QueryPlan, mat: GuildMatrix | None
    ) -> _UpperFts | None:
        """For a big guild, the upper half (by id) of the FTS query, offered to
        a second reader thread now; None to run the query whole.

        The FTS query is most of a search at 100k facts: FTS5 computes bm25
        for every match of the guild (~1 µs each; a query of common words
        matches 20k+ facts) and SQLite reads each match's fact row to filter
        the guild. Both halves use the whole table's statistics, so their
        merged top ``fts_candidates`` is exactly the whole query's; on two
        cores the halves (and the KNN product beside them) run at once.
        """
        match = plan.fact_match
        if mat is None or not match or mat.rows < FTS_SPLIT_MIN_ROWS:
            return None
        split = mat.median_id()
        if split is None:
            return None
        part = SharedPart(fts_fact_ranks, guild_id, match, self.cfg.fts_candidates, split)
        task = asyncio.ensure_future(self.db.read(part.offer))
        # Nobody awaits the offer (the gather takes the part over if no reader
        # is free); keep it referenced and its outcome retrieved.
        self._offers.add(task)
        task.add_done_callback(self._offers.discard)
        task.add_done_callback(_offer_done)
        return split, part

    def _score_facts(
        self, plan: QueryPlan, cands: list[_FactCand], channel_id: str | None, has_sem: bool
    ) -> list[tuple[_FactCand, ScoreParts]]:
        now = self.clock()
        bm_norm = bm25_normalise([c.bm25_raw for c in cands])
        lex = LexicalQuery(plan.text)
        out = []
        for c, bm in zip(cands, bm_norm, strict=True):
            f = c.fact
            text = f.fact if not f.evidence_text else f"{f.fact} {f.evidence_text}"
            age = age_days(now, f.updated_at)
            semantic = (c.semantic if c.semantic is not None else 0.0) if has_sem else None
            parts = fuse(
                lex.score(text),
                semantic,
                f.confidence,
                recency_score(age, self.cfg.recency_half_days),
                channel_score(f.channel_id, channel_id),
                bm,
                explain=True,
                weights=self.weights,
            )
            out.append((c, parts))
        return out
