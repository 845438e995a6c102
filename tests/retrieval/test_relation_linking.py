"""Linking a written fact reads the guild's in-memory matrix, and once the
guild is big its coarse index, instead of scanning sqlite-vec's partition:
the same edges as sqlite-vec's KNN while exact, the rows a query reads a few
percent of the matrix once coarse, every row the clustering does not
describe (added, rewritten since the build) still found."""

from __future__ import annotations

from typing import Any

import numpy as np

from memory.retrieval import coarse_index
from memory.retrieval.context import RetrievalTuning
from memory.retrieval.retriever import Retriever
from memory.retrieval.vector_index import GuildMatrix, VectorCacheConfig
from memory.store.relations import MAX_LINKS, links_of, neighbours
from memory.store.vectors import stored_vectors
from tests.helpers import ALICE, GUILD
from tests.retrieval.test_relations import CLOSE, FAR, edges, lore
from tests.retrieval.test_retrieval import insert_facts


def _clustered(n: int, dims: int, centres: int, seed: int) -> np.ndarray:
    """Unit vectors around ``centres`` random directions (chat facts cluster by topic)."""
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, dims))
    v = c[rng.integers(0, centres, n)] + rng.normal(scale=0.35, size=(n, dims))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _matrix(vecs: np.ndarray) -> GuildMatrix:
    m = GuildMatrix("facts", "model", GUILD, vecs.shape[1])
    m.fill(np.arange(1, len(vecs) + 1, dtype=np.int64), vecs)
    return m


async def test_linking_from_the_matrix_writes_the_edges_sqlite_vec_would(
    make_memory: Any,
) -> None:
    mem = await make_memory()
    ids = [await lore(mem, line) for line in CLOSE]
    far = await lore(mem, FAR)
    assert await mem.embeddings.settle()
    model = mem.embeddings.model_for_guild(GUILD)
    assert model is not None
    await mem.retriever.warm(GUILD)
    blobs = await mem.db.read(stored_vectors, "facts", model, [*ids, far])
    for fid, blob in blobs.items():
        from_vec0 = await mem.db.read(neighbours, model, GUILD, fid, blob)
        queries = np.frombuffer(blob, dtype=np.float32)[None, :]
        near = await mem.retriever.nearest_facts(model, GUILD, queries, MAX_LINKS + 1)
        assert near is not None  # the matrix is loaded: no sqlite-vec scan
        from_matrix = links_of(fid, near[0])
        assert [o for o, _ in from_matrix] == [o for o, _ in from_vec0]
        assert np.allclose([s for _, s in from_matrix], [s for _, s in from_vec0], atol=2e-4)
    # A fact written now is linked through the matrix, to the same neighbours.
    asked: list[bool] = []
    linker = mem.embeddings.nearest_facts
    assert linker is not None

    async def recording(*args: Any) -> Any:
        found = await linker(*args)
        asked.append(found is not None)
        return found

    mem.embeddings.nearest_facts = recording
    newest = await lore(mem, "the roster for the Friday raid is posted at 8 pm")
    assert await mem.embeddings.settle()
    assert asked == [True]
    blob = (await mem.db.read(stored_vectors, "facts", model, [newest]))[newest]
    expected = {o for o, _ in await mem.db.read(neighbours, model, GUILD, newest, blob)}
    linked = {b if a == newest else a for a, b, _ in await edges(mem) if newest in (a, b)}
    assert expected and linked == expected


async def test_a_cold_guild_links_through_sqlite_vec_and_starts_its_matrix_load(
    make_memory: Any,
) -> None:
    mem = await make_memory()
    ids = [await lore(mem, line) for line in CLOSE[:3]]
    assert await mem.embeddings.settle()
    model = mem.embeddings.model_for_guild(GUILD)
    assert model is not None
    fresh = Retriever(mem.db, mem.embeddings, mem.config.retrieval, mem.clock)
    try:
        blob = (await mem.db.read(stored_vectors, "facts", model, [ids[0]]))[ids[0]]
        queries = np.frombuffer(blob, dtype=np.float32)[None, :]
        assert await fresh.nearest_facts(model, GUILD, queries, MAX_LINKS + 1) is None
        await fresh.warm(GUILD)  # the load the first call started
        near = await fresh.nearest_facts(model, GUILD, queries, MAX_LINKS + 1)
        assert near is not None and near[0][0][0] == ids[0]
    finally:
        await fresh.close()


def test_the_coarse_index_finds_the_exact_neighbours_reading_a_few_percent() -> None:
    vecs = _clustered(24_000, 48, 60, seed=1)
    m = _matrix(vecs)
    coarse = coarse_index.build(m)
    assert coarse is not None and coarse.usable(m) and not coarse.stale(m)
    rng = np.random.default_rng(2)
    read = []
    for row in rng.choice(len(vecs), 60, replace=False):
        q = vecs[row] + rng.normal(scale=0.05, size=vecs.shape[1]).astype(np.float32)
        q /= np.linalg.norm(q)
        assert [i for i, _ in coarse.top_k(m, q, 6)] == [i for i, _ in m.top_k(q, 6)]
        read.append(len(coarse.candidates(m, q)))
    assert max(read) < 0.2 * len(vecs)
    # Below its size an index is not built: the exact scan is cheap.
    assert coarse_index.build(_matrix(vecs[:1000])) is None


def test_rows_the_clustering_does_not_describe_are_read_exactly() -> None:
    vecs = _clustered(21_000, 32, 40, seed=3)
    m = _matrix(vecs)
    coarse = coarse_index.build(m)
    assert coarse is not None
    rng = np.random.default_rng(4)
    far = rng.normal(size=32).astype(np.float32)
    far /= np.linalg.norm(far)
    # Added after the build: found, whichever cluster it would belong to.
    m.put([999_999], far[None, :])
    assert coarse.top_k(m, far, 1)[0][0] == 999_999
    # Rewritten after the build: found at its new place, not at its old one.
    old = vecs[10].copy()
    moved = -far
    m.put([11], moved[None, :])
    assert coarse.top_k(m, moved, 1)[0][0] == 11
    assert 11 not in [i for i, _ in coarse.top_k(m, old, 3)]
    # Removed: never returned.
    m.remove([999_999])
    assert 999_999 not in [i for i, _ in coarse.top_k(m, far, 3)]
    # Enough new rows make it stale; a compaction renumbers rows: unusable.
    m.put(list(range(2_000_000, 2_005_000)), _clustered(5_000, 32, 40, seed=5))
    assert coarse.stale(m)
    m.remove(range(1, 8_001))
    assert m.compact_if_needed(0.25)
    assert not coarse.usable(m)


async def test_a_big_guild_links_through_its_coarse_index(make_memory: Any) -> None:
    mem = await make_memory(embeddings="local")
    model = mem.embeddings.model_for_guild(GUILD)
    assert model is not None
    dims = int((await mem.embeddings.embed_query(GUILD, "probe"))[1].shape[0])
    vecs = _clustered(1200, dims, 30, seed=6)
    ids = await insert_facts(
        mem, GUILD, [(ALICE, f"fact {i}", None) for i in range(len(vecs))], vectors=vecs
    )
    tuning = RetrievalTuning(vector_cache=VectorCacheConfig(coarse_min_rows=1000))
    retriever = Retriever(mem.db, mem.embeddings, mem.config.retrieval, mem.clock, tuning=tuning)
    try:
        await retriever.warm(GUILD)
        queries = vecs[:5]
        exact = await retriever.nearest_facts(model, GUILD, queries, 6)  # starts the build
        assert retriever.ctx.vectors.coarse(model, GUILD) is None  # being built
        await retriever.ctx.vectors.settle()
        assert retriever.ctx.vectors.coarse(model, GUILD) is not None
        coarse = await retriever.nearest_facts(model, GUILD, queries, 6)
        assert exact is not None and coarse is not None
        assert [[i for i, _ in row] for row in coarse] == [[i for i, _ in row] for row in exact]
        assert [row[0][0] for row in coarse] == ids[:5]
    finally:
        await retriever.close()
