"""The split FTS query of big guilds (``FactSearch._split_fts``): two id ranges
ranked on two reader threads must give exactly the whole query's answer —
same facts, same bm25, same order of ties — and so the same search results.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from memory.retrieval import facts as fact_search
from memory.retrieval.lexicons import LexiconConfig
from memory.retrieval.query import fts_match_expression
from memory.retrieval.shared_part import SharedPart
from memory.store import facts as store
from memory.store.search import fts_fact_ranks, merge_ranks
from tests.helpers import CHANNEL, GUILD, OTHER_GUILD, database_url, eventually
from tests.retrieval.test_retrieval import filler_facts, insert_facts

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
QUERIES = [
    "who plays chess on weekends",
    "anyone working as a nurse in Lisbon?",
    "who is learning Rust",
    "bought a new camera",
    "collects coins",
]


async def _two_guilds(mem: Any, local_embedder: Any) -> list[int]:
    dims = int((await local_embedder.embed(["probe"])).shape[1])
    rng = np.random.default_rng(3)

    def unit(n: int) -> np.ndarray:
        v = rng.normal(size=(n, dims))
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    # Interleaved guilds, like a real database: ids of one guild are not a range.
    ids: list[int] = []
    for chunk in range(4):
        rows = [(who, text, None) for who, text in filler_facts(150, seed=10 + chunk)]
        ids += await insert_facts(mem, GUILD, rows, vectors=unit(len(rows)))
        other = [(who, text, None) for who, text in filler_facts(100, seed=50 + chunk)]
        await insert_facts(mem, OTHER_GUILD, other, vectors=unit(len(other)))
    return ids


async def test_id_ranges_merge_to_the_whole_fts_answer_ties_included(
    make_memory: Callable[..., Any], local_embedder: Any
) -> None:
    mem = await make_memory()
    ids = await _two_guilds(mem, local_embedder)
    ties = 0
    for q in QUERIES:
        match = fts_match_expression(q)
        assert match is not None
        whole = await mem.db.read(fts_fact_ranks, GUILD, match, 64)
        assert len(whole) >= 20
        ties += len(whole) - len({raw for _, raw in whole})
        if database_url(mem) is None:
            # The order search_facts_fts gave before (rank, then FTS5's rowid scan).
            before = await mem.db.read(store.search_facts_fts, GUILD, match, 64)
            assert whole == [(f.id, raw) for f, raw in before]
        else:
            # PostgreSQL returns equal ranks in no set order: every match,
            # ordered by rank then id, begins with the whole answer.
            every = await mem.db.read(store.search_facts_fts, GUILD, match, 100_000)
            assert (
                whole == sorted(((f.id, raw) for f, raw in every), key=lambda t: (t[1], t[0]))[:64]
            )
        for split in (ids[0], ids[1], ids[len(ids) // 3], ids[len(ids) // 2], ids[-1] + 1):
            lower = await mem.db.read(fts_fact_ranks, GUILD, match, 64, None, split)
            upper = await mem.db.read(fts_fact_ranks, GUILD, match, 64, split)
            assert all(i < split for i, _ in lower) and all(i >= split for i, _ in upper)
            assert merge_ranks([lower, upper], 64) == whole
    # Ties happen (same length, same terms): the split must keep their order.
    assert ties > 0


async def test_search_with_the_split_equals_search_without(
    make_memory: Callable[..., Any], local_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fixed clock: recency moves with time, and the two runs must compare exactly.
    mem = await make_memory(clock=lambda: NOW)
    # The split is FTS5's (a guild whose fact lexicon is too big or still building).
    mem.retriever.ctx.fact_lexicons.index.cfg = LexiconConfig(enabled=False)
    await _two_guilds(mem, local_embedder)
    await mem.retriever.warm(GUILD)

    async def run() -> list[list[tuple[str, float]]]:
        out = []
        for q in QUERIES:
            hits = await mem.retriever.search(GUILD, q, channel_id=CHANNEL, limit=20, gate=False)
            out.append([(h.id, h.score) for h in hits])
        return out

    monkeypatch.setattr(fact_search, "FTS_SPLIT_MIN_ROWS", 10**9)
    whole = await run()
    monkeypatch.setattr(fact_search, "FTS_SPLIT_MIN_ROWS", 1)
    calls: list[tuple[Any, ...]] = []
    real = fact_search.fts_fact_ranks

    def spy(*args: Any) -> list[tuple[int, float]]:
        calls.append((*args[1:], None, None)[:5])  # (guild, match, limit, lo, hi)
        return real(*args)

    monkeypatch.setattr(fact_search, "fts_fact_ranks", spy)
    assert await run() == whole
    # It did split: every query ran as a lower and an upper half.
    assert len(calls) == 2 * len(QUERIES)
    # The offers to the second reader are not kept once done.
    assert await eventually(lambda: mem.retriever.facts.offers_pending == 0)
    assert all(len(c) == 5 and (c[3] is None) != (c[4] is None) for c in calls)


def test_shared_part_runs_once_on_whichever_thread_claims_it() -> None:
    runs: list[str] = []

    def work(con: str, x: int) -> int:
        runs.append(con)
        return x * 2

    part = SharedPart(work, 21)
    part.offer("reader-b")
    assert part.result("reader-a") == 42
    assert runs == ["reader-b"]

    part = SharedPart(work, 5)
    assert part.result("reader-a") == 10  # nobody took it: the waiting thread runs it
    part.offer("reader-b")  # too late: not run again
    assert runs == ["reader-b", "reader-a"]

    # The waiting thread blocks until the other thread's run ends.
    started, release = threading.Event(), threading.Event()

    def slow(con: str) -> str:
        started.set()
        release.wait(5)
        return con

    part = SharedPart(slow)
    t = threading.Thread(target=part.offer, args=("reader-b",))
    t.start()
    assert started.wait(5)
    release.set()
    assert part.result("reader-a") == "reader-b"
    t.join()

    def boom(con: str) -> None:
        raise ValueError("bad match")

    part = SharedPart(boom)
    part.offer("reader-b")
    with pytest.raises(ValueError, match="bad match"):
        part.result("reader-a")


def test_median_follows_a_compaction_back_to_an_earlier_row_count() -> None:
    # The cached median is keyed on (rows, dead rows); a compaction can bring
    # back an earlier pair with other ids, and the median must follow the rows.
    from memory.retrieval.vector_index import GuildMatrix

    m = GuildMatrix("facts", "model", GUILD, dims=2)
    vecs = np.ones((10, 2), dtype=np.float32)
    m.fill(np.arange(1, 11, dtype=np.int64), vecs)
    assert m.median_id() == 6
    m.remove(range(1, 6))  # archive five ...
    m.put(list(range(101, 106)), vecs[:5])  # ... add five newer ones
    assert m.compact_if_needed(0.1)
    assert m.rows == 10  # (10 rows, 0 dead) again, now ids 6..10 and 101..105
    assert m.median_id() == 101
