"""The listener records display names before it ingests a message; names are
cosmetic, and a failure to record them (a database hiccup, a deadlock on
PostgreSQL) must not cost the message, as it did."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from memory.errors import StorageError
from tests.bot.test_bot import Harness, open_harness
from tests.fakeopenai import FakeOpenAI


@pytest_asyncio.fixture
async def harness(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in open_harness(make_memory, fake_openai):
        yield h


async def test_a_message_is_ingested_when_its_names_cannot_be_recorded(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness

    async def refused(*args: Any, **kwargs: Any) -> None:
        raise StorageError("deadlock detected")

    monkeypatch.setattr(h.memory.guilds, "set_names", refused)
    said = await h.say("I keep bees on the roof.")
    await h.settle()
    stored = await h.memory.get_message(str(h.guild.id), str(said.id))
    assert stored is not None and stored.state == "done"
