"""An edit stores the text as the listener stores a message: mentions shown
as names. Before, it stored Discord's raw markup (``<@id>``), so a catch-up
reading the message back (as the listener's text) took it for edited again
at every restart."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest_asyncio
from discord.ext.test import factories as dfacts

from memory.clock import iso
from tests.bot.test_bot import Harness, open_harness
from tests.bot.test_bot_lifecycle import gateway
from tests.fakeopenai import FakeOpenAI


@pytest_asyncio.fixture
async def harness(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in open_harness(make_memory, fake_openai):
        yield h


async def test_an_edit_stores_mentions_as_names_like_the_listener(harness: Harness) -> None:
    h = harness
    text = f"I go sailing with <@{h.bob.id}> on lakes."
    said = await h.say(text)  # the listener stores a new message's text
    await h.settle()
    live = await h.memory.get_message(str(h.guild.id), str(said.id))
    assert live is not None and f"<@{h.bob.id}>" not in live.content

    message = await h.say("I go hiking alone.")
    await h.settle()
    data = dfacts.make_message_dict(h.general, h.alice, content=text, mentions=[h.bob])  # type: ignore[call-overload]
    data["id"] = str(message.id)
    data["guild_id"] = str(h.guild.id)
    data["edited_timestamp"] = iso(datetime.now(UTC))
    if isinstance(data.get("member"), dict):  # dpytest leaves out what the gateway sends
        data["member"].setdefault("roles", [])
    await gateway("message_update", data)
    await h.settle()

    edited = await h.memory.get_message(str(h.guild.id), str(message.id))
    assert edited is not None and edited.content == live.content
