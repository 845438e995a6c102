"""The ingest pipeline's concurrency: extraction calls overlap, writes keep
each author's order, per-guild ``extract_model``, and the database's fast
path and item-by-item transactions that keep acknowledgements quick."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from memory.config import IngestConfig
from memory.db.sqlite.database import SqliteDatabase
from memory.errors import StorageError
from memory.extract.base import ExtractionItem
from memory.extract.llm import LLMExtractor
from memory.models import Candidate
from memory.store import messages as store_messages
from tests.fakeopenai import FakeOpenAI
from tests.helpers import (
    ALICE,
    BOB,
    GUILD,
    OTHER_GUILD,
    echo_fact,
    eventually,
    journal_files,
    msg,
)

CH_SLOW = "900000000000000001"
CH_FAST = "900000000000000002"


class Gated:
    """Extraction that waits for a gate when a message says "slow", and
    records how many calls overlapped."""

    name = "scripted"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls: list[list[str]] = []

    async def extract(self, text: str, author: str, max_facts: int) -> list[Candidate]:
        return (await self.extract_batch([ExtractionItem(text, author)], max_facts))[0]

    async def extract_batch(
        self, items: Sequence[ExtractionItem], max_facts: int
    ) -> list[list[Candidate]]:
        self.calls.append([i.text for i in items])
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if any("slow" in i.text for i in items):
                await self.gate.wait()
            return [echo_fact(i.text, i.author) for i in items]
        finally:
            self.in_flight -= 1


async def _fact_id(mem: Any, subject: str, needle: str) -> int:
    facts = await mem.facts.find(GUILD, subject=subject, limit=100)
    return next(f.id for f in facts if needle in f.fact)


async def test_later_batch_waits_to_write_but_not_to_extract(make_memory: Any) -> None:
    ext = Gated()
    mem = await make_memory(
        extractor=ext,
        embeddings="none",
        ingest=IngestConfig(workers=2, batch_size=4, batch_wait_s=0.0),
    )
    first = await mem.ingest_message(msg("slow note one about gardens", channel=CH_SLOW))
    await asyncio.sleep(0.05)  # its batch is extracting (held at the gate)
    second = await mem.ingest_message(msg("note two about gardens", channel=CH_FAST))
    bob = await mem.ingest_message(
        msg("note three about boats", author=BOB, name="Bob", channel=CH_FAST)
    )

    # Bob's message may share the second batch, but not Alice's wait: it is written.
    async def bob_written() -> bool:
        row = await mem.get_message(GUILD, bob.message_id)
        return row is not None and row.state == "done"

    assert await eventually(bob_written)
    second_row = await mem.get_message(GUILD, second.message_id)
    assert second_row is not None and second_row.state == "pending"
    assert not first.done.done() and not second.done.done()
    assert ext.max_in_flight == 2, "the second batch was extracted while the first one ran"
    ext.gate.set()
    assert await first.wait() and await second.wait()
    one = await _fact_id(mem, ALICE, "note one")
    two = await _fact_id(mem, ALICE, "note two")
    three = await _fact_id(mem, BOB, "note three")
    assert one < two, "Alice's facts are written in the order she spoke"
    assert three < one, "Bob did not wait for Alice's earlier message"


async def test_author_order_holds_across_many_channels_and_batches(make_memory: Any) -> None:
    seen: list[str] = []

    class Jittery(Gated):
        async def extract_batch(
            self, items: Sequence[ExtractionItem], max_facts: int
        ) -> list[list[Candidate]]:
            # Later channels answer first.
            await asyncio.sleep(0.002 * (5 - len(self.calls) % 5))
            seen.extend(i.text for i in items)
            return await super().extract_batch(items, max_facts)

    mem = await make_memory(
        extractor=Jittery(),
        embeddings="none",
        ingest=IngestConfig(workers=4, batch_size=3, batch_wait_s=0.0),
    )
    outs = []
    for i in range(40):
        author, name = (ALICE, "Alice") if i % 3 else (BOB, "Bob")
        outs.append(
            await mem.ingest_message(
                msg(
                    f"note {i:02d} about gardens",
                    author=author,
                    name=name,
                    channel=str(910 + i % 4),
                )
            )
        )
        if i % 7 == 0:
            await asyncio.sleep(0)
    for o in outs:
        assert await o.wait()
    assert sorted(seen) == sorted(f"note {i:02d} about gardens" for i in range(40))
    for author in (ALICE, BOB):
        facts = sorted(await mem.facts.find(GUILD, subject=author, limit=100), key=lambda f: f.id)
        numbers = [int(f.fact.split("note ")[1][:2]) for f in facts]
        assert numbers == sorted(numbers), numbers


def _batch_answer(model_box: list[str]) -> Any:
    def handler(body: dict[str, Any]) -> str:
        model_box.append(body["model"])
        return json.dumps({"facts": [], "results": []})

    return handler


async def test_guild_extract_model_setting_is_used(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    models: list[str] = []
    fake_openai.chat_handler = _batch_answer(models)
    extractor = LLMExtractor(fake_openai.client(), "default-model", timeout_s=30.0)
    mem = await make_memory(extractor=extractor, embeddings="none")
    assert await (await mem.ingest_message(msg("I build canoes in my garage."))).wait()
    await mem.guilds.set_setting(GUILD, "extract_model", "small-model")
    assert await (await mem.ingest_message(msg("I keep three cats at home."))).wait()
    # Another guild keeps the default.
    assert await (await mem.ingest_message(msg("I play chess online.", guild=OTHER_GUILD))).wait()
    await mem.guilds.set_setting(GUILD, "extract_model", None)
    assert await (await mem.ingest_message(msg("I sail on Sundays."))).wait()
    assert models == ["default-model", "small-model", "default-model", "default-model"]
    calls = await mem.admin.action_log(kind="memory_extract_call")
    assert {c.detail["model"] for c in calls if c.detail} == {"default-model", "small-model"}
    assert extractor.model == "default-model", "the shared extractor is not modified"


async def test_dropped_then_replayed_messages_are_journaled_once(make_memory: Any) -> None:
    ext = Gated()
    mem = await make_memory(
        extractor=ext,
        embeddings="none",
        ingest=IngestConfig(queue_capacity=3, workers=1, batch_size=1, batch_wait_s=0.0),
    )
    await mem.ingest_message(msg("slow start of the day"))
    await asyncio.sleep(0.05)
    outs = [
        await mem.ingest_message(msg(f"I grow pepper variety {i} on my balcony.")) for i in range(8)
    ]
    assert mem.queue.stats.dropped >= 4
    ext.gate.set()

    async def all_done() -> bool:
        states = await mem.db.read(store_messages.message_states, [o.message_id for o in outs])
        return {s for s, _ in states.values()} == {"done"}

    assert await eventually(all_done)
    states = await mem.db.read(store_messages.message_states, [o.message_id for o in outs])
    # Recorded where the pipeline appends; rendered days need no record.
    assert mem.journals.from_database or all(journaled for _, journaled in states.values())
    text = (await journal_files(mem))[0].read_text()
    for i in range(8):
        assert text.count(f"I grow pepper variety {i} on my balcony.") == 1


async def test_insert_messages_group_semantics(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    a = msg("first words", name="Alice")
    b = msg("second words", name="Alice B.")
    now = "2026-11-22T12:00:00.000Z"
    new = await mem.db.write(store_messages.insert_messages, [a, b, a], now)
    assert new == [True, True, False], "a repeated id in one group is not new"
    assert await mem.db.write(store_messages.insert_messages, [a], now) == [False]
    row = await mem.get_message(GUILD, b.id)
    assert row is not None and row.content == "second words" and row.state == "pending"
    assert await mem.guilds.members(GUILD) == [
        {"user_id": ALICE, "display_name": "Alice B.", "facts": 0}
    ]
    assert [c["channel_id"] for c in await mem.guilds.channels(GUILD)] == [a.channel_id]


async def test_fast_path_and_item_transactions(tmp_path: Any) -> None:
    db = SqliteDatabase(tmp_path / "x.sqlite3")
    await db.open()
    try:

        def add(con: Any, key: str, fail: bool = False) -> str:
            con.execute(
                "INSERT INTO guild_settings (guild_id, key, value, updated_at) "
                "VALUES ('g', ?, 'v', 'now')",
                (key,),
            )
            if fail:
                raise ValueError(key)
            return key

        assert await db.write(add, "urgent", urgent=True) == "urgent"
        assert db.inline_writes == 1, "an urgent write with no transaction open runs at once"
        assert await db.write(add, "queued") == "queued"
        assert db.inline_writes == 1

        def maybe_fail(con: Any, key: str) -> str:
            return add(con, key, fail=key == "b2")

        with pytest.raises(ValueError):
            await db.write_each(maybe_fail, ["b1", "b2", "b3"])

        def keys(con: Any) -> list[str]:
            return [r[0] for r in con.execute("SELECT key FROM guild_settings ORDER BY key")]

        # Each item is its own transaction: b1 stays, b2 rolled back, b3 never ran.
        assert await db.read(keys) == ["b1", "queued", "urgent"]
        assert await db.write_each(add, []) == []
    finally:
        await db.close()
    with pytest.raises(StorageError):
        await db.write(lambda con: None)


@pytest.mark.sqlite_only("the inline fast path of SQLite's single writer connection")
async def test_the_acknowledgement_is_an_urgent_write(make_memory: Any) -> None:
    mem = await make_memory()
    before = mem.db.inline_writes
    out = await mem.ingest_message(msg("I keep bees on the roof", author=ALICE))
    assert out.status == "queued"
    # Persisted on the fast path: the urgent write ran at once, on this thread.
    assert mem.db.inline_writes == before + 1
    assert await mem.settle(30)
