"""Hybrid retrieval over the whole guild.

A query is first read (``memory.retrieval.query``): the members it names, the
dates it mentions, and its content — the words left once names are taken
out, which is what gets embedded (a small encoder lets a name swamp the
vector; see ``memory.retrieval.query``). A member may be named as the chat
addresses them rather than by display name ("Hey Kate!" answered by Emi):
such a word reads as that member's name (``memory.retrieval.addressed``).

Facts (``memory.retrieval.facts``): candidates are the guild's nearest active
facts by vector, FTS5 BM25 matches and (for the prompt slice) the subject's
own facts; they are scored with the default fusion and gate
(``memory.retrieval.scoring.fuse``).

Messages (``memory.retrieval.messages``): candidates are the nearest messages
by vector and the BM25 matches (over-fetched, 200 each); each gets a *base*
relevance (cosine + normalised BM25), borrows from its better neighbour in
the same channel (a reply takes meaning from the message it answers), and
gains when its author is the member the query names or its date is one the
query mentions (``memory.retrieval.scoring.fuse_message``). Among the leading
message hits, a member's later restatement of what the query asks takes the
earlier statement's place and score (``memory.retrieval.newer_first``). Facts
and messages share the 0..1 scale of ``combined``, so ``scope="all"`` merges
them by score; there a fact counts as its source message for the same rule
(its author, when it was said), so a member's later message on the topic goes
ahead of the fact their earlier statement gave.

A question that combines several things ("... between my visit to the
dentist and buying the bike?", "What do Kate and Elise both play?") is also
searched part by part (``memory.retrieval.decompose``), each part with its
own plan and embedding, and the parts' rankings are fused into the whole
question's (``memory.retrieval.part_fusion``): search and the prompt slice
alike, each hit's ``parts.decomposed`` and ``parts.query_part`` telling what
that moved and which part found it.

Vector KNN uses an in-memory matrix per (guild, model) and falls back to the
sqlite-vec index while the matrix loads (``memory.retrieval.vector_search``).
The guild filter is always in SQL; channel visibility is applied to
candidates before anything is ranked or borrowed.

``Retriever`` composes the two searches over one ``SearchContext``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memory.clock import Clock, iso
from memory.config import RetrievalConfig
from memory.db.core import Database
from memory.embed.service import EmbeddingService
from memory.models import EPISODE_SUBJECT, LORE_SUBJECT, Hit, PromptSlice, SearchScope
from memory.retrieval.attribution import ATTRIBUTING, NAMED_COVER_WITHIN, NamedQuery
from memory.retrieval.context import Mode, QueryVector, RetrievalTuning, SearchContext
from memory.retrieval.decompose import decompose
from memory.retrieval.facts import FactSearch
from memory.retrieval.filters import FactFilter
from memory.retrieval.message_text import TextReadings
from memory.retrieval.messages import MessageSearch
from memory.retrieval.newer_first import facts_among_messages, facts_to_place
from memory.retrieval.part_fusion import fuse_parts
from memory.retrieval.query import MAX_QUERY_CHARS, QueryPlan
from memory.retrieval.related import slice_related
from memory.retrieval.scoring import (
    DEFAULT_MESSAGE_WEIGHTS,
    DEFAULT_WEIGHTS,
    MessageWeights,
    ScoringWeights,
)
from memory.retrieval.vector_index import VectorIndex
from memory.store.members import authors_of
from memory.text import tokens


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
        self.ctx = SearchContext(db, embeddings, cfg, clock, weights, message_weights, tuning)
        self.facts = FactSearch(self.ctx)
        self.messages = MessageSearch(self.ctx)

    @property
    def index(self) -> VectorIndex:
        """The in-memory vector matrices."""
        return self.ctx.vectors.index

    @property
    def last_timings(self) -> dict[str, float]:
        """The stages of the last search or slice, ms."""
        return self.ctx.timings

    async def nearest_facts(
        self, model: str, guild_id: str, queries: np.ndarray, k: int
    ) -> list[list[tuple[int, float]]] | None:
        """The guild's active facts nearest each query vector (raw cosine), from
        its in-memory matrix; None while that loads (``memory.store.relations``)."""
        return await self.ctx.vectors.nearest_facts(model, guild_id, queries, k)

    async def plan(self, guild_id: str, query: str) -> QueryPlan:
        """How a query is read: named members, dates, content."""
        return await self.ctx.plan(guild_id, query)

    async def members_named(self, guild_id: str, name: str) -> frozenset[str]:
        """The ids of the guild's members whose display name is ``name`` (whole,
        else its first word), or ``name`` itself when it is a member's id."""
        names = await self.ctx.member_names(guild_id)
        if name in names.ids:
            return frozenset({name})
        toks = tuple(tokens(name))
        if not toks:
            return frozenset()
        return names.full.get(toks[:4]) or (
            names.first.get(toks[0], frozenset()) if len(toks) == 1 else frozenset()
        )

    async def warm(self, guild_id: str) -> None:
        """Load the guild's vector matrices and build its lexicons now
        (benchmarks; otherwise lazy)."""
        model = self.ctx.embeddings.model_for_guild(guild_id)
        if model is not None:
            await self.ctx.vectors.warm(model, guild_id)
        await self.ctx.lexicons.warm(guild_id)
        await self.ctx.fact_lexicons.warm(guild_id)

    async def close(self) -> None:
        """Stop matrix loads, drop the matrices and stop the KNN helper threads;
        the retriever still works afterwards (it reloads lazily)."""
        await self.ctx.vectors.close()
        await self.ctx.lexicons.close()
        await self.ctx.fact_lexicons.close()

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
        as_of: datetime | None = None,
        only: FactFilter | None = None,
        subjects: list[str] | None = None,
    ) -> list[Hit]:
        """Hits best first, at most ``limit`` (clamped to 1..search_limit_max).

        With ``gate`` (the default: strict search) only hits that
        pass the relevance gate are returned, maybe none: none at all when no
        passing hit shows the query covered (the embedding model's
        calibration, ``memory.retrieval.gate_calibration``). ``gate=False`` is a
        ranking view: every candidate, best first, whether it passes or not
        (each hit's ``parts.passed`` still tells) — what a retrieval benchmark
        measures, since the gate is a precision choice made after ranking.
        ``as_of``: the facts valid at that time and no message created after
        it (None: current facts, every message). ``only`` filters facts
        (types, observation times) and ``subjects`` restricts them to those
        subjects, both before ranking.
        """
        ctx = self.ctx
        started = time.perf_counter()
        limit = max(1, min(ctx.cfg.search_limit_max, int(limit)))
        query = (query or "")[:MAX_QUERY_CHARS]
        if not query.strip() or not guild_id:
            return []
        at = None if as_of is None else iso(as_of)
        plan = await ctx.plan(guild_id, query, visible_channels, at)
        qv = await ctx.query_vector(guild_id, plan)
        embed_ms = ctx.timings.get("embed_ms", 0.0)  # the whole query's, not a part's
        mode: Mode = "strict" if gate else "all"
        texts = self._parts(plan)
        # Fused rankings are read deeper than the limit (PartFusionRule.depth).
        depth = max(limit, ctx.tuning.part_fusion.depth) if texts else limit
        # The whole question and its parts rank mostly the same messages: each
        # text is read once.
        readings = TextReadings()
        args = (channel_id, depth, scope, mode, visible_channels, at, only, subjects, readings)

        async def part_hits(part: QueryPlan, pqv: QueryVector | None) -> list[Hit]:
            return await self._ranked(guild_id, part, pqv, *args)

        # The parts are searched beside the whole question, not after it: a
        # question in parts then takes about as long as its slowest search.
        parts = (
            asyncio.ensure_future(
                self._parts_ranked(guild_id, texts, part_hits, visible_channels, at)
            )
            if texts
            else None
        )
        try:
            hits = await self._ranked(guild_id, plan, qv, *args)
            calibration = ctx.gates.calibration_for(qv and qv[0])
            covering = hits[:limit]
            if plan.named:
                # A query about members is covered only by a hit about them; the
                # first hits say whether they are (the ranking view too, so it
                # shows why strict search answers nothing).
                about = NamedQuery.of(
                    plan.named,
                    await ctx.member_names(guild_id),
                    plan.content,
                    calibration.cover_named_sem_min,
                    calibration.cover_rival_margin,
                )
                first = about.judged(hits)
                hits[:NAMED_COVER_WITHIN] = first
                covering = [h for h in first if h.parts.about in ATTRIBUTING]
            if gate and not calibration.covers(h.parts for h in covering):
                hits = []  # nothing in memory is about this query (and its members)
            elif gate and plan.positive:
                # "who here studies Greek?": an answer holds what it asks about.
                hits = calibration.without_fillers(hits)
            if hits and parts is not None:
                hits = fuse_parts(hits, await parts, limit, ctx.tuning.part_fusion)
        finally:
            if parts is not None:  # not needed (or failed): stopped, and its outcome read
                parts.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await parts
        ctx.timings["embed_ms"] = embed_ms
        ctx.timings["search_ms"] = (time.perf_counter() - started) * 1000
        return hits[:limit]

    def _parts(self, plan: QueryPlan) -> tuple[str, ...]:
        """The parts the query combines (``memory.retrieval.decompose``); none
        when fusing them is switched off."""
        return decompose(plan.text) if self.ctx.tuning.part_fusion.enabled else ()

    async def _parts_ranked(
        self,
        guild_id: str,
        texts: Sequence[str],
        run: Callable[[QueryPlan, QueryVector | None], Awaitable[list[Hit]]],
        visible_channels: set[str] | None,
        at: str | None,
    ) -> list[tuple[str, list[Hit]]]:
        """The rankings of the query's parts ``texts``, to fuse with the whole
        query's (``memory.retrieval.part_fusion``)."""
        ctx = self.ctx
        started = time.perf_counter()

        async def one(text: str) -> tuple[str, list[Hit]]:
            part = await ctx.plan(guild_id, text, visible_channels, at)
            return text, await run(part, await ctx.query_vector(guild_id, part))

        # The parts are independent searches: their SQL, vector products and
        # embeddings run on the reader and helper threads side by side.
        ranked = list(await asyncio.gather(*(one(text) for text in texts)))
        ctx.timings["parts_ms"] = (time.perf_counter() - started) * 1000
        return ranked

    async def _ranked(
        self,
        guild_id: str,
        plan: QueryPlan,
        qv: QueryVector | None,
        channel_id: str | None,
        limit: int,
        scope: SearchScope,
        mode: Mode,
        visible_channels: set[str] | None,
        at: str | None,
        only: FactFilter | None,
        subjects: list[str] | None,
        readings: TextReadings,
    ) -> list[Hit]:
        """Fact and message hits of one query, best first."""
        searches: list[Coroutine[Any, Any, list[Hit]]] = []
        if scope in ("facts", "all"):
            searches.append(
                self.facts.hits(
                    guild_id,
                    plan,
                    qv,
                    channel_id,
                    subjects,
                    limit,
                    mode,
                    visible_channels,
                    at,
                    only,
                )
            )
        if scope in ("messages", "all"):
            searches.append(
                self.messages.hits(
                    guild_id, plan, qv, channel_id, limit, mode, visible_channels, (), at, readings
                )
            )
        # Side by side: one's SQL and vector product run while the other
        # scores. A failure is raised as it is, and stops the other.
        tasks = [asyncio.ensure_future(s) for s in searches]
        try:
            found = await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
        hits = [h for part in found for h in part]
        hits.sort(key=lambda h: -h.score)
        if len(found) > 1:
            hits = await self._facts_among_messages(guild_id, plan, hits)
        return hits

    async def _facts_among_messages(
        self, guild_id: str, plan: QueryPlan, hits: list[Hit]
    ) -> list[Hit]:
        """Merged ``hits`` with a member's newer message ahead of an older
        fact saying the same thing (``memory.retrieval.newer_first``): the
        authors of the facts' sources are read only when a fact can take part."""
        rule = self.ctx.tuning.newer_first
        sources = facts_to_place(hits, plan.content, rule)
        if not sources:
            return hits
        authors = await self.ctx.db.read(authors_of, guild_id, sources)
        return facts_among_messages(hits, plan.content, authors, rule)

    async def build_prompt_slice(
        self,
        guild_id: str,
        channel_id: str | None,
        user_id: str,
        query: str,
        *,
        visible_channels: set[str] | None = None,
        exclude_message_ids: Sequence[str] = (),
        as_of: datetime | None = None,
        only: FactFilter | None = None,
    ) -> PromptSlice:
        ctx = self.ctx
        at = None if as_of is None else iso(as_of)
        started = time.perf_counter()
        query = (query or "")[:MAX_QUERY_CHARS]
        plan = await ctx.plan(guild_id, query, visible_channels, at)
        qv = await ctx.query_vector(guild_id, plan) if query.strip() else None
        user_facts = await self.facts.hits(
            guild_id,
            plan,
            qv,
            channel_id,
            [user_id],
            ctx.cfg.user_facts,
            "fallback",
            visible_channels,
            at,
            only,
        )
        relevant = await self.facts.hits(
            guild_id,
            plan,
            qv,
            channel_id,
            [user_id, LORE_SUBJECT],
            ctx.cfg.relevant_facts,
            "fallback",
            visible_channels,
            at,
            only,
        )
        # Episodes of every channel the asker can see; the current one ranks first.
        episodes = await self.facts.hits(
            guild_id,
            plan,
            qv,
            channel_id,
            [EPISODE_SUBJECT],
            ctx.cfg.slice_episodes,
            "fallback",
            visible_channels,
            at,
            only,
        )
        if at is None and (user_facts or relevant):
            shown = [int(h.id) for h in (*user_facts, *relevant)]
            relevant = [
                *relevant,
                *await ctx.db.read(
                    slice_related, guild_id, shown, set(shown), visible_channels, only
                ),
            ]
        messages: list[Hit] = []
        if query.strip():
            texts = self._parts(plan)
            limit = ctx.cfg.relevant_messages
            depth = max(limit, ctx.tuning.part_fusion.depth) if texts else limit
            readings = TextReadings()

            async def message_hits(part: QueryPlan, pqv: QueryVector | None) -> list[Hit]:
                return await self.messages.hits(
                    guild_id,
                    part,
                    pqv,
                    channel_id,
                    depth,
                    "fallback",
                    visible_channels,
                    exclude_message_ids,
                    at,
                    readings,
                )

            if texts:  # the parts beside the whole question, as in search
                messages, ranked = await asyncio.gather(
                    message_hits(plan, qv),
                    self._parts_ranked(guild_id, texts, message_hits, visible_channels, at),
                )
                if messages:
                    messages = fuse_parts(messages, ranked, limit, ctx.tuning.part_fusion)
            else:
                messages = await message_hits(plan, qv)
            messages = messages[:limit]
        # Past messages of the same channel come first (stable sort
        # keeps the score order inside each group).
        messages.sort(key=lambda h: h.channel_id != channel_id)
        ctx.timings["slice_ms"] = (time.perf_counter() - started) * 1000
        return PromptSlice(tuple(user_facts), tuple(relevant), tuple(messages), tuple(episodes))
