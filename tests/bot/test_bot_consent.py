"""Consent for sensitive facts through the real bot: members speak through
dpytest, the engine queues, the prompt and ``/memory pending`` bodies are
called with dpytest's real guild objects (dpytest does not dispatch
application commands), and the buttons' decisions go through the view."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import discord
import pytest_asyncio
from discord import app_commands

from bot.cogs.consent import ConsentView, consent_prompt, pending_answer
from bot.jobs import Jobs
from memory.extract.llm import LLMExtractor
from tests.bot.test_bot import Harness, make_harness, open_harness
from tests.conftest import FakeClock
from tests.fakeopenai import FakeOpenAI

SENSITIVE = "I am a practising Catholic."


@pytest_asyncio.fixture
async def harness(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in open_harness(make_memory, fake_openai):
        yield h


async def alice_facts(h: Harness) -> list[str]:
    """Alice's facts, her display name spelled "Alice"."""
    found = await h.memory.facts.find(str(h.guild.id), subject=str(h.alice.id))
    return sorted(f.fact.replace(h.alice.display_name, "Alice") for f in found)


async def test_consent_commands_join_the_memory_group() -> None:
    from bot.client import GuildloreBot
    from bot.settings import ReplyConfig

    bot = GuildloreBot(memory=None, reply_config=ReplyConfig())  # type: ignore[arg-type]
    await bot.load_extension("bot.cogs.memory_commands")
    await bot.load_extension("bot.cogs.consent")
    group = bot.tree.get_command("memory")
    assert isinstance(group, app_commands.Group)
    pending = group.get_command("pending")
    assert isinstance(pending, app_commands.Command) and pending.parameters == []
    cog = bot.get_cog("Consent")
    assert cog is not None
    assert "on_app_command_completion" in {name for name, _ in cog.get_listeners()}
    await bot.unload_extension("bot.cogs.consent")
    assert group.get_command("pending") is None
    await bot.close()


async def test_prompt_appears_once_and_accept_stores(harness: Harness) -> None:
    h = harness
    await h.say(SENSITIVE)
    await h.say("I love hiking in the Alps.")
    await h.settle()
    assert await alice_facts(h) == ["Alice loves hiking in the Alps."]

    # Bob has nothing pending and sees nothing of Alice's.
    assert await consent_prompt(h.memory, h.guild, h.bob) is None
    bob_pending = await pending_answer(h.memory, h.guild, h.bob)
    assert bob_pending.view is None and "Catholic" not in bob_pending.text

    prompt = await consent_prompt(h.memory, h.guild, h.alice)
    assert prompt is not None and prompt.ephemeral
    assert f"{h.alice.display_name} is a practising Catholic." in prompt.text
    view = prompt.view
    assert isinstance(view, ConsentView) and view.owner_id == h.alice.id
    labels = [c.label for c in view.children if isinstance(c, discord.ui.Button)]
    assert labels == ["Accept 1", "Reject 1"]
    # Asked once: the next interaction shows no prompt.
    assert await consent_prompt(h.memory, h.guild, h.alice) is None

    assert await view.decide(view.items[0].id, True) == "remembered"
    assert all(c.disabled for c in view.children if isinstance(c, discord.ui.Button))
    assert "~~" in view.text and "remembered" in view.text
    assert await alice_facts(h) == [
        "Alice is a practising Catholic.",
        "Alice loves hiking in the Alps.",
    ]
    facts = await h.memory.facts.find(str(h.guild.id), subject=str(h.alice.id))
    catholic = next(f for f in facts if "Catholic" in f.fact)
    history = await h.memory.facts.history(str(h.guild.id), catholic.id)
    assert history[0].actor == f"user:{h.alice.id}"
    empty = await pending_answer(h.memory, h.guild, h.alice)
    assert empty.text == "Nothing is waiting for your consent." and empty.view is None


async def test_pending_lists_and_reject_stores_nothing(harness: Harness) -> None:
    h = harness
    await h.say(SENSITIVE)
    await h.settle()
    answer = await pending_answer(h.memory, h.guild, h.alice)
    assert answer.ephemeral and isinstance(answer.view, ConsentView)
    assert f"{h.alice.display_name} is a practising Catholic." in answer.text
    # Listed by /memory pending: no separate prompt afterwards.
    assert await consent_prompt(h.memory, h.guild, h.alice) is None
    assert await answer.view.decide(answer.view.items[0].id, False) == "not kept"
    assert await alice_facts(h) == []
    assert await h.memory.consent.pending(str(h.guild.id), str(h.alice.id)) == []
    # A second click changes nothing.
    assert await answer.view.decide(answer.view.items[0].id, True) == "not kept"
    assert await alice_facts(h) == []


async def test_never_drops_and_store_keeps(harness: Harness) -> None:
    h = harness
    gid = str(h.guild.id)
    await h.memory.guilds.set_setting(gid, "sensitive_facts", "never")
    await h.say(SENSITIVE)
    await h.settle()
    assert await alice_facts(h) == []
    assert await consent_prompt(h.memory, h.guild, h.alice) is None
    await h.memory.guilds.set_setting(gid, "sensitive_facts", "store")
    await h.say("I am a devout Catholic.")
    await h.settle()
    assert await alice_facts(h) == ["Alice is a devout Catholic."]


async def test_expiry_job_drops_unanswered_facts(make_memory: Any, fake_openai: FakeOpenAI) -> None:
    clock = FakeClock(datetime.now(UTC))
    memory = await make_memory(clock=clock)
    h = await make_harness(memory, fake_openai)
    await h.say(SENSITIVE)
    await h.settle()
    jobs = Jobs(memory, snapshot_interval_s=300, reindex_interval_min=0)
    jobs.start()
    assert jobs.scheduler is not None
    job = {j.id: j for j in jobs.scheduler.get_jobs()}["consent_expiry"]
    await job.func()
    assert len(await memory.consent.pending(str(h.guild.id), str(h.alice.id))) == 1
    clock.advance(days=7, minutes=1)
    await job.func()
    assert jobs.runs["consent_expiry"] == 2
    assert await memory.consent.counts() == {}
    assert await consent_prompt(memory, h.guild, h.alice) is None
    assert await alice_facts(h) == []
    await jobs.stop()
    h.bot.accepting = False


async def test_llm_labels_through_the_bot(make_memory: Any, fake_openai: FakeOpenAI) -> None:
    extractor = LLMExtractor(fake_openai.client(), "extract-model", timeout_s=30.0)
    memory = await make_memory(extractor=extractor)
    h = await make_harness(memory, fake_openai, chat=False)
    fact = {"fact": "Alice takes insulin daily.", "type": "profile", "confidence": 0.8}
    fake_openai.script_chat(
        json.dumps({"facts": [{**fact, "evidence": None}]}),
        json.dumps({"labels": [{"index": 1, "category": "health"}]}),
    )
    await h.say("I take insulin daily.")
    await h.settle()
    assert await alice_facts(h) == []
    prompt = await consent_prompt(memory, h.guild, h.alice)
    assert prompt is not None and "Alice takes insulin daily. (health;" in prompt.text
    assert isinstance(prompt.view, ConsentView)
    await prompt.view.decide(prompt.view.items[0].id, True)
    assert await alice_facts(h) == ["Alice takes insulin daily."]
    h.bot.accepting = False
