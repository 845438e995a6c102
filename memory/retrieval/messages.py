"""Message retrieval: the nearest messages by vector and the BM25 matches,
each with a base relevance, borrowing from its channel neighbours, then fused
and gated (``memory.retrieval.scoring.fuse_message``); finally a member's
later restatement of the same thing goes first (``memory.retrieval.newer_first``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from memory.db.core import Connection
from memory.models import Hit, ScoreParts, StoredMessage
from memory.retrieval.bounded_order import best_first
from memory.retrieval.context import Mode, QueryVector, SearchContext
from memory.retrieval.hits import MESSAGE_CONFIDENCE, message_hit, seconds_between
from memory.retrieval.lexical import LexicalQuery
from memory.retrieval.lexicon import GuildLexicon
from memory.retrieval.message_text import TextReadings
from memory.retrieval.newer_first import newer_first
from memory.retrieval.query import QueryPlan
from memory.retrieval.scoring import (
    ScoringWeights,
    bm25_normalise,
    channel_score,
    fuse_message,
    recency_score,
)
from memory.retrieval.shared_part import Offers, SharedPart
from memory.retrieval.vector_search import VectorSearch
from memory.retrieval.voice import asks_for_own_story
from memory.store import message_fts
from memory.store.fact_time import superseded_sources

log = logging.getLogger(__name__)

# A guild with at least this many message vectors has its FTS query split in
# two seq ranges run on two reader threads (``MessageSearch._split_fts``).
FTS_SPLIT_MIN_ROWS = 20_000
# (first seq of the upper range, that range's FTS answer)
_UpperFts = tuple[int, SharedPart]
_FtsRow = tuple[int, StoredMessage, float]


@dataclass
class _MsgCand:
    seq: int
    msg: StoredMessage
    semantic: float | None
    bm25_raw: float | None
    base: float = 0.0
    neighbour: float = 0.0
    superseded: bool = False  # every fact taken from it has been superseded


@dataclass
class _MessageGather:
    cands: list[_MsgCand]
    missing: list[str]  # message ids without a vector
    # (statement, first-person share) by seq, as the lexicon read them
    voices: dict[int, tuple[float, float]]


@dataclass(frozen=True)
class _Skip:
    """Messages a search leaves out: excluded ids, channels the asker cannot
    read (``visible``; None: no restriction), and those created after ``until``."""

    ids: frozenset[str]
    visible: set[str] | None
    until: str | None

    def excludes(self, m: StoredMessage) -> bool:
        return (
            m.id in self.ids
            or (self.visible is not None and m.channel_id not in self.visible)
            or (self.until is not None and m.created_at > self.until)
        )


def _merge_fts(parts: Sequence[Sequence[_FtsRow]], limit: int) -> list[_FtsRow]:
    """The best ``limit`` of FTS answers over disjoint seq ranges, by rank then
    seq: the order the whole query gives."""
    merged = [row for part in parts for row in part]
    merged.sort(key=lambda r: (r[2], r[0]))
    return merged[:limit]


def _lexicon_best(
    con: Connection,
    lex: GuildLexicon,
    guild_id: str,
    match: str,
    limit: int,
    readings: TextReadings,
) -> list[_FtsRow]:
    """The guild's ``limit`` best BM25 matches from its lexicon, after reading
    what was stored since its last search; each joined to its row (a message
    deleted a moment ago is not)."""
    lex.refresh(con)
    ranked = lex.best(match, limit)
    rows = readings.rows(con, guild_id, [seq for seq, _ in ranked])
    return [(seq, rows[seq], raw) for seq, raw in ranked if seq in rows]


class MessageSearch:
    def __init__(self, ctx: SearchContext) -> None:
        self.ctx = ctx
        self._offers = Offers("FTS range")  # see _split_fts

    @property
    def offers_pending(self) -> int:
        """Upper FTS ranges offered to a second reader and not finished yet."""
        return len(self._offers)

    async def hits(
        self,
        guild_id: str,
        plan: QueryPlan,
        qv: QueryVector | None,
        channel_id: str | None,
        limit: int,
        mode: Mode,
        visible: set[str] | None,
        exclude: Sequence[str],
        until: str | None = None,
        readings: TextReadings | None = None,
    ) -> list[Hit]:
        """``until``: no message created after that time (ISO text)."""
        ctx = self.ctx
        started = time.perf_counter()
        vs = ctx.vector_search("messages", qv, guild_id)
        skip = _Skip(frozenset(exclude), visible, until)
        lex = await ctx.lexicons.get(guild_id) if plan.message_match else None
        upper = None if lex is not None else self._split_fts(guild_id, plan, vs)
        readings = readings or TextReadings()
        gather = self._gather
        got = await ctx.db.read(gather, guild_id, plan, vs, skip, readings, upper, lex)
        if got.missing and qv is not None:
            n = await ctx.embeddings.embed_messages_by_id(
                guild_id, got.missing[: ctx.cfg.backfill_per_query]
            )
            if n:  # gathered again; an offered upper FTS range is reused
                got = await ctx.db.read(gather, guild_id, plan, vs, skip, readings, upper, lex)
        for c in got.cands:
            if (voice := got.voices.get(c.seq)) is not None:
                readings.know(c.seq, c.msg.content, *voice)
        gate = ctx.gate_weights(qv)
        ranked = self._rank(
            plan,
            got.cands,
            channel_id,
            qv is not None,
            mode,
            limit,
            gate,
            readings,
        )
        seq_of = {c.msg.id: c.seq for c, _ in ranked}
        hits = newer_first(
            [message_hit(c.msg, parts) for c, parts in ranked],
            plan.content,
            ctx.tuning.newer_first,
            lambda h: readings.compacted(seq_of[h.id], h.text),
        )
        ctx.timings["messages_ms"] = (time.perf_counter() - started) * 1000
        return hits

    def _gather(
        self,
        con: Connection,
        guild_id: str,
        plan: QueryPlan,
        vs: VectorSearch | None,
        skip: _Skip,
        readings: TextReadings,
        upper: _UpperFts | None = None,
        lex: GuildLexicon | None = None,
    ) -> _MessageGather:
        k = self.ctx.tuning.message_candidates
        sem: dict[int, float] = {}
        bm: dict[int, float] = {}
        msgs: dict[int, StoredMessage] = {}
        knn = vs.start_nearest(con, k) if vs is not None else None  # beside the FTS query
        match = plan.message_match
        if match and lex is not None:
            found = _lexicon_best(con, lex, guild_id, match, k, readings)
            for seq, m, raw in found:
                msgs[seq] = m
                bm[seq] = raw
        elif match:
            rows = vs.rows() if vs is not None else None
            if upper is None:
                found = message_fts.search_messages_fts(con, guild_id, match, k, None, None, rows)
            else:
                split, part = upper
                lower = message_fts.search_messages_fts(con, guild_id, match, k, None, split, rows)
                found = _merge_fts([lower, part.result(con)], k)
            for seq, m, raw in found:
                msgs[seq] = m
                bm[seq] = raw
        if knn is not None:
            sem.update(knn.result())
        unknown = [s for s in sem if s not in msgs]
        msgs.update(readings.rows(con, guild_id, unknown))
        cands = [
            _MsgCand(seq, m, sem.get(seq), bm.get(seq))
            for seq, m in msgs.items()
            if not skip.excludes(m)
        ]
        missing: list[str] = []
        if vs is not None:
            self._fill_similarities(con, cands, vs)
            missing = [c.msg.id for c in cands if c.semantic is None and c.bm25_raw is not None]
        # Base relevance, then neighbours of the best candidates.
        w = self.ctx.message_weights
        bm_norm = bm25_normalise([c.bm25_raw for c in cands])
        by_seq: dict[int, _MsgCand] = {}
        for c, b in zip(cands, bm_norm, strict=True):
            c.base = w.base(c.semantic, b)
            by_seq[c.seq] = c
        if w.neighbour > 0 and cands:
            self._borrow_from_neighbours(con, guild_id, cands, by_seq, vs, skip, readings)
        if w.superseded > 0 and cands:
            past = superseded_sources(con, guild_id, [c.msg.id for c in cands], skip.until)
            for c in cands:
                c.superseded = c.msg.id in past
        # What another search of the question has read already is not asked again.
        unread = (
            (c.seq, c.msg.content) for c in cands if readings.lacks_voice(c.seq, c.msg.content)
        )
        voices = lex.voices(unread) if lex is not None else {}
        return _MessageGather(cands, missing, voices)

    def _split_fts(
        self, guild_id: str, plan: QueryPlan, vs: VectorSearch | None
    ) -> _UpperFts | None:
        """For a big guild, the upper seq range of the FTS query, offered to a
        second reader thread now; None to run the query whole.

        In a guild of long messages the FTS query is most of a search: FTS5
        computes bm25 for every match (common words match a good share of
        the guild). Both ranges use the whole table's statistics, so their
        merged best ``message_candidates`` are exactly the whole query's; with
        a second core free the two ranges (and the KNN product beside them)
        run at once.
        """
        match = plan.message_match
        if vs is None or not match:
            return None
        split = vs.split_id(FTS_SPLIT_MIN_ROWS)
        if split is None:
            return None
        k = self.ctx.tuning.message_candidates
        part = SharedPart(
            message_fts.search_messages_fts, guild_id, match, k, split, None, vs.rows()
        )
        self._offers.offer(self.ctx.db.read, part)
        return split, part

    def _fill_similarities(
        self, con: Connection, cands: Sequence[_MsgCand], vs: VectorSearch
    ) -> None:
        need = [c for c in cands if c.semantic is None]
        if not need:
            return
        sims = vs.similarities(con, [c.seq for c in need])
        for c in need:
            c.semantic = sims.get(c.seq)

    def _borrow_from_neighbours(
        self,
        con: Connection,
        guild_id: str,
        cands: list[_MsgCand],
        by_seq: dict[int, _MsgCand],
        vs: VectorSearch | None,
        skip: _Skip,
        readings: TextReadings,
    ) -> None:
        """Each of the best ``neighbour_pool`` candidates learns its previous and
        next message in the channel; neighbours not yet candidates join (with
        their cosine, no BM25). Then every candidate borrows the better base
        of its known neighbours."""
        tuning = self.ctx.tuning
        pool = sorted(cands, key=lambda c: -c.base)[: tuning.neighbour_pool]
        gap = tuning.neighbour_gap_s
        adjacent = readings.adjacent(con, guild_id, [(c.seq, c.msg) for c in pool])
        unknown = {n for pair in adjacent.values() for n in pair if n is not None}
        fetched = readings.rows(con, guild_id, [n for n in unknown if n not in by_seq])
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
                if abs(seconds_between(c.msg.created_at, nmsg.created_at)) > gap:
                    continue
                if skip.excludes(nmsg):
                    continue
                links.setdefault(c.seq, set()).add(nseq)
                links.setdefault(nseq, set()).add(c.seq)
                if known is None:
                    nc = _MsgCand(nseq, nmsg, None, None)
                    by_seq[nseq] = nc
                    fresh.append(nc)
        if fresh:
            if vs is not None:
                self._fill_similarities(con, fresh, vs)
            for nc in fresh:
                nc.base = self.ctx.message_weights.base(nc.semantic, 0.0)
            cands.extend(fresh)
        for seq, others in links.items():
            c = by_seq[seq]
            c.neighbour = max(by_seq[o].base for o in others)

    def _rank(
        self,
        plan: QueryPlan,
        cands: list[_MsgCand],
        channel_id: str | None,
        has_sem: bool,
        mode: Mode,
        limit: int,
        gate: ScoringWeights,
        readings: TextReadings,
    ) -> list[tuple[_MsgCand, ScoreParts]]:
        """Score, order, and gate messages.

        Lexical overlap is not fused by default (``MessageWeights.lexical`` is
        0) but the gate and the explanation need it; it is the costly part,
        so it is computed only while walking down the ordered list.
        """
        ctx = self.ctx
        now = ctx.clock()
        half_days = ctx.cfg.recency_half_days
        w = ctx.message_weights
        bm_norm = bm25_normalise([c.bm25_raw for c in cands])
        lexq = LexicalQuery(plan.content, positive=plan.positive)
        eager = w.lexical > 0
        own_story = w.first_person > 0 and asks_for_own_story(plan.text)

        def parts_for(c: _MsgCand, bm: float, lexical: float, first_person: float) -> ScoreParts:
            created = readings.time(c.msg.created_at)
            age = max(0.0, (now - created).total_seconds() / 86400) if created else 0.0
            semantic = (c.semantic if c.semantic is not None else 0.0) if has_sem else None
            return fuse_message(
                semantic=semantic,
                bm25=bm,
                lexical=lexical,
                neighbour=c.neighbour,
                speaker=plan.speaker_weight(c.msg.author_id),
                date=plan.date_score(created),
                recency=recency_score(age, half_days),
                channel=channel_score(c.msg.channel_id, channel_id),
                statement=readings.statement(c.seq, c.msg.content),
                superseded=float(c.superseded),
                first_person=first_person,
                confidence=MESSAGE_CONFIDENCE,
                weights=w,
                gate=gate,
            )

        def quick(c: _MsgCand, bm: float, first_person: float = 0.0) -> float:
            # The order before lexical and explanation: the same sum as
            # fuse_message, without building parts for every candidate.
            # Without a date in the query only recency reads the time.
            created = (
                readings.time(c.msg.created_at) if (w.date and plan.dates) or w.recency else None
            )
            rec = 0.0
            if w.recency and created is not None:
                rec = recency_score(max(0.0, (now - created).total_seconds() / 86400), half_days)
            sem = c.semantic if (has_sem and c.semantic is not None) else 0.0
            return w.combined(
                min(1.0, max(0.0, sem)),
                bm,
                c.neighbour,
                plan.speaker_weight(c.msg.author_id),
                plan.date_score(created),
                readings.statement(c.seq, c.msg.content) if w.statement else 0.0,
                readings.lexical(lexq, c.seq, c.msg.content) if eager else 0.0,
                rec,
                channel_score(c.msg.channel_id, channel_id) if w.channel else 0.0,
                float(c.superseded),
                first_person,
            )

        # Scored without the first-person part first: it reads every word of
        # a message, so it is read only for the candidates it could still
        # move (``memory.retrieval.bounded_order``).
        pre = [((c, bm), quick(c, bm)) for c, bm in zip(cands, bm_norm, strict=True)]
        walk = best_first(
            pre,
            lambda cb: readings.first_person(cb[0].seq, cb[0].msg.content) if own_story else 0.0,
            lambda cb, fp: quick(cb[0], cb[1], fp),
            w.first_person if own_story else 0.0,
        )
        out: list[tuple[_MsgCand, ScoreParts]] = []
        best: list[tuple[_MsgCand, ScoreParts]] = []
        for (c, bm), fp, _ in walk:
            parts = parts_for(c, bm, readings.lexical(lexq, c.seq, c.msg.content), fp)
            if (
                plan.positive
                and parts.passed
                and lexq.only_negated(readings.compacted(c.seq, c.msg.content))
            ):
                # "who studies Greek?" is not answered by "I don't read greek".
                parts = replace(parts, passed=False, negated=1.0)
            if len(best) < limit:
                best.append((c, parts))
            if mode == "all" or parts.passed:
                out.append((c, parts))
            if len(out) >= limit:
                break
        if mode == "fallback" and not out:
            return best
        return out
