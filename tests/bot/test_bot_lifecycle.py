"""Discord deletes and edits reach memory through the real bot: the gateway
payloads go through discord.py's own parsing (``parse_message_delete`` and
friends), which dispatches the raw events the lifecycle cog listens to."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import discord
import discord.ext.test as dpytest
import pytest_asyncio
from discord.ext.test import backend as dback
from discord.ext.test import factories as dfacts

from memory.clock import iso
from memory.models import IncomingMessage
from tests.bot.test_bot import Harness, make_harness, open_harness
from tests.fakeopenai import FakeOpenAI
from tests.helpers import journal_text as memory_journal_text
from tests.roles.test_lifecycle import GatedExtractor, all_text

SECRET = "zanzibarquokka"


@pytest_asyncio.fixture
async def harness(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in open_harness(make_memory, fake_openai):
        yield h


async def gateway(event: str, data: dict[str, Any]) -> None:
    """Feed one gateway payload to discord.py and wait for the listeners."""
    getattr(dback.get_state(), f"parse_{event}")(data)
    await dpytest.run_all_events()


async def journal_text(h: Harness) -> str:
    return await memory_journal_text(h.memory)


async def fact_texts(h: Harness) -> list[str]:
    return [f.fact for f in await h.memory.facts.find(str(h.guild.id), subject=str(h.alice.id))]


async def test_deleted_message_is_forgotten(harness: Harness) -> None:
    h = harness
    message = await h.say(f"I love hiking with my {SECRET}.")
    await h.settle()
    assert any(SECRET in f for f in await fact_texts(h))

    await gateway(
        "message_delete",
        {"id": str(message.id), "channel_id": str(h.general.id), "guild_id": str(h.guild.id)},
    )
    await h.settle()

    assert await h.memory.get_message(str(h.guild.id), str(message.id)) is None
    assert await fact_texts(h) == []
    text = await journal_text(h)
    # An appended line is marked deleted; a rendered day leaves it out.
    assert SECRET not in text and ("[deleted]" in text or h.memory.journals.from_database)
    assert SECRET not in await h.memory.refresh_snapshot()


async def test_delete_of_a_message_the_bot_never_cached(harness: Harness) -> None:
    h = harness
    # Stored by an earlier run: this bot process never saw it.
    old = IncomingMessage(
        id="123456789012345678",
        guild_id=str(h.guild.id),
        channel_id=str(h.general.id),
        author_id=str(h.alice.id),
        author_name=h.alice.display_name,
        content=f"I love sailing with my {SECRET}.",
        created_at=iso(datetime.now(UTC)),
    )
    assert await (await h.memory.ingest_message(old)).wait()
    await h.settle()
    assert dback.get_state()._get_message(int(old.id)) is None
    assert any(SECRET in f for f in await fact_texts(h))

    await gateway(
        "message_delete",
        {"id": old.id, "channel_id": str(h.general.id), "guild_id": str(h.guild.id)},
    )

    assert await h.memory.get_message(str(h.guild.id), old.id) is None
    assert await fact_texts(h) == []


async def test_bulk_delete(harness: Harness) -> None:
    h = harness
    gone = [await h.say(f"I love the {SECRET} number {i}.") for i in range(3)]
    kept = await h.say("I love hiking in the Alps.")
    await h.settle()

    await gateway(
        "message_delete_bulk",
        {
            "ids": [str(m.id) for m in gone],
            "channel_id": str(h.general.id),
            "guild_id": str(h.guild.id),
        },
    )

    for m in gone:
        assert await h.memory.get_message(str(h.guild.id), str(m.id)) is None
    assert await h.memory.get_message(str(h.guild.id), str(kept.id)) is not None
    assert await fact_texts(h) == [f"{h.alice.display_name} loves hiking in the Alps."]


async def test_edit_replaces_the_text_and_its_facts(harness: Harness) -> None:
    h = harness
    message = await h.say(f"I love hiking with my {SECRET}.")
    await h.settle()

    data = dfacts.make_message_dict(h.general, h.alice, content="I love sailing on lakes.")  # type: ignore[call-overload]
    data["id"] = str(message.id)
    data["guild_id"] = str(h.guild.id)
    data["edited_timestamp"] = iso(datetime.now(UTC))
    if isinstance(data.get("member"), dict):  # dpytest leaves out what the gateway sends
        data["member"].setdefault("roles", [])
    await gateway("message_update", data)
    await h.settle()

    stored = await h.memory.get_message(str(h.guild.id), str(message.id))
    assert stored is not None and stored.content == "I love sailing on lakes."
    [fact] = await fact_texts(h)
    assert fact.endswith(" loves sailing on lakes.")
    assert "(edited) I love sailing on lakes." in await journal_text(h)
    assert SECRET not in await journal_text(h)


async def test_events_of_other_guilds_and_dms_touch_nothing(harness: Harness) -> None:
    h = harness
    message = await h.say("I love hiking in the Alps.")
    await h.settle()

    # The same id claimed by another guild, and a DM delete: neither applies here.
    await gateway(
        "message_delete",
        {
            "id": str(message.id),
            "channel_id": str(h.other_general.id),
            "guild_id": str(h.other_guild.id),
        },
    )
    assert isinstance(h.bot.get_cog("Lifecycle"), discord.ext.commands.Cog)
    assert await h.memory.get_message(str(h.guild.id), str(message.id)) is not None
    assert len(await fact_texts(h)) == 1


async def test_delete_while_the_message_is_still_queued(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    ext = GatedExtractor()
    h = await make_harness(await make_memory(extractor=ext), fake_openai)
    try:
        message = await h.say(f"slow: I keep a {SECRET} at home")
        queued = await h.say(f"and a second {SECRET} in the shed")
        await asyncio.wait_for(ext.started.wait(), 30)
        assert h.memory.queue.holds(str(message.id)) and h.memory.queue.holds(str(queued.id))

        for m in (message, queued):
            await gateway(
                "message_delete",
                {"id": str(m.id), "channel_id": str(h.general.id), "guild_id": str(h.guild.id)},
            )
        ext.gate.set()
        await h.settle()

        for m in (message, queued):
            assert await h.memory.get_message(str(h.guild.id), str(m.id)) is None
        assert await fact_texts(h) == []
        assert SECRET not in await journal_text(h)
        assert SECRET not in await all_text(h.memory)
    finally:
        ext.gate.set()
        h.bot.accepting = False


async def test_bulk_delete_of_a_hundred_never_cached(harness: Harness) -> None:
    h = harness
    gid, cid = str(h.guild.id), str(h.general.id)
    old = [
        IncomingMessage(
            id=str(223456789012345000 + i),
            guild_id=gid,
            channel_id=cid,
            author_id=str(h.alice.id),
            author_name=h.alice.display_name,
            content=f"I love the {SECRET} number {i}.",
            created_at=iso(datetime.now(UTC)),
        )
        for i in range(100)
    ]
    for m in old:
        await h.memory.ingest_message(m)
    kept = await h.say("I love hiking in the Alps.")
    await h.settle()
    assert None not in [await h.memory.get_message(gid, m.id) for m in old]
    everything = await h.memory.facts.find(gid, subject=str(h.alice.id), active=None, limit=500)
    assert sum(SECRET in f.fact for f in everything) > 50  # current and archived

    await gateway(
        "message_delete_bulk",
        {"ids": [m.id for m in old], "channel_id": cid, "guild_id": gid},
    )
    await h.settle()

    left = await h.memory.facts.find(gid, subject=str(h.alice.id), active=None, limit=500)
    assert [f.fact for f in left] == [f"{h.alice.display_name} loves hiking in the Alps."]
    assert await h.memory.get_message(gid, str(kept.id)) is not None
    if not h.memory.journals.from_database:  # a rendered day leaves deleted lines out
        assert (await journal_text(h)).count("[deleted]") == 100
    assert SECRET not in await all_text(h.memory)


async def test_a_fact_said_twice_survives_the_delete_of_one(harness: Harness) -> None:
    h = harness
    first = await h.say("I love hiking in the Alps.")
    second = await h.say("I love hiking in the Alps.")
    await h.settle()
    [fact] = await h.memory.facts.find(str(h.guild.id), subject=str(h.alice.id))

    await gateway(
        "message_delete",
        {"id": str(first.id), "channel_id": str(h.general.id), "guild_id": str(h.guild.id)},
    )
    [kept] = await h.memory.facts.find(str(h.guild.id), subject=str(h.alice.id))
    assert kept.id == fact.id and kept.source_message_id == str(second.id)

    await gateway(
        "message_delete",
        {"id": str(second.id), "channel_id": str(h.general.id), "guild_id": str(h.guild.id)},
    )
    assert await fact_texts(h) == []
