"""Replies in the request log and the daily series: the real bot under
dpytest answers a mention (the fake OpenAI server reports tokens) and fails
one; both are counted with their model, tokens, time and outcome."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from bot.cogs.replies import APOLOGY
from tests.bot.test_bot import Harness, open_harness, reply_json
from tests.fakeopenai import FakeOpenAI, Fault


@pytest_asyncio.fixture
async def harness(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in open_harness(make_memory, fake_openai):
        yield h


async def test_replies_are_counted_with_model_tokens_and_outcome(harness: Harness) -> None:
    h = harness
    gid = str(h.guild.id)
    h.fake.script_chat(reply_json("Hello Alice!"))
    await h.say(f"{h.mention} hello there")
    h.fake.script_chat(Fault.status(500))
    await h.say(f"{h.mention} are you there?")
    assert [m.content for m in h.sent()] == ["Hello Alice!", APOLOGY]
    await h.memory.usage.flush()

    failed, ok = await h.memory.usage.requests(guild_id=gid, kind="reply")
    assert (ok.outcome, ok.model) == ("ok", "gpt-4o-mini")
    assert ok.prompt_tokens and ok.prompt_tokens > 0 and ok.completion_tokens
    assert ok.latency_ms > 0 and ok.detail is not None and "model call" in ok.detail
    assert (failed.outcome, failed.model) == ("error", "gpt-4o-mini")
    assert failed.detail is not None and failed.detail.startswith("LLMError")
    # Nothing the members said is in the log.
    assert all("hello" not in (r.detail or "") for r in (ok, failed))

    window = await h.memory.usage.window(gid, 30)
    assert window.total("replies") == 2 and window.total("reply_errors") == 1
    assert window.total("tokens_prompt") == ok.prompt_tokens
    # Each reply's memory was a search too ("reply memory").
    searches = await h.memory.usage.requests(guild_id=gid, kind="search")
    assert searches and all((r.detail or "").startswith("via reply memory") for r in searches)
