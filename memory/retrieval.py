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
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

import numpy as np

from . import store, store_vectors
from .clock import Clock, parse_iso
from .config import RetrievalConfig
from .db import Database
from .embed import blob_to_vector, vector_to_blob
from .embedding_jobs import EmbeddingService
from .models import LORE_SUBJECT, Fact, Hit, PromptSlice, ScoreParts, SearchScope, StoredMessage
from .query import (
    EMPTY_NAMES,
    MAX_MATCH_TERMS,
    MAX_QUERY_CHARS,
    MemberNames,
    QueryPlan,
    fts_match_expression,
    plan_query,
)
from .scoring import (
    DEFAULT_MESSAGE_WEIGHTS,
    DEFAULT_WEIGHTS,
    LexicalQuery,
    MessageWeights,
    ScoringWeights,
    bm25_normalise,
    channel_score,
    fuse,
    fuse_message,
    rank,
    recency_score,
    statement_share,
)
from .vector_index import GuildMatrix, VectorCacheConfig, VectorIndex

log = logging.getLogger(__name__)

__all__ = [
    "MAX_MATCH_TERMS",
    "MAX_QUERY_CHARS",
    "MESSAGE_CONFIDENCE",
    "RetrievalTuning",
    "Retriever",
    "fts_match_expression",
]

MESSAGE_CONFIDENCE = 0.5  # messages have no extraction confidence; a neutral value

QueryVector = tuple[str, np.ndarray]
# strict: passing hits only (search); fallback: passing, else the best (prompt
# slice); all: every candidate by score (ranking view).
_Mode = Literal["strict", "fallback", "all"]
_C = TypeVar("_C")


@dataclass(frozen=True)
class RetrievalTuning:
    """Candidate counts and caches (``RetrievalConfig`` holds SPEC's limits)."""

    message_candidates: int = 200  # nearest messages and BM25 matches, each
    fact_overfetch: int = 16  # extra KNN slots in case a cached row went stale
    neighbour_pool: int = 100  # best messages whose channel neighbours are fetched
    neighbour_gap_s: float = 7200.0  # messages further apart are not neighbours
    names_ttl_s: float = 60.0  # member display names are re-read this often
    vector_cache: VectorCacheConfig = field(default_factory=VectorCacheConfig)


@dataclass
class _FactCand:
    fact: Fact
    semantic: float | None
    bm25_raw: float | None


@dataclass
class _MsgCand:
    seq: int
    msg: StoredMessage
    semantic: float | None
    bm25_raw: float | None
    base: float = 0.0
    neighbour: float = 0.0


@dataclass
class _MessageGather:
    cands: list[_MsgCand]
    missing: list[str]  # message ids without a vector


class Retriever:
    def __init__(
        self,
        db: Database,
        embeddings: EmbeddingService,
        cfg: RetrievalConfig,
        clock: Clock,
        weights: ScoringWeights = DEFAULT_WEIGHTS,
        message_weights: MessageWeights = DEFAULT_MESSAGE_WEIGHTS,
        tuning: RetrievalTuning | None = None,
    ) -> None:
        self.db = db
        self.embeddings = embeddings
        self.cfg = cfg
        self.clock = clock
        self.weights = weights
        self.message_weights = message_weights
        self.tuning = tuning or RetrievalTuning()
        self.index = VectorIndex(db.path, self.tuning.vector_cache)
        self.last_timings: dict[str, float] = {}
        self._names: dict[str, tuple[float, MemberNames]] = {}
        self._loads: dict[tuple[str, str, str], asyncio.Task[Any]] = {}

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
        mode: _Mode = "strict" if gate else "all"
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

    async def plan(self, guild_id: str, query: str) -> QueryPlan:
        """How a query is read: named members, dates, content (see ``memory.query``)."""
        names = await self._member_names(guild_id)
        return plan_query(query, names, self.clock())

    async def warm(self, guild_id: str) -> None:
        """Load the guild's vector matrices now (benchmarks; otherwise lazy)."""
        model = self.embeddings.model_for_guild(guild_id)
        if model is None:
            return
        for kind in ("facts", "messages"):
            task = self._ensure_loading(kind, model, guild_id)
            if task is not None:
                await asyncio.shield(task)

    # -- shared ---------------------------------------------------------------------------
    def _rank(
        self, scored: list[tuple[_C, ScoreParts]], mode: _Mode, limit: int
    ) -> list[tuple[_C, ScoreParts]]:
        if mode == "all":
            ordered = sorted(scored, key=lambda c: (-c[1].combined, -c[1].lexical))
            return ordered[: max(0, limit)]
        return rank(scored, strict=mode == "strict", limit=limit, weights=self.weights)

    async def _member_names(self, guild_id: str) -> MemberNames:
        if not guild_id:
            return EMPTY_NAMES
        now = time.monotonic()
        cached = self._names.get(guild_id)
        if cached is not None and now - cached[0] < self.tuning.names_ttl_s:
            return cached[1]
        rows = await self.db.read(_member_rows, guild_id)
        names = MemberNames.build(rows)
        self._names[guild_id] = (now, names)
        return names

    async def _query_vector(self, guild_id: str, plan: QueryPlan) -> QueryVector | None:
        started = time.perf_counter()
        qv = await self.embeddings.embed_query(guild_id, plan.content)
        if qv is None and plan.content != plan.text:
            qv = await self.embeddings.embed_query(guild_id, plan.text)
        self.last_timings["embed_ms"] = (time.perf_counter() - started) * 1000
        return qv

    def _matrix(self, kind: str, qv: QueryVector | None, guild_id: str) -> GuildMatrix | None:
        """A ready in-memory matrix, or None (then vec0 answers, and a load starts)."""
        if qv is None:
            return None
        model = qv[0]
        found = self.index.get(kind, model, guild_id)
        if found is None:
            self._ensure_loading(kind, model, guild_id)
        return found

    def _ensure_loading(self, kind: str, model: str, guild_id: str) -> asyncio.Task[Any] | None:
        key = (kind, model, guild_id)
        task = self._loads.get(key)
        if task is not None and not task.done():
            return task
        if not self.index.needs_load(kind, model, guild_id):
            return None
        task = asyncio.get_running_loop().create_task(self._load(kind, model, guild_id))
        self._loads[key] = task
        return task

    async def _load(self, kind: str, model: str, guild_id: str) -> None:
        try:
            await self.db.read(self.index.load, kind, model, guild_id)
        except Exception as exc:  # the vec0 path keeps working
            log.warning("vector cache load failed for %s/%s: %s", kind, guild_id, exc)
        finally:
            self._loads.pop((kind, model, guild_id), None)

    # -- facts --------------------------------------------------------------------------------
    async def _fact_hits(
        self,
        guild_id: str,
        plan: QueryPlan,
        qv: QueryVector | None,
        channel_id: str | None,
        subjects: list[str] | None,
        limit: int,
        mode: _Mode,
        visible: set[str] | None,
    ) -> list[Hit]:
        started = time.perf_counter()
        mat = self._matrix("facts", qv, guild_id) if not subjects else None
        cands, missing = await self.db.read(self._gather_facts, guild_id, plan, qv, subjects, mat)
        if missing and qv is not None:
            # Lazy back-fill: a few facts without vectors get one now.
            n = await self.embeddings.embed_facts(guild_id, missing[: self.cfg.backfill_per_query])
            if n:
                cands, _ = await self.db.read(self._gather_facts, guild_id, plan, qv, subjects, mat)
        if visible is not None:
            cands = [c for c in cands if c.fact.channel_id is None or c.fact.channel_id in visible]
        scored = self._score_facts(plan, cands, channel_id, qv is not None)
        ranked = self._rank(scored, mode, limit)
        self.last_timings["facts_ms"] = (time.perf_counter() - started) * 1000
        return [_fact_hit(c.fact, parts) for c, parts in ranked]

    def _gather_facts(
        self,
        con: Any,
        guild_id: str,
        plan: QueryPlan,
        qv: QueryVector | None,
        subjects: list[str] | None,
        mat: GuildMatrix | None,
    ) -> tuple[list[_FactCand], list[int]]:
        sem: dict[int, float] = {}
        bm: dict[int, float] = {}
        facts: dict[int, Fact] = {}
        match = plan.fact_match
        if subjects:
            # A member has at most a few hundred active facts (archive limit):
            # score them all rather than hope they surface in a guild-wide KNN.
            for f in _recent_subject_facts(con, guild_id, subjects, 400):
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
                for f, raw in store.search_facts_fts(con, guild_id, match, self.cfg.fts_candidates):
                    facts[f.id] = f
                    bm[f.id] = raw
            if knn is not None:
                sem.update(knn.result())
            need = [i for i in sem if i not in facts]
            # The join is the truth: only this guild's active facts survive.
            facts.update(_facts_by_ids(con, guild_id, need))
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
            age = _age_days(now, f.updated_at)
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

    # -- messages ------------------------------------------------------------------------------
    async def _message_hits(
        self,
        guild_id: str,
        plan: QueryPlan,
        qv: QueryVector | None,
        channel_id: str | None,
        limit: int,
        mode: _Mode,
        visible: set[str] | None,
        exclude: Sequence[str],
    ) -> list[Hit]:
        started = time.perf_counter()
        mat = self._matrix("messages", qv, guild_id)
        skip = frozenset(exclude)
        got = await self.db.read(self._gather_messages, guild_id, plan, qv, mat, visible, skip)
        if got.missing and qv is not None:
            n = await self.embeddings.embed_messages_by_id(
                guild_id, got.missing[: self.cfg.backfill_per_query]
            )
            if n:
                got = await self.db.read(
                    self._gather_messages, guild_id, plan, qv, mat, visible, skip
                )
        ranked = self._rank_messages(plan, got.cands, channel_id, qv is not None, mode, limit)
        self.last_timings["messages_ms"] = (time.perf_counter() - started) * 1000
        return [_message_hit(c.msg, parts) for c, parts in ranked]

    def _gather_messages(
        self,
        con: Any,
        guild_id: str,
        plan: QueryPlan,
        qv: QueryVector | None,
        mat: GuildMatrix | None,
        visible: set[str] | None,
        skip: frozenset[str],
    ) -> _MessageGather:
        k = self.tuning.message_candidates
        sem: dict[int, float] = {}
        bm: dict[int, float] = {}
        msgs: dict[int, StoredMessage] = {}
        if qv is not None:
            model, vec = qv
            if mat is not None:
                mat.compact_if_needed(self.tuning.vector_cache.compact_dead_fraction)
                sem.update(mat.top_k(vec, k))
            else:
                for seq, dist in store_vectors.knn_messages(
                    con, model, guild_id, vector_to_blob(vec), k
                ):
                    sem[seq] = 1.0 - dist
        if plan.message_match:
            for seq, m, raw in store.search_messages_fts(con, guild_id, plan.message_match, k):
                msgs[seq] = m
                bm[seq] = raw
        msgs.update(store.messages_by_seq(con, guild_id, [s for s in sem if s not in msgs]))
        cands = [
            _MsgCand(seq, m, sem.get(seq), bm.get(seq))
            for seq, m in msgs.items()
            if m.id not in skip and (visible is None or m.channel_id in visible)
        ]
        missing: list[str] = []
        if qv is not None:
            self._fill_similarities(con, cands, qv, mat)
            missing = [c.msg.id for c in cands if c.semantic is None and c.bm25_raw is not None]
        # Base relevance, then neighbours of the best candidates.
        w = self.message_weights
        bm_norm = bm25_normalise([c.bm25_raw for c in cands])
        by_seq: dict[int, _MsgCand] = {}
        for c, b in zip(cands, bm_norm, strict=True):
            c.base = w.base(c.semantic, b)
            by_seq[c.seq] = c
        if w.neighbour > 0 and cands:
            self._borrow_from_neighbours(con, guild_id, cands, by_seq, qv, mat, visible, skip)
        return _MessageGather(cands, missing)

    def _fill_similarities(
        self, con: Any, cands: Sequence[_MsgCand], qv: QueryVector, mat: GuildMatrix | None
    ) -> None:
        model, vec = qv
        need = [c for c in cands if c.semantic is None]
        if not need:
            return
        sims: dict[int, float] = {}
        if mat is not None:
            sims = mat.similarities(vec, [c.seq for c in need])
        rest = [c.seq for c in need if c.seq not in sims]
        if rest:
            for seq, blob in store_vectors.message_vectors(con, model, rest).items():
                sims[seq] = float(np.dot(blob_to_vector(blob), vec))
        for c in need:
            c.semantic = sims.get(c.seq)

    def _borrow_from_neighbours(
        self,
        con: Any,
        guild_id: str,
        cands: list[_MsgCand],
        by_seq: dict[int, _MsgCand],
        qv: QueryVector | None,
        mat: GuildMatrix | None,
        visible: set[str] | None,
        skip: frozenset[str],
    ) -> None:
        """Each of the best ``neighbour_pool`` candidates learns its previous and
        next message in the channel; neighbours not yet candidates join (with
        their cosine, no BM25). Then every candidate borrows the better base
        of its known neighbours."""
        pool = sorted(cands, key=lambda c: -c.base)[: self.tuning.neighbour_pool]
        gap = self.tuning.neighbour_gap_s
        adjacent = _adjacent_seqs(con, guild_id, [(c.seq, c.msg) for c in pool])
        unknown = {n for pair in adjacent.values() for n in pair if n is not None}
        fetched = store.messages_by_seq(con, guild_id, [n for n in unknown if n not in by_seq])
        links: dict[int, set[int]] = {}
        fresh: list[_MsgCand] = []
        for c in pool:
            for nseq in adjacent.get(c.seq, (None, None)):
                if nseq is None:
                    continue
                known = by_seq.get(nseq)
                nmsg = known.msg if known is not None else fetched.get(nseq)
                if nmsg is None:
                    continue
                if abs(_seconds_between(c.msg.created_at, nmsg.created_at)) > gap:
                    continue
                if nmsg.id in skip or (visible is not None and nmsg.channel_id not in visible):
                    continue
                links.setdefault(c.seq, set()).add(nseq)
                links.setdefault(nseq, set()).add(c.seq)
                if known is None:
                    nc = _MsgCand(nseq, nmsg, None, None)
                    by_seq[nseq] = nc
                    fresh.append(nc)
        if fresh:
            if qv is not None:
                self._fill_similarities(con, fresh, qv, mat)
            for nc in fresh:
                nc.base = self.message_weights.base(nc.semantic, 0.0)
            cands.extend(fresh)
        for seq, others in links.items():
            c = by_seq[seq]
            c.neighbour = max(by_seq[o].base for o in others)

    def _rank_messages(
        self,
        plan: QueryPlan,
        cands: list[_MsgCand],
        channel_id: str | None,
        has_sem: bool,
        mode: _Mode,
        limit: int,
    ) -> list[tuple[_MsgCand, ScoreParts]]:
        """Score, order, and gate messages.

        Lexical overlap is not fused by default (``MessageWeights.lexical`` is
        0) but the gate and the explanation need it; it is the costly part,
        so it is computed only while walking down the ordered list.
        """
        now = self.clock()
        w = self.message_weights
        bm_norm = bm25_normalise([c.bm25_raw for c in cands])
        lexq = LexicalQuery(plan.content)
        eager = w.lexical > 0

        def parts_for(c: _MsgCand, bm: float, lexical: float) -> ScoreParts:
            created = _parse(c.msg.created_at)
            age = max(0.0, (now - created).total_seconds() / 86400) if created else 0.0
            semantic = (c.semantic if c.semantic is not None else 0.0) if has_sem else None
            return fuse_message(
                semantic=semantic,
                bm25=bm,
                lexical=lexical,
                neighbour=c.neighbour,
                speaker=plan.speaker_weight(c.msg.author_id),
                date=plan.date_score(created),
                recency=recency_score(age, self.cfg.recency_half_days),
                channel=channel_score(c.msg.channel_id, channel_id),
                statement=statement_share(c.msg.content),
                confidence=MESSAGE_CONFIDENCE,
                weights=w,
                gate=self.weights,
            )

        def quick(c: _MsgCand, bm: float) -> float:
            # The order before lexical and explanation: the same sum as
            # fuse_message, without building parts for every candidate.
            created = _parse(c.msg.created_at) if w.date or w.recency else None
            rec = 0.0
            if w.recency and created is not None:
                rec = recency_score(
                    max(0.0, (now - created).total_seconds() / 86400), self.cfg.recency_half_days
                )
            sem = c.semantic if (has_sem and c.semantic is not None) else 0.0
            return w.combined(
                min(1.0, max(0.0, sem)),
                bm,
                c.neighbour,
                plan.speaker_weight(c.msg.author_id),
                plan.date_score(created),
                statement_share(c.msg.content) if w.statement else 0.0,
                lexq.score(c.msg.content) if eager else 0.0,
                rec,
                channel_score(c.msg.channel_id, channel_id) if w.channel else 0.0,
            )

        pre = [(c, bm, quick(c, bm)) for c, bm in zip(cands, bm_norm, strict=True)]
        pre.sort(key=lambda t: -t[2])
        out: list[tuple[_MsgCand, ScoreParts]] = []
        best: list[tuple[_MsgCand, ScoreParts]] = []
        for c, bm, _ in pre:
            parts = parts_for(c, bm, lexq.score(c.msg.content))
            if len(best) < limit:
                best.append((c, parts))
            if mode == "all" or parts.passed:
                out.append((c, parts))
            if len(out) >= limit:
                break
        if mode == "fallback" and not out:
            return best
        return out


# -- SQL used only here ---------------------------------------------------------------------------


def _member_rows(con: Any, guild_id: str) -> list[tuple[str, str]]:
    rows = con.execute(
        "SELECT user_id, display_name FROM members WHERE guild_id = ?", (guild_id,)
    ).fetchall()
    return [(r["user_id"], r["display_name"]) for r in rows]


def _facts_by_ids(con: Any, guild_id: str, ids: Sequence[int]) -> dict[int, Fact]:
    """``store.facts_by_ids`` by primary key. Without ``+`` SQLite (no ANALYZE
    statistics) walks the guild's whole ``facts_guild`` index to find a few
    dozen ids: 16 ms at 100k facts instead of 0.2 ms. The rows come back in
    the order that index walk gave (is_active, updated_at, id), so equal
    scores keep their order."""
    out: dict[int, Fact] = {}
    items = list(ids)
    for start in range(0, len(items), 500):
        chunk = items[start : start + 500]
        rows = con.execute(
            f"SELECT {store.FACT_COLUMNS} FROM memory_facts "
            f"WHERE id IN ({','.join('?' * len(chunk))}) AND +guild_id = ?",
            [*chunk, guild_id],
        ).fetchall()
        rows.sort(key=lambda r: (r["is_active"], r["updated_at"], r["id"]))
        out.update((int(r["id"]), store.row_to_fact(r)) for r in rows)
    return out


def _recent_subject_facts(
    con: Any, guild_id: str, subjects: Sequence[str], limit: int
) -> list[Fact]:
    """``store.recent_subject_facts`` through the ``facts_subject`` index. Left
    to itself SQLite orders by the ``facts_guild`` index and filters the
    subjects while walking the whole guild (120 ms at 100k facts); ``+``
    keeps that index out. ``id DESC`` is the tie order that walk gave."""
    marks = ",".join("?" * len(subjects))
    rows = con.execute(
        f"SELECT {store.FACT_COLUMNS} FROM memory_facts WHERE guild_id = ? AND is_active = 1 "
        f"AND subject IN ({marks}) ORDER BY +updated_at DESC, id DESC LIMIT ?",
        [guild_id, *subjects, limit],
    ).fetchall()
    return [store.row_to_fact(r) for r in rows]


def _adjacent_seqs(
    con: Any, guild_id: str, items: Sequence[tuple[int, StoredMessage]]
) -> dict[int, tuple[int | None, int | None]]:
    """seq → (previous seq, next seq) in the same channel, by time then seq.

    One statement, two index probes per item (messages_guild_channel_time
    covers (guild_id, channel_id, created_at, rowid)).
    """
    out: dict[int, tuple[int | None, int | None]] = {}
    for start in range(0, len(items), 200):
        chunk = items[start : start + 200]
        values = ",".join("(?, ?, ?)" for _ in chunk)
        args: list[Any] = []
        for seq, m in chunk:
            args.extend((seq, m.channel_id, m.created_at))
        rows = con.execute(
            f"WITH c(seq, ch, ts) AS (VALUES {values}) SELECT c.seq, "
            "(SELECT m.seq FROM messages m WHERE m.guild_id = ? AND m.channel_id = c.ch "
            " AND (m.created_at, m.seq) < (c.ts, c.seq) "
            " ORDER BY m.created_at DESC, m.seq DESC LIMIT 1) AS prev, "
            "(SELECT m.seq FROM messages m WHERE m.guild_id = ? AND m.channel_id = c.ch "
            " AND (m.created_at, m.seq) > (c.ts, c.seq) "
            " ORDER BY m.created_at ASC, m.seq ASC LIMIT 1) AS next "
            "FROM c",
            [*args, guild_id, guild_id],
        ).fetchall()
        for r in rows:
            out[int(r[0])] = (
                None if r[1] is None else int(r[1]),
                None if r[2] is None else int(r[2]),
            )
    return out


def _parse(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return parse_iso(text)
    except ValueError:
        return None


def _age_days(now: datetime, text: str) -> float:
    dt = _parse(text)
    return max(0.0, (now - dt).total_seconds() / 86400) if dt else 0.0


def _seconds_between(a: str, b: str) -> float:
    da, db = _parse(a), _parse(b)
    if da is None or db is None:
        return float("inf")
    return (db - da).total_seconds()


def _fact_hit(f: Fact, parts: ScoreParts) -> Hit:
    return Hit(
        kind="fact",
        id=str(f.id),
        guild_id=f.guild_id,
        channel_id=f.channel_id,
        subject=f.subject,
        text=f.fact,
        fact_type=f.fact_type,
        evidence_text=f.evidence_text,
        source_message_id=f.source_message_id,
        confidence=f.confidence,
        created_at=f.created_at,
        score=parts.combined,
        parts=parts,
    )


def _message_hit(m: StoredMessage, parts: ScoreParts) -> Hit:
    return Hit(
        kind="message",
        id=m.id,
        guild_id=m.guild_id,
        channel_id=m.channel_id,
        subject=m.author_id,
        text=m.content,
        fact_type=None,
        evidence_text=None,
        source_message_id=m.id,
        confidence=MESSAGE_CONFIDENCE,
        created_at=m.created_at,
        score=parts.combined,
        parts=parts,
        author_name=m.author_name,
    )
