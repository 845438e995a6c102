"""Vector search for one query, behind one protocol (``VectorSearch``).

Two implementations answer it with the same numbers (cosine similarity of
L2-normalised float32 vectors):

- ``MatrixSearch``: the guild's in-memory matrix (``memory.retrieval.vector_index``);
- ``Vec0Search``: sqlite-vec's vec0 index, the slow path — while the guild's
  matrix is loading (cold start), or when its partition is over the memory
  budget. It reads nothing into memory and is exact, but scans the partition
  in SQLite, several times slower than the matrix product at 100k rows.

``Vectors`` picks one per query, starts matrix loads, keeps the index
coherent (a database change subscriber) and owns the helper threads that run
a big matrix product beside the SQL of the same search.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

import numpy as np

from memory.db.changes import VectorKind
from memory.db.core import Connection, Database
from memory.embed.base import (
    blob_to_vector,
    rescale_similarity,
    similarity_floor,
    vector_to_blob,
)
from memory.retrieval import coarse_index
from memory.retrieval.coarse_index import CoarseIndex
from memory.retrieval.vector_index import GuildMatrix, VectorCacheConfig, VectorIndex
from memory.store import vectors as store_vectors

log = logging.getLogger(__name__)

T = TypeVar("T")
Neighbours = list[tuple[int, float]]  # (id, cosine similarity), best first
KINDS: tuple[VectorKind, ...] = ("facts", "messages")


class VectorSearch(Protocol):
    """The vectors of one (kind, model, guild) searched with one query vector."""

    def nearest(self, con: Connection, k: int) -> Neighbours:
        """The ``k`` most similar ids."""
        ...

    def start_nearest(self, con: Connection, k: int) -> Future[Neighbours]:
        """``nearest``, maybe running on a helper thread while the caller runs
        SQL on ``con``; the caller takes ``result()`` before ``con`` is used up."""
        ...

    def similarities(self, con: Connection, ids: Sequence[int]) -> dict[int, float]:
        """The similarity of every id in ``ids`` that has a vector (ids without
        one are left out: they need embedding)."""
        ...

    def split_id(self, min_rows: int) -> int | None:
        """An id that splits the partition into two halves of about the same
        size, if it has at least ``min_rows`` rows and its ids are at hand."""
        ...

    def rows(self) -> int | None:
        """How many vectors the partition holds, if that is at hand."""
        ...


class RescaledSearch:
    """Another search's similarities on the common scale: a model whose
    cosines crowd near 1 (``memory.embed.base.similarity_floor``) reads like
    one that gives unrelated texts 0. The order of ids is unchanged."""

    def __init__(self, inner: VectorSearch, floor: float) -> None:
        self.inner = inner
        self.floor = floor

    def _scale(self, found: Neighbours) -> Neighbours:
        return [(i, rescale_similarity(s, self.floor)) for i, s in found]

    def nearest(self, con: Connection, k: int) -> Neighbours:
        return self._scale(self.inner.nearest(con, k))

    def start_nearest(self, con: Connection, k: int) -> Future[Neighbours]:
        inner = self.inner.start_nearest(con, k)
        out: Future[Neighbours] = Future()

        def done(f: Future[Neighbours]) -> None:
            try:
                out.set_result(self._scale(f.result()))
            except BaseException as exc:  # handed on to whoever takes the result
                out.set_exception(exc)

        inner.add_done_callback(done)
        return out

    def similarities(self, con: Connection, ids: Sequence[int]) -> dict[int, float]:
        found = self.inner.similarities(con, ids)
        return {i: rescale_similarity(s, self.floor) for i, s in found.items()}

    def split_id(self, min_rows: int) -> int | None:
        return self.inner.split_id(min_rows)

    def rows(self) -> int | None:
        return self.inner.rows()


def _on_common_scale(model: str, search: VectorSearch) -> VectorSearch:
    floor = similarity_floor(model)
    return RescaledSearch(search, floor) if floor else search


def _done(fn: Callable[[], T]) -> Future[T]:
    fut: Future[T] = Future()
    try:
        fut.set_result(fn())
    except Exception as exc:
        fut.set_exception(exc)
    return fut


def _stored_similarities(
    con: Connection, kind: VectorKind, model: str, query: np.ndarray, ids: Sequence[int]
) -> dict[int, float]:
    stored = store_vectors.stored_vectors(con, kind, model, ids)
    return {i: float(np.dot(blob_to_vector(blob), query)) for i, blob in stored.items()}


class Vec0Search:
    """The slow path: sqlite-vec's KNN over the guild's partition, stored blobs
    for the similarity of given ids."""

    def __init__(self, kind: VectorKind, model: str, guild_id: str, query: np.ndarray) -> None:
        self.kind = kind
        self.model = model
        self.guild_id = guild_id
        self.query = query

    def nearest(self, con: Connection, k: int) -> Neighbours:
        blob = vector_to_blob(self.query)
        found = store_vectors.knn(con, self.kind, self.model, self.guild_id, blob, k)
        return [(i, 1.0 - distance) for i, distance in found]

    def start_nearest(self, con: Connection, k: int) -> Future[Neighbours]:
        return _done(lambda: self.nearest(con, k))  # one connection: nothing to overlap

    def similarities(self, con: Connection, ids: Sequence[int]) -> dict[int, float]:
        return _stored_similarities(con, self.kind, self.model, self.query, ids)

    def split_id(self, min_rows: int) -> int | None:
        return None

    def rows(self) -> int | None:
        return None  # counting the partition would cost a scan


class MatrixSearch:
    """The in-memory matrix; ids it does not hold (yet) fall back to stored blobs."""

    def __init__(
        self,
        matrix: GuildMatrix,
        query: np.ndarray,
        *,
        submit: Callable[..., Future[Neighbours]],
        overlap_min_rows: int,
        compact_dead_fraction: float,
    ) -> None:
        self.matrix = matrix
        self.query = query
        self._submit = submit
        self._overlap_min_rows = overlap_min_rows
        self._compact = compact_dead_fraction

    def nearest(self, con: Connection, k: int) -> Neighbours:
        self.matrix.compact_if_needed(self._compact)
        return self.matrix.top_k(self.query, k)

    def start_nearest(self, con: Connection, k: int) -> Future[Neighbours]:
        self.matrix.compact_if_needed(self._compact)
        if self.matrix.rows < self._overlap_min_rows:
            # A small product takes well under a millisecond: not worth a thread hop.
            return _done(lambda: self.matrix.top_k(self.query, k))
        return self._submit(self.matrix.top_k, self.query, k)

    def similarities(self, con: Connection, ids: Sequence[int]) -> dict[int, float]:
        sims = self.matrix.similarities(self.query, ids)
        rest = [i for i in ids if i not in sims]
        if rest:
            m = self.matrix
            sims.update(_stored_similarities(con, m.kind, m.model, self.query, rest))
        return sims

    def split_id(self, min_rows: int) -> int | None:
        if self.matrix.rows < min_rows:
            return None
        return self.matrix.median_id()

    def rows(self) -> int | None:
        return self.matrix.rows


class Vectors:
    """Picks the vector search of each query and keeps what it needs: the
    matrices (loaded lazily, kept coherent through the database's change
    events) and the helper threads of big products."""

    def __init__(self, db: Database, cfg: VectorCacheConfig, *, overlap_min_rows: int) -> None:
        self.db = db
        self.cfg = cfg
        self.index = VectorIndex(cfg)
        self.overlap_min_rows = overlap_min_rows
        self._unsubscribe: Callable[[], None] | None = None
        self._loads: dict[tuple[VectorKind, str, str], asyncio.Task[Any]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._closed = False
        # Coarse indexes of big fact matrices, and their builds under way.
        self._coarse: dict[tuple[str, str], CoarseIndex] = {}
        self._coarse_builds: dict[tuple[str, str], asyncio.Task[Any]] = {}

    async def nearest_facts(
        self, model: str, guild_id: str, queries: np.ndarray, k: int
    ) -> list[Neighbours] | None:
        """The ``k`` facts nearest each row of ``queries`` (raw cosine, best
        first), from the guild's matrix: exactly while it is small, through its
        coarse index once it is big (``memory.retrieval.coarse_index``). None
        while the matrix is not loaded (its load starts): the caller reads vec0."""
        self._attach()
        mat = self.index.get("facts", model, guild_id)
        if mat is None:
            self._ensure_loading("facts", model, guild_id)
            return None
        coarse = self._coarse_for(mat)
        if coarse is None:
            return await asyncio.to_thread(mat.top_k_many, queries, k)
        return await asyncio.to_thread(lambda: [coarse.top_k(mat, q, k) for q in queries])

    def coarse(self, model: str, guild_id: str) -> CoarseIndex | None:
        """The guild's facts coarse index, if one is built."""
        return self._coarse.get((model, guild_id))

    async def settle(self) -> None:
        """Wait for the matrix loads and coarse-index builds under way."""
        for task in [*self._loads.values(), *self._coarse_builds.values()]:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)

    def _coarse_for(self, mat: GuildMatrix) -> CoarseIndex | None:
        """The matrix's coarse index if it has a usable one; a build starts
        when it has none or the one it has is stale."""
        key = (mat.model, mat.guild_id)
        found = self._coarse.get(key)
        if found is not None and not found.usable(mat):
            found = None
            del self._coarse[key]
        if mat.row_count() < self.cfg.coarse_min_rows:
            return found
        if found is None or found.stale(mat):
            task = self._coarse_builds.get(key)
            if task is None or task.done():
                self._coarse_builds[key] = asyncio.get_running_loop().create_task(
                    self._build_coarse(key, mat)
                )
        return found

    async def _build_coarse(self, key: tuple[str, str], mat: GuildMatrix) -> None:
        try:
            built = await asyncio.to_thread(
                coarse_index.build, mat, min_rows=self.cfg.coarse_min_rows
            )
        except Exception as exc:  # the exact scan keeps working
            log.warning("coarse index build failed for %s: %s", key[1], exc)
            return
        finally:
            self._coarse_builds.pop(key, None)
        if built is not None and self.index.get("facts", *key) is mat:
            self._coarse[key] = built

    def search(
        self, kind: VectorKind, model: str, guild_id: str, query: np.ndarray
    ) -> VectorSearch:
        """The matrix when it is ready; vec0 otherwise (and a load starts)."""
        self._attach()
        mat = self.index.get(kind, model, guild_id)
        if mat is None:
            self._ensure_loading(kind, model, guild_id)
            return _on_common_scale(model, Vec0Search(kind, model, guild_id, query))
        return _on_common_scale(
            model,
            MatrixSearch(
                mat,
                query,
                submit=self._submit,
                overlap_min_rows=self.overlap_min_rows,
                compact_dead_fraction=self.cfg.compact_dead_fraction,
            ),
        )

    def stored(
        self, kind: VectorKind, model: str, guild_id: str, query: np.ndarray
    ) -> VectorSearch:
        """The slow path whatever the matrices hold, starting no load."""
        return _on_common_scale(model, Vec0Search(kind, model, guild_id, query))

    async def warm(self, model: str, guild_id: str) -> None:
        """Load the guild's matrices now (benchmarks; otherwise lazy)."""
        self._attach()
        for kind in KINDS:
            task = self._ensure_loading(kind, model, guild_id)
            if task is not None:
                await asyncio.shield(task)

    async def close(self) -> None:
        """Stop loads in progress, drop the matrices (a big guild's are hundreds
        of MB, and a closed engine may live on or be started again: then they
        reload lazily), stop following changes and stop the helper threads."""
        tasks = [t for t in self._loads.values() if not t.done()]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._loads.clear()
        builds = [t for t in self._coarse_builds.values() if not t.done()]
        for t in builds:
            t.cancel()
        for t in builds:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._coarse.clear()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.index.clear()
        with self._pool_lock:
            pool, self._pool = self._pool, None
            self._closed = True
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, wait=True)

    @property
    def helper_threads_running(self) -> bool:
        with self._pool_lock:
            return self._pool is not None

    def _attach(self) -> None:
        """Follow the database's changes before any matrix is registered."""
        with self._pool_lock:
            self._closed = False
        if self._unsubscribe is not None or not self.cfg.enabled:
            return
        self._unsubscribe = self.db.subscribe(self.index.apply)
        # A load still running when the index was closed may have put a matrix
        # in it since, one that missed changes: start from nothing.
        self.index.clear()

    def _submit(self, fn: Callable[..., Neighbours], *args: Any) -> Future[Neighbours]:
        with self._pool_lock:
            if self._pool is None and not self._closed:
                # One per database reader thread (Database readers=2 by default).
                self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="guildlore-knn")
            if self._pool is not None:
                return self._pool.submit(fn, *args)
        return _done(lambda: fn(*args))  # closing: a search still in flight runs it itself

    def _ensure_loading(
        self, kind: VectorKind, model: str, guild_id: str
    ) -> asyncio.Task[Any] | None:
        key = (kind, model, guild_id)
        task = self._loads.get(key)
        if task is not None and not task.done():
            return task
        if not self.index.needs_load(kind, model, guild_id):
            return None
        task = asyncio.get_running_loop().create_task(self._load(kind, model, guild_id))
        self._loads[key] = task
        return task

    async def _load(self, kind: VectorKind, model: str, guild_id: str) -> None:
        try:
            await self.db.read(self.index.load, kind, model, guild_id)
        except Exception as exc:  # the vec0 path keeps working
            log.warning("vector cache load failed for %s/%s: %s", kind, guild_id, exc)
        finally:
            self._loads.pop((kind, model, guild_id), None)
