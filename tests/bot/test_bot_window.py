"""Replies that follow the conversation: the real ``GuildloreBot`` under dpytest,
the real engine and the fake OpenAI server. The chat request the server
records must hold the channel's short-term window, and each reply writes one
``reply`` action-log row."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import discord
import pytest_asyncio
from discord.ext.test import backend as dback

from memory.text import estimate_tokens
from tests.bot.test_bot import Harness, make_private, open_harness, reply_json
from tests.fakeopenai import FakeOpenAI
from tests.helpers import eventually


@pytest_asyncio.fixture
async def harness(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in open_harness(make_memory, fake_openai):
        yield h


def turns(h: Harness, i: int = -1) -> list[dict[str, Any]]:
    """The chat turns of the ``i``-th recorded request, without the system prompt."""
    messages: list[dict[str, Any]] = h.fake.chat_requests()[i].body["messages"]
    assert messages[0]["role"] == "system"
    return messages[1:]


def make_thread(h: Harness, parent: Any, thread_id: int, name: str) -> discord.Thread:
    """A public thread in ``parent``; started from a message, it has that message's id."""
    data: Any = {
        "id": thread_id,
        "type": 11,
        "guild_id": h.guild.id,
        "parent_id": parent.id,
        "owner_id": h.alice.id,
        "name": name,
        "message_count": 0,
        "member_count": 1,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": "2026-11-22T12:00:00+00:00",
            "locked": False,
        },
    }
    dback.get_state().parse_thread_create(data)
    thread = h.guild.get_thread(thread_id)
    assert thread is not None
    return thread


async def test_the_request_holds_the_window_in_order_within_its_bounds(harness: Harness) -> None:
    h = harness
    said = []
    for i in range(40):
        member = h.bob if i % 2 else h.alice
        await h.say(f"chatter number {i} about the trip", member=member)
        said.append(f"{member.display_name}: chatter number {i} about the trip")
    await h.settle()
    h.fake.script_chat(reply_json("Sounds fun."), reply_json("Still fun."))
    await h.say(f"{h.mention} so where are we going?")
    assert [m.content for m in h.sent()] == ["Sounds fun."]

    window = turns(h)[:-1]
    # The default bound: the last 35 messages before the question, oldest first.
    assert [t["content"] for t in window] == said[-35:]
    assert {t["role"] for t in window} == {"user"}
    assert turns(h)[-1] == {
        "role": "user",
        "content": f"{h.alice.display_name}: so where are we going?",
    }

    # A token bound cuts the oldest first.
    h.bot.reply_config = replace(h.bot.reply_config, recent_tokens=120)
    await h.settle()
    await h.say(f"{h.mention} and when?")
    window = turns(h)[:-1]
    assert window and sum(estimate_tokens(t["content"]) for t in window) <= 120
    contents = [t["content"] for t in window]
    assert contents[-1] == "Sounds fun."  # the bot's previous reply, newest
    assert contents[:-2] == said[len(said) - len(contents) + 2 :]


async def test_the_bots_previous_reply_is_an_assistant_turn(harness: Harness) -> None:
    h = harness
    h.fake.script_chat(reply_json("Zermatt is lovely in June."), reply_json("June works."))
    await h.say(f"{h.mention} where should we hike?")
    (first,) = h.sent()
    await h.say("I agree, Zermatt!", member=h.bob)
    await h.settle()
    await h.reply_to(first, "is June too early?")
    assert [m.content for m in h.sent()] == ["June works."]
    mention = f"@{h.guild.me.display_name}" if h.guild.me is not None else ""
    assert [(t["role"], t["content"]) for t in turns(h)] == [
        ("user", f"{h.alice.display_name}: {mention} where should we hike?"),
        ("assistant", "Zermatt is lovely in June."),
        ("user", f"{h.bob.display_name}: I agree, Zermatt!"),
        ("user", f"{h.alice.display_name}: is June too early?"),
    ]
    # The reply is kept for the window only: never ingested, never searched.
    assert await h.memory.get_message(str(h.guild.id), str(first.id)) is None
    hits = await h.memory.search(str(h.guild.id), "lovely in June", scope="all", gate=False)
    assert all("lovely" not in hit.text for hit in hits)


async def test_unreadable_and_excluded_channels_never_enter_the_window(harness: Harness) -> None:
    h = harness
    gid = str(h.guild.id)
    make_private(h, h.mods, h.bob)
    starter = await h.say("secret plan: the surprise party", member=h.bob, channel=h.mods)
    thread = make_thread(h, h.mods, starter.id, "party")
    await h.say("bring a cake", member=h.bob, channel=thread)
    await h.say("public chatter", channel=h.general)
    await h.settle()
    h.fake.script_chat(reply_json("Hm?"), reply_json("Hi."), reply_json("Hello."))

    # Alice cannot read #mods, so neither its thread nor the starter is shown to her.
    await h.say(f"{h.mention} what is going on here?", channel=thread)
    assert turns(h)[:-1] == []
    assert "secret plan" not in str(h.fake.chat_requests()[-1].body)

    await h.say(f"{h.mention} hi", channel=h.general)
    assert [t["content"] for t in turns(h)[:-1]] == [f"{h.alice.display_name}: public chatter"]

    # A channel excluded from memory is never in a window, even what was stored before.
    await h.memory.guilds.set_setting(gid, "excluded_channels", str(h.general.id))
    await h.say(f"{h.mention} hello", channel=h.general)
    assert turns(h)[:-1] == []


async def test_a_thread_sees_its_starter_and_its_own_history(harness: Harness) -> None:
    h = harness
    starter = await h.say("who is up for a hike on Saturday?")
    thread = make_thread(h, h.general, starter.id, "hike")
    await h.say("me, if it does not rain", member=h.bob, channel=thread)
    await h.say("unrelated chatter in the parent")
    await h.settle()
    h.fake.script_chat(reply_json("The forecast is dry."))
    await h.say(f"{h.mention} will it rain?", channel=thread)
    assert [t["content"] for t in turns(h)[:-1]] == [
        f"{h.alice.display_name}: who is up for a hike on Saturday?",
        f"{h.bob.display_name}: me, if it does not rain",
    ]


async def test_each_reply_writes_a_reply_action_log_row(harness: Harness) -> None:
    h = harness
    gid = str(h.guild.id)
    await h.say("I love hiking in the Alps.")
    await h.settle()
    first = reply_json("", lookup="hiking in the Alps")
    second = reply_json("You love the Alps [M1].", line="the club hike is on Sunday")
    h.fake.script_chat(first, second)
    trigger = await h.say(f"{h.mention} remember that the club hike is on Sunday; what do I like?")
    (sent,) = h.sent()

    assert await eventually(lambda: _reply_rows(h, gid))
    (row,) = await h.memory.admin.action_log(kind="reply", guild_id=gid)
    d = row.detail
    assert d is not None
    requests = h.fake.chat_requests()
    # The fake server reports word counts as usage; the row adds up both calls.
    prompt = sum(len(str(m["content"]).split()) for r in requests for m in r.body["messages"])
    assert d["model"] == "gpt-4o-mini" and d["llm_calls"] == 2
    assert d["prompt_tokens"] == prompt
    assert d["completion_tokens"] == len(first.split()) + len(second.split())
    assert isinstance(d["latency_ms"], float) and d["latency_ms"] >= d["compose_ms"] >= 0
    assert d["lookup"] is True and d["lookup_hits"] >= 1
    lore = await h.memory.facts.find(gid)
    stored = [f for f in lore if "club hike" in f.fact]
    assert d["stored"] == [{"fact_id": stored[0].id, "event": "add"}]
    assert d["message_id"] == str(trigger.id) and d["reply_id"] == str(sent.id)
    assert d["sent"] is True and d["window_messages"] == 1
    assert "1 lookup(s) via directive: " in row.message and "1 stored" in row.message
    # Erased with the member it answered.
    await h.memory.forget(gid, str(h.alice.id))
    assert await h.memory.admin.action_log(kind="reply", guild_id=gid) == []


async def _reply_rows(h: Harness, gid: str) -> bool:
    return bool(await h.memory.admin.action_log(kind="reply", guild_id=gid))
