"""Pins and unpins through the real bot: gateway ``MESSAGE_UPDATE`` payloads
with the ``pinned`` flag go through discord.py's own parsing into the raw
event the pins cog listens to."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from discord.ext.test import factories as dfacts

from memory.models import LORE_SUBJECT
from tests.bot.test_bot import Harness, open_harness
from tests.bot.test_bot_lifecycle import gateway
from tests.fakeopenai import FakeOpenAI

RULE = "Raid night is on Friday at 8pm in the main hall."


@pytest_asyncio.fixture
async def harness(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in open_harness(make_memory, fake_openai):
        yield h


def update(h: Harness, message_id: int, content: str, pinned: bool) -> dict[str, Any]:
    data: dict[str, Any] = dfacts.make_message_dict(h.general, h.alice, content=content)  # type: ignore[call-overload]
    data["id"] = str(message_id)
    data["guild_id"] = str(h.guild.id)
    data["pinned"] = pinned
    if isinstance(data.get("member"), dict):  # dpytest leaves out what the gateway sends
        data["member"].setdefault("roles", [])
    return data


async def canon(h: Harness, active: bool | None = True) -> list[Any]:
    return await h.memory.facts.find(
        str(h.guild.id), subject=LORE_SUBJECT, fact_type="canon", active=active
    )


async def test_pin_and_unpin(harness: Harness) -> None:
    h = harness
    message = await h.say(RULE)
    await h.settle()
    await gateway("message_update", update(h, message.id, RULE, True))
    (fact,) = await canon(h)
    assert fact.fact == f"Pinned: {RULE}" and fact.confidence == 0.9
    assert fact.source_message_id == str(message.id)
    # The pin is no edit: the stored message is untouched.
    stored = await h.memory.get_message(str(h.guild.id), str(message.id))
    assert stored is not None and stored.content == RULE

    await gateway("message_update", update(h, message.id, RULE, False))
    assert await canon(h) == []
    (archived,) = await canon(h, active=False)
    assert archived.id == fact.id
    events = [x.event for x in await h.memory.facts.history(str(h.guild.id), fact.id)]
    assert events == ["add", "archive"]


async def test_pin_of_a_message_the_bot_never_cached(harness: Harness) -> None:
    h = harness
    uncached = 123456789012345678
    await gateway("message_update", update(h, uncached, "Be kind to each other.", True))
    (fact,) = await canon(h)
    assert fact.fact == "Pinned: Be kind to each other." and fact.source_message_id == str(uncached)


async def test_edit_of_a_pinned_message_updates_the_canon(harness: Harness) -> None:
    h = harness
    message = await h.say(RULE)
    await h.settle()
    await gateway("message_update", update(h, message.id, RULE, True))
    moved = "Raid night moved to Saturday at 9pm."
    await gateway("message_update", update(h, message.id, moved, True))
    await h.settle()
    assert [f.fact for f in await canon(h)] == [f"Pinned: {moved}"]
    stored = await h.memory.get_message(str(h.guild.id), str(message.id))
    assert stored is not None and stored.content == moved


async def test_unpinned_updates_of_ordinary_messages_change_nothing(harness: Harness) -> None:
    h = harness
    message = await h.say("I love hiking in the Alps.")
    await h.settle()
    await gateway("message_update", update(h, message.id, "I love hiking in the Alps.", False))
    assert await canon(h, active=None) == []
