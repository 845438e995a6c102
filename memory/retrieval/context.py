"""What every part of the retriever shares (``memory.retrieval``): tuning, the
query's reading and vector, member names, the in-memory vector matrices, and
the final ranking step."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np

from memory.clock import Clock
from memory.config import RetrievalConfig
from memory.embed.service import EmbeddingService
from memory.models import ScoreParts
from memory.retrieval.query import EMPTY_NAMES, MemberNames, QueryPlan, plan_query
from memory.retrieval.scoring import (
    DEFAULT_MESSAGE_WEIGHTS,
    DEFAULT_WEIGHTS,
    MessageWeights,
    ScoringWeights,
    rank,
)
from memory.retrieval.vector_index import GuildMatrix, VectorCacheConfig, VectorIndex
from memory.store.db import Database
from memory.store.search import member_rows

log = logging.getLogger("memory.retrieval.retriever")

QueryVector = tuple[str, np.ndarray]
# strict: passing hits only (search); fallback: passing, else the best (prompt
# slice); all: every candidate by score (ranking view).
Mode = Literal["strict", "fallback", "all"]
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


class RetrieverBase:
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
        self._offers: set[asyncio.Future[None]] = set()  # see Retriever._split_fts

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

    async def close(self) -> None:
        """Stop matrix loads in progress and drop the cached matrices: a big
        guild's are hundreds of MB, and an engine that was closed may live on
        (tests, the CLI) or be started again (then they reload lazily)."""
        tasks = [t for t in self._loads.values() if not t.done()]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._loads.clear()
        self.index.clear()

    # -- shared ---------------------------------------------------------------------------
    def _rank(
        self, scored: list[tuple[_C, ScoreParts]], mode: Mode, limit: int
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
        rows = await self.db.read(member_rows, guild_id)
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
