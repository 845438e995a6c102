"""Messages reach the ingest queue in the order they were handed over, even
when the calls overlap (memory.ingest.in_order, memory.ingest.admission)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from memory.config import IngestConfig
from memory.extract.base import ExtractionItem
from memory.ingest.in_order import InOrder
from memory.models import Candidate
from tests.helpers import ALICE, GUILD, echo_fact, msg


async def test_turns_come_in_the_order_places_were_taken() -> None:
    line = InOrder()
    served: list[int] = []

    async def caller(n: int, delay: float, gives_up: bool = False) -> None:
        place = line.enter()
        try:
            await asyncio.sleep(delay)  # its own work, longest for the first
            if gives_up:
                return  # leaves early: must not let later ones pass earlier ones
            await place.turn()
            served.append(n)
        finally:
            place.leave()

    await asyncio.gather(
        caller(0, 0.03), caller(1, 0.0, gives_up=True), caller(2, 0.01), caller(3, 0.0)
    )
    assert served == [0, 2, 3]


async def test_a_cancelled_waiter_leaves_the_line_moving() -> None:
    line = InOrder()
    first, second, third = line.enter(), line.enter(), line.enter()
    waiting = asyncio.ensure_future(second.turn())
    await asyncio.sleep(0)
    waiting.cancel()
    second.leave()
    second.leave()  # twice is harmless, and does not jump the line
    late = asyncio.ensure_future(third.turn())
    await asyncio.sleep(0.01)
    assert not late.done()  # the first is still in line
    first.leave()
    await asyncio.wait_for(late, 30)
    assert waiting.cancelled()


async def test_overlapping_ingest_calls_keep_an_authors_order(make_memory: Any) -> None:
    """A bulk import hands a chunk over at once; calls that read the guild's
    settings from the database resume in any order. Here the first calls'
    reads are the slowest: the messages must still be queued, stored and
    decided in the order they were handed over."""
    mem = await make_memory(
        embeddings="none", ingest=IngestConfig(workers=2, batch_size=4, batch_wait_s=0.0)
    )
    read = mem.guilds.settings_cache.get
    delays = iter([0.05, 0.04, 0.03, 0.02, 0.01])

    async def slow_cold_read(guild_id: str) -> Any:
        mem.guilds.settings_cache.invalidate(guild_id)  # as after another process's commit
        await asyncio.sleep(next(delays, 0.0))
        return await read(guild_id)

    mem.guilds.settings_cache.get = slow_cold_read
    texts = [
        "I live in Lisbon with my partner.",
        "I adopted a grey cat called Miso.",
        "I work as a nurse at the city hospital.",
        "I moved to Porto last month.",
        "I play the cello in a small orchestra.",
    ]
    messages = [msg(t, author=ALICE, name="Alice", id=f"70{i}") for i, t in enumerate(texts)]
    outs = await asyncio.gather(*(mem.ingest_message(m, backpressure=True) for m in messages))
    for o in outs:
        assert await o.wait()
    facts = sorted(await mem.facts.find(GUILD, subject=ALICE, limit=50), key=lambda f: f.id)
    sources = [f.source_message_id for f in facts]
    assert sources == sorted(sources, key=lambda m: int(m or 0)), sources
    # What that order decides: she lives in Porto now, no longer in Lisbon
    # (written the other way round, Lisbon ended Porto).
    lisbon = next(f for f in facts if "Lisbon" in f.fact)
    porto = next(f for f in facts if "Porto" in f.fact)
    assert lisbon.valid_to is not None and porto.valid_to is None


class Echo:
    """One fact per message, its own words; slow enough that the queue fills."""

    name = "scripted"

    async def extract(self, text: str, author: str, max_facts: int) -> list[Candidate]:
        return (await self.extract_batch([ExtractionItem(text, author)], max_facts))[0]

    async def extract_batch(
        self, items: Sequence[ExtractionItem], max_facts: int
    ) -> list[list[Candidate]]:
        await asyncio.sleep(0.005)
        return [echo_fact(i.text, i.author) for i in items]


async def test_callers_waiting_for_room_in_the_queue_keep_their_order(make_memory: Any) -> None:
    """With the queue full, bulk callers wait for room; they must enter it in
    the order they came, not in the order they happen to wake."""
    mem = await make_memory(
        extractor=Echo(),
        embeddings="none",
        ingest=IngestConfig(workers=1, batch_size=1, batch_wait_s=0.0, queue_capacity=2),
    )
    messages = [msg(f"note {n:02d} about tulips", author=ALICE, id=f"8{n:02d}") for n in range(12)]
    chunks = [
        asyncio.ensure_future(
            asyncio.gather(*(mem.ingest_message(m, backpressure=True) for m in messages[i : i + 4]))
        )
        for i in range(0, len(messages), 4)
    ]
    for out in await asyncio.gather(*chunks):
        for o in out:
            assert await o.wait()
    facts = sorted(await mem.facts.find(GUILD, subject=ALICE, limit=50), key=lambda f: f.id)
    numbers = [int(f.fact.split("note ")[1][:2]) for f in facts]
    assert numbers == list(range(len(messages))), numbers
