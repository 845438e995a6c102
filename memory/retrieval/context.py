"""What fact search and message search share (``SearchContext``): the
database, the embeddings, the limits and tuning, the clock, member names, the
vector searches, and the final ranking step."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import numpy as np

from memory.clock import Clock
from memory.config import RetrievalConfig
from memory.db.changes import VectorKind
from memory.db.core import Database
from memory.embed.service import EmbeddingService
from memory.models import ScoreParts
from memory.retrieval.addressed import (
    DEFAULT_ADDRESS_RULE,
    AddressedNames,
    AddressRule,
    with_names,
    without_words,
)
from memory.retrieval.fact_lexicon import FactLexicon
from memory.retrieval.gate_calibration import GateTable
from memory.retrieval.lexicon import GuildLexicon
from memory.retrieval.lexicons import LexiconConfig, Lexicons
from memory.retrieval.newer_first import DEFAULT_NEWER_FIRST, NewerFirstRule
from memory.retrieval.part_fusion import DEFAULT_PART_FUSION, PartFusionRule
from memory.retrieval.query import EMPTY_NAMES, MemberNames, QueryPlan, plan_query
from memory.retrieval.scoring import (
    DEFAULT_MESSAGE_WEIGHTS,
    DEFAULT_WEIGHTS,
    MessageWeights,
    ScoringWeights,
    rank,
)
from memory.retrieval.vector_index import VectorCacheConfig
from memory.retrieval.vector_search import Vectors, VectorSearch
from memory.store.search import member_rows

QueryVector = tuple[str, np.ndarray]  # (model, L2-normalised query vector)
# strict: passing hits only (search); fallback: passing, else the best (prompt
# slice); all: every candidate by score (ranking view).
Mode = Literal["strict", "fallback", "all"]
_C = TypeVar("_C")


@dataclass(frozen=True)
class RetrievalTuning:
    """Candidate counts, caches, the newer-first rule, names by address and
    the fusion of a query's parts (``RetrievalConfig`` holds the configured
    limits)."""

    message_candidates: int = 200  # nearest messages and BM25 matches, each
    fact_overfetch: int = 16  # extra KNN slots in case a cached row went stale
    neighbour_pool: int = 100  # best messages whose channel neighbours are fetched
    neighbour_gap_s: float = 7200.0  # messages further apart are not neighbours
    names_ttl_s: float = 60.0  # member display names are re-read this often
    # A matrix at least this big runs its product on a helper thread, beside
    # the search's SQL; below it the product takes well under a millisecond.
    knn_overlap_min_rows: int = 20_000
    vector_cache: VectorCacheConfig = field(default_factory=VectorCacheConfig)
    lexicon: LexiconConfig = field(default_factory=LexiconConfig)  # messages' BM25 in memory
    fact_lexicon: LexiconConfig = field(default_factory=LexiconConfig)  # facts' BM25 in memory
    newer_first: NewerFirstRule = DEFAULT_NEWER_FIRST
    addressed: AddressRule = DEFAULT_ADDRESS_RULE
    part_fusion: PartFusionRule = DEFAULT_PART_FUSION


class SearchContext:
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
        self.gates = GateTable(weights, cfg.gate_calibration)
        self.message_weights = message_weights
        self.tuning = tuning or RetrievalTuning()
        self.vectors = Vectors(
            db, self.tuning.vector_cache, overlap_min_rows=self.tuning.knn_overlap_min_rows
        )
        self.lexicons = Lexicons(db, GuildLexicon, self.tuning.lexicon, "message")
        self.fact_lexicons = Lexicons(db, FactLexicon, self.tuning.fact_lexicon, "fact")
        self.timings: dict[str, float] = {}  # of the last search, ms by stage
        self._names: dict[str, tuple[float, MemberNames]] = {}
        self.addressed = AddressedNames(
            db, self.tuning.names_ttl_s, self.tuning.neighbour_gap_s, self.tuning.addressed
        )

    async def plan(
        self,
        guild_id: str,
        query: str,
        visible: set[str] | None = None,
        as_of: str | None = None,
    ) -> QueryPlan:
        """How a query is read: named members, dates, content (see
        ``memory.retrieval.query``); ``visible``: the channels whose messages
        may tell what a name means (None: all), as written by ``as_of`` (None:
        everything)."""
        names = await self.member_names(guild_id)
        # A member may be named as the chat addresses them, not as displayed.
        found = await self.addressed.resolve_words(guild_id, query, names, visible, as_of)
        if not found:
            return plan_query(query, names, self.clock())
        plan = plan_query(query, with_names(names, found), self.clock())
        return without_words(plan, found) if self.tuning.addressed.drop_from_match else plan

    async def member_names(self, guild_id: str) -> MemberNames:
        if not guild_id:
            return EMPTY_NAMES
        now = time.monotonic()
        cached = self._names.get(guild_id)
        if cached is not None and now - cached[0] < self.tuning.names_ttl_s:
            return cached[1]
        rows = await self.db.read(member_rows, guild_id)
        names = MemberNames.build(rows)
        self._names[guild_id] = (now, names)
        return names

    async def query_vector(self, guild_id: str, plan: QueryPlan) -> QueryVector | None:
        started = time.perf_counter()
        qv = await self.embeddings.embed_query(guild_id, plan.content)
        if qv is None and plan.content != plan.text:
            qv = await self.embeddings.embed_query(guild_id, plan.text)
        self.timings["embed_ms"] = (time.perf_counter() - started) * 1000
        return qv

    def vector_search(
        self, kind: VectorKind, qv: QueryVector | None, guild_id: str, *, in_memory: bool = True
    ) -> VectorSearch | None:
        """How this query's vector is searched; None without a query vector.
        ``in_memory=False``: the stored vectors only (no matrix, no load)."""
        if qv is None:
            return None
        model, vec = qv
        if not in_memory:
            return self.vectors.stored(kind, model, guild_id, vec)
        return self.vectors.search(kind, model, guild_id, vec)

    def gate_weights(self, qv: QueryVector | None) -> ScoringWeights:
        """The fusion weights with the gate calibrated for the query vector's model."""
        return self.gates.weights_for(None if qv is None else qv[0])

    def rank(
        self,
        scored: list[tuple[_C, ScoreParts]],
        mode: Mode,
        limit: int,
        weights: ScoringWeights | None = None,
    ) -> list[tuple[_C, ScoreParts]]:
        if mode == "all":
            ordered = sorted(scored, key=lambda c: (-c[1].combined, -c[1].lexical))
            return ordered[: max(0, limit)]
        w = self.weights if weights is None else weights
        return rank(scored, strict=mode == "strict", limit=limit, weights=w)
