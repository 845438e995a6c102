"""Fact retrieval: candidates are the guild's nearest active facts by vector,
FTS5 BM25 matches and (for the prompt slice) the subject's own facts; they
are scored with the default fusion and gate (``memory.retrieval.scoring.fuse``)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

from memory.db.core import Connection
from memory.models import Fact, Hit, ScoreParts
from memory.retrieval.context import Mode, QueryVector, SearchContext
from memory.retrieval.fact_lexicon import FactLexicon
from memory.retrieval.filters import FactFilter
from memory.retrieval.hits import age_days, fact_hit
from memory.retrieval.lexical import LexicalQuery
from memory.retrieval.query import QueryPlan
from memory.retrieval.related import boost, links_of
from memory.retrieval.scoring import (
    ScoringWeights,
    bm25_normalise,
    channel_score,
    fuse,
    recency_score,
)
from memory.retrieval.shared_part import Offers, SharedPart
from memory.retrieval.vector_search import VectorSearch
from memory.store import facts as store
from memory.store.search import facts_by_ids, fts_fact_ranks, merge_ranks, recent_subject_facts
from memory.text import compact

log = logging.getLogger(__name__)

# An insight's share of its score (inferred observations rank low).
INSIGHT_RANK_WEIGHT = 0.5
# A guild with at least this many fact vectors has its FTS query split in two
# (``FactSearch._split_fts``); below it the query takes a few milliseconds.
FTS_SPLIT_MIN_ROWS = 20_000
# (first id of the upper half, the upper half's FTS answer)
_UpperFts = tuple[int, SharedPart]


@dataclass
class _FactCand:
    fact: Fact
    semantic: float | None
    bm25_raw: float | None
    links: tuple[tuple[int, float], ...] = ()


class FactSearch:
    def __init__(self, ctx: SearchContext) -> None:
        self.ctx = ctx
        self._offers = Offers("FTS half")  # see _split_fts

    @property
    def offers_pending(self) -> int:
        """Upper FTS halves offered to a second reader and not finished yet."""
        return len(self._offers)

    async def hits(
        self,
        guild_id: str,
        plan: QueryPlan,
        qv: QueryVector | None,
        channel_id: str | None,
        subjects: list[str] | None,
        limit: int,
        mode: Mode,
        visible: set[str] | None,
        as_of: str | None = None,
        only: FactFilter | None = None,
    ) -> list[Hit]:
        """``as_of``: only facts valid at that time (ISO text); None: current facts.
        ``only``: the types and observation times allowed (None: all)."""
        ctx = self.ctx
        started = time.perf_counter()
        # A member's own facts are few: their stored vectors are read as they are.
        vs = ctx.vector_search("facts", qv, guild_id, in_memory=not subjects)
        # The guild's BM25 from its lexicon; FTS5 while a big guild's is built.
        lex = await ctx.fact_lexicons.get(guild_id) if plan.fact_match and not subjects else None
        upper = self._split_fts(guild_id, plan, vs, as_of) if not subjects and not lex else None
        gather = self._gather
        args = (guild_id, plan, vs, subjects, upper, as_of, lex)
        cands, missing = await ctx.db.read(gather, *args)
        if missing and qv is not None:
            # Lazy back-fill: a few facts without vectors get one now.
            n = await ctx.embeddings.embed_facts(guild_id, missing[: ctx.cfg.backfill_per_query])
            if n:  # gathered again; only an offered upper FTS half (``upper``) is reused
                cands, _ = await ctx.db.read(gather, *args)
        if visible is not None:
            cands = [c for c in cands if c.fact.channel_id is None or c.fact.channel_id in visible]
        if only is not None:
            cands = [c for c in cands if only.keep(c.fact)]
        weights = ctx.gate_weights(qv)
        scored = self._score(plan, cands, channel_id, qv is not None, weights)
        scored = boost(scored, [c.fact.id for c in cands], {c.fact.id: c.links for c in cands})
        ranked = ctx.rank(scored, mode, limit, weights)
        ctx.timings["facts_ms"] = (time.perf_counter() - started) * 1000
        return [fact_hit(c.fact, parts) for c, parts in ranked]

    def _gather(
        self,
        con: Connection,
        guild_id: str,
        plan: QueryPlan,
        vs: VectorSearch | None,
        subjects: list[str] | None,
        upper: _UpperFts | None,
        as_of: str | None,
        lex: FactLexicon | None = None,
    ) -> tuple[list[_FactCand], list[int]]:
        """Candidates, and the ids among them without a vector (run on a reader)."""
        if subjects:
            facts, bm = self._subject_facts(con, guild_id, plan, subjects, as_of)
            sem: dict[int, float] = {}
        else:
            facts, bm, sem = self._guild_facts(con, guild_id, plan, vs, upper, as_of, lex)
        facts = {i: f for i, f in facts.items() if f.is_active}
        missing: list[int] = []
        if vs is not None:
            need = [i for i in facts if i not in sem]
            found = vs.similarities(con, need)
            sem.update(found)
            missing = [i for i in need if i not in found]
        links = links_of(con, guild_id, list(facts))
        out = [
            _FactCand(f, sem.get(i) if vs is not None else None, bm.get(i), tuple(links.get(i, ())))
            for i, f in facts.items()
        ]
        return out, missing

    def _subject_facts(
        self,
        con: Connection,
        guild_id: str,
        plan: QueryPlan,
        subjects: list[str],
        as_of: str | None,
    ) -> tuple[dict[int, Fact], dict[int, float]]:
        # A member has at most a few hundred active facts (archive limit):
        # score them all rather than hope they surface in a guild-wide KNN.
        facts = {f.id: f for f in recent_subject_facts(con, guild_id, subjects, 400, as_of)}
        bm: dict[int, float] = {}
        match = plan.fact_match
        if facts and match:
            for f, raw in store.search_facts_fts(con, guild_id, match, len(facts) + 1, subjects):
                bm[f.id] = raw
        return facts, bm

    def _guild_facts(
        self,
        con: Connection,
        guild_id: str,
        plan: QueryPlan,
        vs: VectorSearch | None,
        upper: _UpperFts | None,
        as_of: str | None,
        lex: FactLexicon | None = None,
    ) -> tuple[dict[int, Fact], dict[int, float], dict[int, float]]:
        """The nearest facts by vector and the best BM25 matches of the whole
        guild: from its lexicon (after reading what changed since its last
        search), else FTS5's."""
        cfg = self.ctx.cfg
        facts: dict[int, Fact] = {}
        bm: dict[int, float] = {}
        sem: dict[int, float] = {}
        k = cfg.knn_candidates + self.ctx.tuning.fact_overfetch
        knn = vs.start_nearest(con, k) if vs is not None else None  # beside the FTS query
        match = plan.fact_match
        if match:
            n = cfg.fts_candidates
            if lex is not None:
                lex.refresh(con)
                ranks = lex.best(match, n, as_of)
            elif upper is None:
                ranks = fts_fact_ranks(con, guild_id, match, n, as_of=as_of)
            else:
                split, part = upper
                lower = fts_fact_ranks(con, guild_id, match, n, None, split, as_of)
                ranks = merge_ranks([lower, part.result(con)], n)
            found = facts_by_ids(con, guild_id, [i for i, _ in ranks], as_of)
            for fid, raw in ranks:
                hit = found.get(fid)
                if hit is not None:
                    facts[fid] = hit
                    bm[fid] = raw
        if knn is not None:
            sem.update(knn.result())
        need = [i for i in sem if i not in facts]
        # The join is the truth: only this guild's facts valid then (by default,
        # the current ones) survive; inactive ones are dropped in ``_gather``.
        facts.update(facts_by_ids(con, guild_id, need, as_of))
        return facts, bm, sem

    def _split_fts(
        self, guild_id: str, plan: QueryPlan, vs: VectorSearch | None, as_of: str | None
    ) -> _UpperFts | None:
        """For a big guild, the upper half (by id) of the FTS query, offered to
        a second reader thread now; None to run the query whole.

        The FTS query is most of a search at 100k facts: FTS5 computes bm25
        for every match of the guild (a query of common words matches tens of
        thousands of facts) and SQLite reads each match's fact row to filter
        the guild. Both halves use the whole table's statistics, so their
        merged top ``fts_candidates`` is exactly the whole query's; with a
        second core free the halves (and the KNN product beside them) run at once.
        """
        match = plan.fact_match
        if vs is None or not match:
            return None
        split = vs.split_id(FTS_SPLIT_MIN_ROWS)
        if split is None:
            return None
        n = self.ctx.cfg.fts_candidates
        part = SharedPart(fts_fact_ranks, guild_id, match, n, split, None, as_of)
        self._offers.offer(self.ctx.db.read, part)
        return split, part

    def _score(
        self,
        plan: QueryPlan,
        cands: list[_FactCand],
        channel_id: str | None,
        has_sem: bool,
        weights: ScoringWeights,
    ) -> list[tuple[_FactCand, ScoreParts]]:
        cfg = self.ctx.cfg
        now = self.ctx.clock()
        bm_norm = bm25_normalise([c.bm25_raw for c in cands])
        lex = LexicalQuery(plan.text, positive=plan.positive)
        out = []
        for c, bm in zip(cands, bm_norm, strict=True):
            f = c.fact
            text = f.fact if not f.evidence_text else f"{f.fact} {f.evidence_text}"
            # Age from the latest observation's message time, not from when a
            # batch processed it: imported history is as old as its messages.
            age = age_days(now, f.last_observed_at or f.updated_at)
            semantic = (c.semantic if c.semantic is not None else 0.0) if has_sem else None
            parts = fuse(
                lex.score(text),
                semantic,
                f.confidence,
                recency_score(age, cfg.recency_half_days),
                channel_score(f.channel_id, channel_id),
                bm,
                explain=True,
                weights=weights,
                canon=f.fact_type == "canon",
            )
            if plan.positive and parts.passed and lex.only_negated(compact(text)):
                # "who is a papyrologist?" is not answered by "… not a papyrologist".
                parts = replace(parts, passed=False, negated=1.0)
            if f.fact_type == "insight":
                # Inferred, never evidence: an insight ranks below what was said.
                parts = replace(parts, combined=parts.combined * INSIGHT_RANK_WEIGHT)
            out.append((c, parts))
        return out
