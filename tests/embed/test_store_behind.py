"""The embedding worker writes and links a fact batch behind the next batch's
embedding: the model runs again while the vectors of the batch before are
still being written; a batch is linked only after the one before it is
stored (so it links to those facts, as when nothing overlapped); ``settle``
waits for the last store; ``stop`` ends a store still running."""

from __future__ import annotations

import asyncio
from typing import Any

from memory.store.vectors import stored_vectors
from tests.helpers import GUILD
from tests.retrieval.test_relations import CLOSE, edges, lore


async def _held_first_store(mem: Any) -> tuple[asyncio.Event, asyncio.Event]:
    """Make the worker's first fact-batch store wait for ``release``;
    ``holding`` is set once it waits."""
    service = mem.embeddings
    real = service._store_fact_batch
    holding, release = asyncio.Event(), asyncio.Event()
    first = True

    async def store(batch: Any) -> int:
        nonlocal first
        if first:
            first = False
            holding.set()
            await release.wait()
        return int(await real(batch))

    service._store_fact_batch = store
    return holding, release


async def test_the_next_batch_is_embedded_while_the_one_before_is_stored(
    make_memory: Any,
) -> None:
    mem = await make_memory()
    assert await mem.embeddings.settle()
    holding, release = await _held_first_store(mem)
    model = mem.embeddings.model_for_guild(GUILD)
    first = await lore(mem, CLOSE[0])
    await asyncio.wait_for(holding.wait(), 30)
    calls = mem.embeddings.stats.calls
    second = await lore(mem, CLOSE[1])
    # The model embeds the second fact while the first one's store waits.
    for _ in range(600):
        if mem.embeddings.stats.calls > calls:
            break
        await asyncio.sleep(0.05)
    assert mem.embeddings.stats.calls > calls
    # Not idle while a batch is unwritten; nothing of the second is written
    # before the first is stored.
    assert not await mem.embeddings.settle(timeout=0.3)
    assert await mem.db.read(stored_vectors, "facts", model, [first, second]) == {}
    release.set()
    assert await mem.embeddings.settle()
    assert set(await mem.db.read(stored_vectors, "facts", model, [first, second])) == {
        first,
        second,
    }
    # Linked after the first was stored, the second found it.
    assert (min(first, second), max(first, second)) in {(a, b) for a, b, _ in await edges(mem)}


async def test_stop_ends_a_store_that_is_still_running(make_memory: Any) -> None:
    mem = await make_memory()
    assert await mem.embeddings.settle()
    holding, _release = await _held_first_store(mem)
    await lore(mem, CLOSE[0])
    await asyncio.wait_for(holding.wait(), 30)
    storing = mem.embeddings._storing
    assert storing is not None and not storing.done()
    await mem.embeddings.stop()
    assert storing.done() and mem.embeddings._storing is None
