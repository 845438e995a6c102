"""An in-memory float32 matrix per (kind, model, guild): exact KNN at numpy speed.

sqlite-vec's vec0 scans a 100k-row partition about ten times slower than a
matrix product over the same vectors (``bench/search.py``). So the retriever
keeps, per guild and model, a contiguous matrix of the vectors the vec0 index
holds (active facts; messages), loaded lazily from the blob tables, and uses
vec0 only while a matrix is loading (cold start) or when a partition is too
big for the memory budget (``memory.retrieval.vector_search``).

Coherence. The matrix mirrors the vec0 index exactly: ``memory.store.vectors``
records every change it makes to a vec0 index (vectors written, facts
archived, deleted, re-activated; messages written or forgotten) as a change
event, and the database hands the events of a transaction to ``apply`` once
it has committed (never those of a rolled-back one), in commit order. A
matrix that is still loading queues the changes and replays them once its
snapshot is in (replays are idempotent upserts and removals). Rows of removed
ids are zeroed and skipped; the matrix is compacted when a quarter of it is
dead.

Another process writing the same database file (the CLI's import, forget or
reindex beside a running bot) reports no events; the database only notices
that someone else committed (``ExternalCommit``). A matrix loaded before such
a commit is then reloaded, once it is ``external_reload_s`` old: a reload
reads the whole partition, and an import in another process commits many
times a second. Callers still join candidate ids against the facts table in
SQL, so a stale row can never surface an archived or deleted fact.

Thread safety: searches run on database reader threads, changes arrive on the
thread that committed; each matrix has its own lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memory.db.changes import Change, ExternalCommit, VectorKind, VectorsPut, VectorsRemoved
from memory.db.core import Connection
from memory.store import vectors as store_vectors

log = logging.getLogger(__name__)


def _dot_rows(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``rows @ query`` on one core.

    OpenBLAS splits a matrix-vector product over every core and then waits
    for all of them: when the embedder, the ingest workers or a second search
    keep the cores busy, one descheduled helper thread stalls the whole call,
    so a search is slowest exactly when the bot is busiest. numpy's own einsum
    loop streams the rows on the calling thread (GIL released) at least as
    fast as single-threaded BLAS, and leaves the other cores to the SQL that
    runs beside it (timings: bench/search.py, in bench/results). Same per-row float32 dot product, summed in a different order
    than BLAS: cosines differ from ``@`` in the 7th decimal place.
    """
    if rows.dtype != np.float32 or query.dtype != np.float32:
        return rows @ query  # never happens with our embedders; keep numpy's promotion
    return np.einsum("ij,j->i", rows, query)


@dataclass(frozen=True)
class VectorCacheConfig:
    enabled: bool = True
    max_bytes: int = 1024 * 1024 * 1024  # all matrices together; least recently used go first
    max_rows: int = 400_000  # a bigger partition stays on vec0
    compact_dead_fraction: float = 0.25
    # A matrix loaded before another connection's commit is reloaded once it
    # is this old (see the module docstring).
    external_reload_s: float = 60.0
    # A facts matrix this big gets a coarse index for linking new facts
    # (``memory.retrieval.coarse_index``); below it an exact scan is cheap.
    coarse_min_rows: int = 20_000


class GuildMatrix:
    """The vectors of one (kind, model, guild), one row per id, L2-normalised float32."""

    def __init__(
        self, kind: VectorKind, model: str, guild_id: str, dims: int = 0, epoch: int = 0
    ) -> None:
        self.kind = kind
        self.model = model
        self.guild_id = guild_id
        self.dims = dims
        self.lock = threading.Lock()
        self._vecs = np.zeros((0, dims), dtype=np.float32)
        self._ids = np.zeros(0, dtype=np.int64)
        self._n = 0
        self._row: dict[int, int] = {}
        self._dead = 0
        self.ready = False
        # When its snapshot began, and how many external commits had been
        # noticed then: one noticed later may be missing from it.
        self.started_at = time.monotonic()
        self.epoch = epoch
        self._pending: list[tuple[str, Any]] = []
        self._median: tuple[tuple[int, int], int | None] = ((-1, -1), None)
        # Row numbers hold until the next install (a reload or a compaction):
        # ``layout`` counts installs, ``rewritten`` lists the rows whose vector
        # was replaced since the last one. A structure built over the rows
        # (``memory.retrieval.coarse_index``) reads both to stay exact.
        self.layout = 0
        self.rewritten: list[int] = []

    # -- size ---------------------------------------------------------------------------------
    @property
    def rows(self) -> int:
        return self._n - self._dead

    @property
    def nbytes(self) -> int:
        return int(self._vecs.nbytes + self._ids.nbytes) + 64 * len(self._row)

    # -- loading ------------------------------------------------------------------------------
    def fill(self, ids: np.ndarray, vecs: np.ndarray, dims: int | None = None) -> None:
        """Install a loaded snapshot, then replay changes that arrived meanwhile."""
        with self.lock:
            if dims is not None:
                self.dims = dims
            self._install_locked(ids, vecs)
            pending, self._pending = self._pending, []
            for op, arg in pending:
                if op == "put":
                    self._put_locked(*arg)
                else:
                    self._remove_locked(arg)
            self.ready = True

    def _install_locked(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        n = len(ids)
        cap = max(16, int(n * 1.25) + 16)
        self._vecs = np.zeros((cap, self.dims), dtype=np.float32)
        self._ids = np.full(cap, -1, dtype=np.int64)
        if n:
            self._vecs[:n] = vecs
            self._ids[:n] = ids
        self._n = n
        self._row = {int(i): r for r, i in enumerate(ids.tolist())}
        self._dead = 0
        self.layout += 1
        self.rewritten = []
        # (n, dead) only grows between installs; an install may bring back an
        # earlier pair with other ids, so the cached median is dropped here.
        self._median = ((-1, -1), None)

    # -- changes ------------------------------------------------------------------------------
    def put(self, ids: Sequence[int], vecs: np.ndarray) -> None:
        with self.lock:
            if not self.ready:
                self._pending.append(("put", (list(ids), vecs.copy())))
                return
            self._put_locked(ids, vecs)

    def remove(self, ids: Iterable[int]) -> None:
        with self.lock:
            if not self.ready:
                self._pending.append(("remove", list(ids)))
                return
            self._remove_locked(ids)

    def _put_locked(self, ids: Sequence[int], vecs: np.ndarray) -> None:
        if vecs.ndim != 2 or vecs.shape[1] != self.dims:
            return  # another model's width: never mixed
        for i, v in zip(ids, vecs, strict=True):
            r = self._row.get(int(i))
            if r is None:
                if self._n == len(self._ids):
                    self._grow()
                r = self._n
                self._n += 1
                self._row[int(i)] = r
                self._ids[r] = int(i)
            else:
                self.rewritten.append(r)
            self._vecs[r] = v

    def _remove_locked(self, ids: Iterable[int]) -> None:
        for i in ids:
            r = self._row.pop(int(i), None)
            if r is not None:
                self._vecs[r] = 0.0
                self._ids[r] = -1
                self._dead += 1

    def _grow(self) -> None:
        cap = max(16, len(self._ids) * 2)
        vecs = np.zeros((cap, self.dims), dtype=np.float32)
        ids = np.full(cap, -1, dtype=np.int64)
        vecs[: self._n] = self._vecs[: self._n]
        ids[: self._n] = self._ids[: self._n]
        self._vecs, self._ids = vecs, ids

    def compact_if_needed(self, dead_fraction: float) -> bool:
        """Drop dead rows once they are ``dead_fraction`` of the matrix."""
        with self.lock:
            if not self.ready or self._n == 0 or self._dead < dead_fraction * self._n:
                return False
            keep = self._ids[: self._n] >= 0
            self._install_locked(self._ids[: self._n][keep].copy(), self._vecs[: self._n][keep])
            return True

    # -- search -------------------------------------------------------------------------------
    def top_k(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(id, cosine similarity) of the k most similar live rows, best first."""
        with self.lock:
            n = self._n
            if n == 0 or k <= 0:
                return []
            sims = _dot_rows(self._vecs[:n], query)
            ids = self._ids[:n]
            if self._dead:
                sims = np.where(ids >= 0, sims, -np.inf)
            kk = min(k, n)
            if kk < n:
                part = np.argpartition(-sims, kk - 1)[:kk]
            else:
                part = np.arange(n)
            order = part[np.argsort(-sims[part], kind="stable")]
            return [
                (int(ids[r]), float(sims[r]))
                for r in order.tolist()
                if ids[r] >= 0 and np.isfinite(sims[r])
            ]

    def top_k_many(self, queries: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        """``top_k`` of several queries (rows of ``queries``) in one matrix
        product per block of queries: what linking a batch of new facts reads."""
        out: list[list[tuple[int, float]]] = []
        with self.lock:
            n = self._n
            if n == 0 or k <= 0:
                return [[] for _ in range(len(queries))]
            ids = self._ids[:n]
            # Blocks bound the similarity matrix (64 × 100k rows = 25 MB).
            for start in range(0, len(queries), 64):
                block = queries[start : start + 64]
                sims = (
                    block @ self._vecs[:n].T
                    if len(block) > 1
                    else _dot_rows(self._vecs[:n], block[0])[None, :]
                )
                out.extend(_best(ids, row, k) for row in sims)
        return out

    def top_k_rows(self, query: np.ndarray, rows: np.ndarray, k: int) -> list[tuple[int, float]]:
        """``top_k`` among the given row numbers only (a candidate set)."""
        with self.lock:
            rows = rows[rows < self._n]
            if len(rows) == 0 or k <= 0:
                return []
            sims = _dot_rows(self._vecs[rows], query)
            return _best(self._ids[rows], sims, k)

    def similarities(self, query: np.ndarray, ids: Iterable[int]) -> dict[int, float]:
        """Cosine similarity for the given ids that have a row here."""
        with self.lock:
            pairs = [(int(i), self._row.get(int(i))) for i in ids]
            rows = [(i, r) for i, r in pairs if r is not None]
            if not rows:
                return {}
            idx = np.fromiter((r for _, r in rows), dtype=np.int64, count=len(rows))
            sims = _dot_rows(self._vecs[idx], query)
            return {i: float(s) for (i, _), s in zip(rows, sims.tolist(), strict=True)}

    def median_id(self) -> int | None:
        """The median live id, or None when empty: a point that splits this
        partition's ids into two halves of about the same size (the retriever
        splits a big FTS query there; any split is correct, this one balances
        the halves). Recomputed only after rows were added or removed."""
        with self.lock:
            key = (self._n, self._dead)
            if self._median[0] != key:
                ids = self._ids[: self._n]
                live = ids[ids >= 0]
                value = (
                    int(np.partition(live, len(live) // 2)[len(live) // 2]) if len(live) else None
                )
                self._median = (key, value)
            return self._median[1]

    def row_count(self) -> int:
        """Rows in use, dead ones included (row numbers below it are valid)."""
        return self._n

    def view(self) -> tuple[np.ndarray, int, int, int]:
        """(vectors, rows in use, layout, len(rewritten)) as of now, for a
        structure built over the rows: the array is the live one, not a copy."""
        with self.lock:
            return self._vecs, self._n, self.layout, len(self.rewritten)

    def has(self, item_id: int) -> bool:
        with self.lock:
            return int(item_id) in self._row


def _best(ids: np.ndarray, sims: np.ndarray, k: int) -> list[tuple[int, float]]:
    """(id, similarity) of the ``k`` best live rows, best first."""
    sims = np.where(ids >= 0, sims, -np.inf)
    n = len(sims)
    kk = min(k, n)
    part = np.argpartition(-sims, kk - 1)[:kk] if kk < n else np.arange(n)
    order = part[np.argsort(-sims[part], kind="stable")]
    return [(int(ids[r]), float(sims[r])) for r in order.tolist() if np.isfinite(sims[r])]


class VectorIndex:
    """All matrices of one database, kept coherent by the database's change
    events (``apply``, subscribed by ``memory.retrieval.vector_search``)."""

    def __init__(self, cfg: VectorCacheConfig | None = None) -> None:
        self.cfg = cfg or VectorCacheConfig()
        self._lock = threading.Lock()
        self._mats: OrderedDict[tuple[VectorKind, str, str], GuildMatrix] = OrderedDict()
        self._too_big: set[tuple[VectorKind, str, str]] = set()
        self._external = 0  # other connections' commits noticed so far
        self.loads = 0

    def clear(self) -> None:
        with self._lock:
            self._mats.clear()
            self._too_big.clear()

    # -- lookup -------------------------------------------------------------------------------
    def get(self, kind: VectorKind, model: str, guild_id: str) -> GuildMatrix | None:
        """A ready matrix, or None (not loaded yet, loading, or too big)."""
        key = (kind, model, guild_id)
        with self._lock:
            m = self._mats.get(key)
            if m is not None:
                self._mats.move_to_end(key)
            external = self._external
        if m is None or not m.ready:
            return None
        if m.epoch != external and time.monotonic() - m.started_at >= self.cfg.external_reload_s:
            with self._lock:
                if self._mats.get(key) is m:
                    del self._mats[key]  # reloaded on next use
            return None
        return m

    def needs_load(self, kind: VectorKind, model: str, guild_id: str) -> bool:
        if not self.cfg.enabled:
            return False
        key = (kind, model, guild_id)
        with self._lock:
            return key not in self._mats and key not in self._too_big

    def load(
        self, con: Connection, kind: VectorKind, model: str, guild_id: str
    ) -> GuildMatrix | None:
        """Read one partition's vectors (run on a reader thread). Idempotent.

        The matrix is registered before the first SELECT opens the read
        snapshot, so every change committed after the snapshot is queued.
        """
        key = (kind, model, guild_id)
        with self._lock:
            if key in self._mats or key in self._too_big:
                return self._mats.get(key)
            m = GuildMatrix(kind, model, guild_id, epoch=self._external)
            self._mats[key] = m
        try:
            dims = store_vectors.model_dims(con, model)
            rows = store_vectors.count_vectors(con, kind, model, guild_id) if dims else 0
            if dims is None or rows > self.cfg.max_rows or rows * dims * 4 > self.cfg.max_bytes:
                with self._lock:
                    self._mats.pop(key, None)
                    if dims is not None:
                        self._too_big.add(key)
                if dims is not None:
                    log.info("vector cache: %s of %s has %d rows; using vec0", kind, guild_id, rows)
                return None
            ids, vecs = store_vectors.load_vectors(con, kind, model, guild_id, dims)
        except BaseException:
            with self._lock:
                if self._mats.get(key) is m:
                    del self._mats[key]
            raise
        m.fill(ids, vecs, dims)
        self.loads += 1
        self._evict()
        return m

    def _evict(self) -> None:
        with self._lock:
            total = sum(m.nbytes for m in self._mats.values())
            while total > self.cfg.max_bytes and len(self._mats) > 1:
                _, old = self._mats.popitem(last=False)
                total -= old.nbytes

    def stats(self) -> dict[str, Any]:
        with self._lock:
            mats = list(self._mats.values())
        return {
            "matrices": len(mats),
            "rows": sum(m.rows for m in mats),
            "bytes": sum(m.nbytes for m in mats),
            "loads": self.loads,
        }

    # -- change events --------------------------------------------------------------------------
    def apply(self, changes: Sequence[Change]) -> None:
        """Follow one committed transaction's changes (a database subscriber)."""
        for change in changes:
            if isinstance(change, VectorsPut):
                self._put(change)
            elif isinstance(change, VectorsRemoved):
                for m in self._matching(change.kind, None, None):
                    m.remove(change.ids)
            elif isinstance(change, ExternalCommit):
                with self._lock:
                    if change.vector_guilds is None:
                        self._external += 1  # any matrix may be out of date
                    else:
                        # Only these guilds' vectors changed: their matrices
                        # load again on next use, the others stay.
                        for key in [k for k in self._mats if k[2] in change.vector_guilds]:
                            del self._mats[key]

    def _put(self, change: VectorsPut) -> None:
        mats = self._matching(change.kind, change.model, change.guild_id)
        if not mats or not change.ids:
            return
        vecs = np.frombuffer(b"".join(change.blobs), dtype=np.float32)
        vecs = vecs.reshape(len(change.ids), -1)
        for m in mats:
            m.put(change.ids, vecs)

    def _matching(
        self, kind: VectorKind, model: str | None, guild_id: str | None
    ) -> list[GuildMatrix]:
        with self._lock:
            return [
                m
                for (k, mo, g), m in self._mats.items()
                if k == kind
                and (model is None or mo == model)
                and (guild_id is None or g == guild_id)
            ]
