"""A coarse (inverted-file) index over one guild's vector matrix: the rows a
query must read, instead of all of them.

Linking a new fact to its related facts (``memory.store.relations``) asks for
the guild's nearest facts. An exact scan reads every row of the guild's
matrix: at 100k facts of 384 floats that is 150 MB, about 16 ms a fact on
one core, ten times the cost of 10k. Here the rows are clustered once
(spherical k-means, about √n centroids, trained on a sample) and a query
reads the rows of the clusters nearest it (``probes``: a tenth of them) —
about a tenth of the matrix — plus every row the clustering does not describe: rows added, or
whose vector was replaced, since it was built (``GuildMatrix.rewritten``).
A true neighbour is missed only when it lies in a cluster whose centroid is
further from the query than ``probes`` others; ``bench/big_guild.py``
measures the edges this loses against the exact scan.

Built from the live matrix on a helper thread, without copying it: a row
rewritten while the build reads it is in ``rewritten`` and read exactly at
query time, a removed row is skipped by its id. An install (a reload or a
compaction renumbers the rows) makes the index useless; it is rebuilt when
the rows it does not describe pass a fifth of those it does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from memory.retrieval.vector_index import GuildMatrix

MIN_ROWS = 20_000  # below this an exact scan costs about 2 ms (VectorCacheConfig)
STALE_FRACTION = 0.2  # rows it does not describe, before a rebuild
TRAIN_PER_LIST = 48  # training sample: this many rows per centroid
ITERATIONS = 8
BLOCK = 8192  # rows assigned per matrix product


@dataclass(frozen=True)
class CoarseIndex:
    """Clusters of one matrix's rows, as of one build."""

    layout: int  # the matrix's layout it was built for
    built_rows: int  # rows 0..built_rows-1 are clustered
    rewritten_mark: int  # entries of the matrix's ``rewritten`` it already saw
    centroids: np.ndarray  # (lists, dims), L2-normalised
    order: np.ndarray  # row numbers grouped by cluster
    offsets: np.ndarray  # cluster c holds order[offsets[c]:offsets[c + 1]]
    probes: int

    def usable(self, matrix: GuildMatrix) -> bool:
        return matrix.layout == self.layout

    def stale(self, matrix: GuildMatrix) -> bool:
        """Enough rows are outside the clustering that a rebuild pays."""
        if not self.usable(matrix):
            return True
        outside = matrix.row_count() - self.built_rows
        outside += len(matrix.rewritten) - self.rewritten_mark
        return outside > STALE_FRACTION * self.built_rows

    def candidates(self, matrix: GuildMatrix, query: np.ndarray) -> np.ndarray:
        """The row numbers a query reads: its nearest clusters' rows, and the
        rows the clustering does not describe."""
        near = self.centroids @ query
        probes = min(self.probes, len(near))
        lists = np.argpartition(-near, probes - 1)[:probes]
        parts = [self.order[self.offsets[c] : self.offsets[c + 1]] for c in lists.tolist()]
        n = matrix.row_count()
        if n > self.built_rows:
            parts.append(np.arange(self.built_rows, n, dtype=np.int64))
        if len(matrix.rewritten) > self.rewritten_mark:
            parts.append(np.asarray(matrix.rewritten[self.rewritten_mark :], dtype=np.int64))
        return np.unique(np.concatenate(parts))

    def top_k(self, matrix: GuildMatrix, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        return matrix.top_k_rows(query, self.candidates(matrix, query), k)


def lists_for(rows: int) -> int:
    return max(16, int(math.sqrt(rows)))


def probes_for(lists: int) -> int:
    # A tenth of the clusters (32 of 316 at 100k rows), at least 8: on 44k
    # real chat turns under MiniLM that keeps 99.0 % of the exact scan's
    # edges (a sixteenth: 98.1 %; bench/coarse_recall.py).
    return max(8, math.ceil(lists / 10))


def build(matrix: GuildMatrix, seed: int = 0, min_rows: int = MIN_ROWS) -> CoarseIndex | None:
    """Cluster the matrix's rows as they are now (None when it is small)."""
    vecs, n, layout, mark = matrix.view()
    if n < min_rows:
        return None
    rng = np.random.default_rng(seed)
    lists = lists_for(n)
    sample = vecs[np.sort(rng.choice(n, size=min(n, TRAIN_PER_LIST * lists), replace=False))]
    centroids = sample[rng.choice(len(sample), size=lists, replace=False)].copy()
    for _ in range(ITERATIONS):
        assign = np.argmax(sample @ centroids.T, axis=1)
        onehot = np.zeros((len(sample), lists), dtype=np.float32)
        onehot[np.arange(len(sample)), assign] = 1.0
        sums = onehot.T @ sample
        counts = np.bincount(assign, minlength=lists)
        empty = counts == 0
        # An empty cluster starts again from a random sample row.
        sums[empty] = sample[rng.choice(len(sample), size=int(empty.sum()))]
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centroids = (sums / np.maximum(norms, 1e-12)).astype(np.float32)
    assign = np.concatenate(
        [np.argmax(vecs[s : min(n, s + BLOCK)] @ centroids.T, axis=1) for s in range(0, n, BLOCK)]
    )
    order = np.argsort(assign, kind="stable").astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(assign, minlength=lists))])
    return CoarseIndex(layout, n, mark, centroids, order, offsets, probes_for(lists))
