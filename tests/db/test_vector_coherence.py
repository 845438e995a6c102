"""The in-memory vector matrices follow committed writes only: a rolled-back
transaction never reaches them, engines on two files never see each other's
writes, another connection's commits make a matrix reload, and closing the
retriever stops its KNN helper threads."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from memory.clock import iso
from memory.db.sqlite.database import SqliteDatabase
from memory.embed.base import vector_to_blob
from memory.retrieval.context import RetrievalTuning
from memory.retrieval.retriever import Retriever
from memory.retrieval.vector_index import VectorCacheConfig
from memory.store import facts as store
from memory.store import vectors as store_vectors
from tests.helpers import ALICE, GUILD, eventually
from tests.retrieval.test_retrieval import insert_facts


def _unit(n: int, dims: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dims))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


async def _dims(mem: Any) -> int:
    return int((await mem.embeddings.embed_query(GUILD, "probe"))[1].shape[0])


def _new_fact_with_vector(
    con: Any, model: str, dims: int, text: str, now: str, vec: np.ndarray
) -> int:
    up = store.upsert_fact(
        con,
        guild_id=GUILD,
        channel_id=None,
        subject=ALICE,
        fact=text,
        fact_type="other",
        evidence=None,
        source_message_id=None,
        confidence=0.6,
        now=now,
        actor="test",
    )
    store_vectors.put_fact_vectors(
        con, model, dims, [(up.fact.id, GUILD, "h", vector_to_blob(vec))], now
    )
    return up.fact.id


async def test_a_rolled_back_write_never_reaches_the_matrix_a_committed_one_does(
    make_memory: Callable[..., Any],
) -> None:
    mem = await make_memory()
    dims = await _dims(mem)
    model = mem.embeddings.model_for_guild(GUILD)
    (kept,) = await insert_facts(
        mem, GUILD, [(ALICE, "Alice keeps bees.", None)], vectors=_unit(1, dims, 1)
    )
    await mem.retriever.warm(GUILD)
    matrix = mem.retriever.index.get("facts", model, GUILD)
    assert matrix is not None and matrix.rows == 1
    now = iso(mem.clock())
    vec = _unit(1, dims, 2)[0]

    def add_then_fail(con: Any) -> None:
        _new_fact_with_vector(con, model, dims, "Alice sails.", now, vec)
        raise RuntimeError("the rest of the transaction failed")

    with pytest.raises(RuntimeError):
        await mem.db.write(add_then_fail)
    assert matrix.rows == 1

    def archive_then_fail(con: Any) -> None:
        store.set_fact_active(con, GUILD, kept, False, "test", now)
        raise RuntimeError("the rest of the transaction failed")

    with pytest.raises(RuntimeError):
        await mem.db.write(archive_then_fail)
    assert matrix.has(kept) and matrix.rows == 1

    added = await mem.db.write(_new_fact_with_vector, model, dims, "Alice sails.", now, vec)
    assert matrix.has(added) and matrix.rows == 2
    await mem.db.write(store.set_fact_active, GUILD, kept, False, "test", now)
    assert not matrix.has(kept) and matrix.rows == 1
    # The same matrix is still the one searches use: nothing was reloaded.
    assert mem.retriever.index.get("facts", model, GUILD) is matrix
    assert mem.retriever.index.stats()["loads"] == 2  # facts and messages, once each


async def test_engines_on_two_files_do_not_see_each_others_writes(
    make_memory: Callable[..., Any], tmp_path: Any
) -> None:
    one = await make_memory(data_dir=tmp_path / "one")
    two = await make_memory(data_dir=tmp_path / "two")
    dims = await _dims(one)
    model = one.embeddings.model_for_guild(GUILD)
    await insert_facts(one, GUILD, [(ALICE, "Alice keeps bees.", None)], vectors=_unit(1, dims, 1))
    await insert_facts(two, GUILD, [(ALICE, "Alice keeps bees.", None)], vectors=_unit(1, dims, 1))
    await one.retriever.warm(GUILD)
    await two.retriever.warm(GUILD)
    m1 = one.retriever.index.get("facts", model, GUILD)
    m2 = two.retriever.index.get("facts", model, GUILD)
    assert m1 is not None and m2 is not None
    now = iso(two.clock())
    added = await two.db.write(
        _new_fact_with_vector, model, dims, "Alice sails.", now, _unit(1, dims, 2)[0]
    )
    assert m2.has(added) and m2.rows == 2
    assert m1.rows == 1
    await one.search(GUILD, "who sails?")
    assert one.retriever.index.get("facts", model, GUILD) is m1  # no reload either


@pytest.mark.sqlite_only("another connection's commit seen through PRAGMA data_version")
async def test_another_connections_commit_reloads_the_matrix(
    make_memory: Callable[..., Any],
) -> None:
    mem = await make_memory()
    dims = await _dims(mem)
    model = mem.embeddings.model_for_guild(GUILD)
    await insert_facts(mem, GUILD, [(ALICE, "Alice keeps bees.", None)], vectors=_unit(1, dims, 1))
    tuning = RetrievalTuning(vector_cache=VectorCacheConfig(external_reload_s=0.0))
    eager = Retriever(mem.db, mem.embeddings, mem.config.retrieval, mem.clock, tuning=tuning)
    patient = Retriever(mem.db, mem.embeddings, mem.config.retrieval, mem.clock)
    other = SqliteDatabase(mem.config.db_path)  # as another process would write the file
    await other.open()
    try:
        for r in (eager, patient):
            await r.warm(GUILD)
        before = {r: r.index.get("facts", model, GUILD) for r in (eager, patient)}
        now = iso(mem.clock())
        added = await other.write(
            _new_fact_with_vector, model, dims, "Alice sails.", now, _unit(1, dims, 2)[0]
        )
        for r in (eager, patient):
            await r.search(GUILD, "who sails?")  # its reads notice the other commit
        # Reloaded (lazily: the search that noticed it started the load).
        await eager.warm(GUILD)
        after = eager.index.get("facts", model, GUILD)
        assert after is not None and after is not before[eager] and after.has(added)
        # The default waits before reloading: the matrix is kept for now.
        assert patient.index.get("facts", model, GUILD) is before[patient]
    finally:
        await other.close()
        await eager.close()
        await patient.close()


@pytest.mark.postgresql_only("another process's commit heard through LISTEN/NOTIFY")
async def test_another_processs_commit_on_postgresql_reloads_the_matrix(
    make_memory: Callable[..., Any],
) -> None:
    from memory.db.postgres import driver as postgres
    from memory.db.postgres.database import CHANNEL

    mem = await make_memory()
    dims = await _dims(mem)
    model = mem.embeddings.model_for_guild(GUILD)
    await insert_facts(mem, GUILD, [(ALICE, "Alice keeps bees.", None)], vectors=_unit(1, dims, 1))
    tuning = RetrievalTuning(vector_cache=VectorCacheConfig(external_reload_s=0.0))
    eager = Retriever(mem.db, mem.embeddings, mem.config.retrieval, mem.clock, tuning=tuning)
    patient = Retriever(mem.db, mem.embeddings, mem.config.retrieval, mem.clock)
    # What another process's engine does: its own connection, one transaction
    # that announces itself on the channel every engine listens to.
    other = postgres.connect(mem.config.database_url)
    try:
        for r in (eager, patient):
            await r.warm(GUILD)
        before = {r: r.index.get("facts", model, GUILD) for r in (eager, patient)}
        heard = mem.db.external_commits
        # This engine's own commit, then the other's: notifications arrive in
        # commit order, and only the other's is news.
        await insert_facts(mem, GUILD, [(ALICE, "Alice bakes.", None)], vectors=_unit(1, dims, 3))
        now = iso(mem.clock())

        def commit_elsewhere() -> int:
            other.execute("BEGIN")
            added = _new_fact_with_vector(
                other, model, dims, "Alice sails.", now, _unit(1, dims, 2)[0]
            )
            other.execute(f"NOTIFY {CHANNEL}, 'another-process'")
            other.execute("COMMIT")
            return added

        added = await asyncio.to_thread(commit_elsewhere)
        assert await eventually(lambda: mem.db.external_commits > heard)
        assert mem.db.external_commits == heard + 1
        for r in (eager, patient):
            await r.search(GUILD, "who sails?")
        # Reloaded (lazily: the search that noticed it started the load).
        await eager.warm(GUILD)
        after = eager.index.get("facts", model, GUILD)
        assert after is not None and after is not before[eager] and after.has(added)
        # The default waits before reloading: the matrix is kept for now.
        assert patient.index.get("facts", model, GUILD) is before[patient]
    finally:
        other.close()
        await eager.close()
        await patient.close()


def _knn_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("guildlore-knn")]


async def test_close_stops_the_knn_helper_threads(make_memory: Callable[..., Any]) -> None:
    mem = await make_memory()
    dims = await _dims(mem)
    await insert_facts(
        mem,
        GUILD,
        [(ALICE, f"Alice fact {i}.", None) for i in range(50)],
        vectors=_unit(50, dims, 3),
    )
    tuning = RetrievalTuning(knn_overlap_min_rows=1)  # every product on a helper thread
    retriever = Retriever(mem.db, mem.embeddings, mem.config.retrieval, mem.clock, tuning=tuning)
    await retriever.warm(GUILD)
    assert await retriever.search(GUILD, "Alice fact", gate=False)
    assert retriever.ctx.vectors.helper_threads_running and _knn_threads()
    await retriever.close()
    assert not retriever.ctx.vectors.helper_threads_running
    assert await eventually(lambda: not _knn_threads())
    # A closed retriever still answers (it reloads lazily), and close stops it again.
    assert await retriever.search(GUILD, "Alice fact", gate=False)
    await retriever.close()
    assert await eventually(lambda: not _knn_threads())
