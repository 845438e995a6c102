"""The ``memory_query`` tool in real replies: the real ``GuildloreBot`` under
dpytest, the real engine, and the fake OpenAI server through the real
``openai`` client. A lookup is a tool call where the endpoint supports tools
and the JSON directive where it does not; either way exactly one follow-up
carries ``[M#]`` bullets, at most two calls run per reply, the allowlists
hold, and the reply's row, traces and context are written."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from aiohttp.test_utils import TestClient, TestServer

from bot.cogs.replies import APOLOGY
from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from memory.reply.tools import LIMIT_REACHED
from tests.bot.test_bot import Harness, open_harness, reply_json, without_sources
from tests.fakeopenai import FakeOpenAI, Fault, ToolCalls
from tests.helpers import eventually


@pytest_asyncio.fixture
async def harness(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in open_harness(make_memory, fake_openai):
        yield h


def query(q: str, **args: Any) -> ToolCalls:
    return ToolCalls.one("memory_query", {"query": q, **args})


def bodies(h: Harness) -> list[dict[str, Any]]:
    return [r.body for r in h.fake.chat_requests()]


async def reply_row(h: Harness) -> dict[str, Any]:
    gid = str(h.guild.id)

    async def rows() -> bool:
        return bool(await h.memory.admin.action_log(kind="reply", guild_id=gid))

    assert await eventually(rows)
    (row,) = await h.memory.admin.action_log(kind="reply", guild_id=gid)
    assert row.detail is not None
    return row.detail


async def hiking(h: Harness) -> None:
    await h.say("I love hiking in the Alps.")
    await h.say("My favourite food is ramen.", member=h.bob)
    await h.settle()


async def test_a_tool_call_round_trip_makes_exactly_one_follow_up(harness: Harness) -> None:
    h = harness
    await hiking(h)
    h.fake.script_chat(query("hiking"), reply_json("You love hiking in the Alps [M1]."))
    trigger = await h.say(f"{h.mention} what do I do on weekends?")

    assert [without_sources(m.content) for m in h.sent()] == ["You love hiking in the Alps [M1]."]
    first, follow = bodies(h)
    assert [t["function"]["name"] for t in first["tools"]] == ["memory_query"]
    assert first["tool_choice"] == "auto"
    assert "call the memory_query tool" in first["messages"][0]["content"]
    assert "memoryLookupQuery" not in first["messages"][0]["content"]
    assert follow["messages"][: len(first["messages"])] == first["messages"]
    call_turn, tool_turn = follow["messages"][len(first["messages"]) :]
    (call,) = call_turn["tool_calls"]
    assert call_turn["role"] == "assistant" and call["function"]["name"] == "memory_query"
    assert json.loads(call["function"]["arguments"]) == {"query": "hiking"}
    assert tool_turn["role"] == "tool" and tool_turn["tool_call_id"] == call["id"]
    result = tool_turn["content"]
    assert result.startswith('Memory lookup results for "hiking":\n[M1] ')
    assert "hiking in the Alps" in result and "ramen" not in result
    # One call of two used: the follow-up may still call.
    assert follow["tool_choice"] == "auto"

    d = await reply_row(h)
    (traced,) = d["tool_calls"]
    bullets = [line for line in result.splitlines() if line.startswith("[M")]
    assert traced["via"] == "tool" and traced["query"] == "hiking" and traced["error"] is None
    assert traced["hits"] == len(bullets) == len(traced["hit_ids"]) >= 1
    assert traced["filters"] == {"top_k": 5, "budget_tokens": 400}
    assert d["lookup_mode"] == "tool" and d["llm_calls"] == 2
    assert d["lookup_hits"] == traced["hits"]

    # Traces carry the memory's type and source; the context holds the whole request.
    gid = str(h.guild.id)
    traces = await h.memory.traces.for_message(gid, str(trigger.id))
    hit_traces = [
        t for t in traces if t.fact_id is not None and str(t.fact_id) in traced["hit_ids"]
    ]
    assert hit_traces and {(t.memory_type, t.source) for t in hit_traces} == {
        ("facts", "extractor")
    }
    context = await h.memory.traces.context(gid, str(trigger.id))
    assert context is not None
    assert context["system"] == first["messages"][0]["content"]
    assert context["turns"][-1]["content"].endswith("what do I do on weekends?")
    assert context["tool"]["function"]["name"] == "memory_query"
    assert context["calls"][0]["result"] == result


async def test_without_tool_support_the_json_directive_is_used_and_remembered(
    harness: Harness,
) -> None:
    h = harness
    h.fake.reject_tools = True
    await hiking(h)
    h.fake.script_chat(
        reply_json("", lookup="hiking"), reply_json("You love hiking in the Alps [M1].")
    )
    await h.say(f"{h.mention} what do I do on weekends?")

    assert [without_sources(m.content) for m in h.sent()] == ["You love hiking in the Alps [M1]."]
    rejected, first, follow = bodies(h)
    assert "tools" in rejected  # the one request that found out
    assert "tools" not in first and "tools" not in follow
    assert "memoryLookupQuery" in first["messages"][0]["content"]
    assert "call the memory_query tool" not in first["messages"][0]["content"]
    assert follow["messages"][:-2] == first["messages"]
    turn = follow["messages"][-1]
    assert turn["role"] == "user" and "[M1] " in turn["content"]
    assert "hiking in the Alps" in turn["content"]
    d = await reply_row(h)
    assert d["lookup_mode"] == "directive" and d["tool_calls"][0]["via"] == "directive"
    assert d["tool_calls"][0]["hits"] >= 1

    # Learned once for this model: the next reply does not offer tools at all.
    h.fake.script_chat(reply_json("Hello again."))
    await h.say(f"{h.mention} hi")
    assert "tools" not in bodies(h)[-1] and len(bodies(h)) == 4


async def test_at_most_two_calls_run_then_the_model_must_answer(harness: Harness) -> None:
    h = harness
    await hiking(h)
    h.fake.script_chat(
        query("hiking"),
        query("ramen"),
        # Asked with tool_choice "none", the model can only answer.
        ToolCalls.one("memory_query", {"query": "more"}, content=reply_json("Hiking [M1].")),
    )
    await h.say(f"{h.mention} what do we all like?")

    assert [without_sources(m.content) for m in h.sent()] == ["Hiking [M1]."]
    choices = [b["tool_choice"] for b in bodies(h)]
    assert choices == ["auto", "auto", "none"]
    d = await reply_row(h)
    assert [c["query"] for c in d["tool_calls"]] == ["hiking", "ramen"]


async def test_calls_beyond_the_limit_in_one_turn_are_answered_with_an_error(
    harness: Harness,
) -> None:
    h = harness
    await hiking(h)
    h.fake.script_chat(
        ToolCalls(
            (
                ("memory_query", {"query": "hiking"}),
                ("memory_query", {"query": "ramen"}),
                ("memory_query", {"query": "anything"}),
            )
        ),
        reply_json("Hiking and ramen."),
    )
    await h.say(f"{h.mention} what do we all like?")

    assert [m.content for m in h.sent()] == ["Hiking and ramen."]
    follow = bodies(h)[1]
    tool_turns = [m for m in follow["messages"] if m["role"] == "tool"]
    assert [t["content"] == LIMIT_REACHED for t in tool_turns] == [False, False, True]
    assert follow["tool_choice"] == "none"
    assert len((await reply_row(h))["tool_calls"]) == 2


async def test_a_disallowed_type_is_refused_server_side(harness: Harness) -> None:
    h = harness
    gid = str(h.guild.id)
    await h.memory.lore.remember(
        gid, "the summer meetup is in Zermatt", source_text="the summer meetup is in Zermatt"
    )
    await h.memory.guilds.set_setting(gid, "tool_memory_types", "facts")
    h.fake.script_chat(
        query("summer meetup", types=["lore"]),
        query("summer meetup"),
        reply_json("I can't see that."),
    )
    await h.say(f"{h.mention} where is the summer meetup?")

    assert [m.content for m in h.sent()] == ["I can't see that."]
    second, third = bodies(h)[1:]
    refused = second["messages"][-1]
    assert refused["role"] == "tool"
    assert refused["content"].startswith("memory_query error: memory type(s) lore are not allowed")
    # Without types the allowlist still binds: the lore line is not among the results.
    assert "Zermatt" not in third["messages"][-1]["content"]
    d = await reply_row(h)
    first_call, second_call = d["tool_calls"]
    assert "not allowed" in first_call["error"] and first_call["hits"] == 0
    assert second_call["error"] is None


async def test_tool_path_faults_end_in_the_apology_and_lose_nothing(harness: Harness) -> None:
    h = harness
    await hiking(h)
    gid = str(h.guild.id)
    assert h.bot.chat is not None
    for fault in (Fault.status(500), Fault.timeout(600.0)):
        # Short only against the server that never answers in time.
        h.bot.chat.timeout_s = 0.5 if fault.kind == "timeout" else 30.0
        h.fake.script_chat(query("hiking"), fault)
        before = len(h.sent())
        trigger = await h.say(f"{h.mention} what do I like?")
        assert [m.content for m in h.sent()[before:]] == [APOLOGY]
        await h.settle()
        stored = await h.memory.get_message(gid, str(trigger.id))
        assert stored is not None and stored.state == "done"
    errors = await h.memory.admin.action_log(kind="bot_error", guild_id=gid)
    assert len(errors) == 2
    assert await h.memory.admin.action_log(kind="reply", guild_id=gid) == []


async def test_the_traces_page_shows_what_the_model_saw(
    harness: Harness, aiohttp_client: Any
) -> None:
    h = harness
    await hiking(h)
    h.fake.script_chat(query("hiking", top_k=3), reply_json("Hiking [M1]."))
    trigger = await h.say(f"{h.mention} what do I do on weekends?")
    await reply_row(h)
    config = DashboardConfig()
    server = TestServer(create_app(h.memory, config))
    await server.start_server(**runner_options(config))
    client: TestClient[Any, Any] = await aiohttp_client(server)

    page = await client.get(
        "/traces", params={"guildId": str(h.guild.id), "messageId": str(trigger.id)}
    )
    html = await page.text()
    assert page.status == 200
    assert "What the model saw" in html
    assert "Known facts about this user:" in html  # the memory sections
    assert "what do I do on weekends?" in html  # the member's turn
    assert "Tool offered" in html and "memory_query" in html
    assert "[M1] " in html and "top_k" in html
    assert "from extractor" in html and ">facts<" in html
    api = await (
        await client.get(
            "/api/memory/traces", params={"guildId": str(h.guild.id), "messageId": str(trigger.id)}
        )
    ).json()
    assert api["context"]["calls"][0]["filters"]["top_k"] == 3


async def test_a_reply_context_is_erased_with_anything_it_holds(harness: Harness) -> None:
    h = harness
    gid = str(h.guild.id)
    await hiking(h)

    async def reply(text: str) -> str:
        h.fake.script_chat(query("hiking"), reply_json("Hiking [M1]."))
        trigger = await h.say(f"{h.mention} {text}")
        return str(trigger.id)

    # Bob's message is in the window: forgetting Bob erases the context.
    first = await reply("what do I like?")
    assert await h.memory.traces.context(gid, first) is not None
    await h.memory.forget(gid, str(h.bob.id))
    assert await h.memory.traces.context(gid, first) is None
    # A fact the lookup returned, deleted by an operator, takes it too.
    second = await reply("what do I like again?")
    context = await h.memory.traces.context(gid, second)
    assert context is not None
    fact_id = int(context["calls"][0]["hit_ids"][0])
    assert await h.memory.facts.delete(gid, fact_id)
    assert await h.memory.traces.context(gid, second) is None
    # And the member who asked, forgetting themselves.
    await h.say("I love hiking in the Alps.")
    await h.settle()
    third = await reply("and now?")
    assert await h.memory.traces.context(gid, third) is not None
    await h.memory.forget(gid, str(h.alice.id))
    assert await h.memory.traces.context(gid, third) is None


async def test_an_endpoint_that_handled_tools_and_now_rejects_them_is_an_error_until_forgotten(
    harness: Harness,
) -> None:
    """Known to take tools, the endpoint's rejection is an error, not a silent
    switch (a 400 may have another cause); a process that forgets what it
    learnt (a restart: a new chat model) finds out again."""
    h = harness
    await hiking(h)
    h.fake.script_chat(ToolCalls.one("memory_query", {"query": "hiking"}), "Alps [M1].")
    await h.say(f"{h.mention} what do I do on weekends?")
    assert [without_sources(m.content) for m in h.sent()] == ["Alps [M1]."]
    h.fake.reject_tools = True
    h.fake.script_chat(reply_json("You love hiking [M1]."))
    await h.say(f"{h.mention} and on holidays?")
    assert "Sorry" in h.sent()[-1].content
    assert h.bot.chat is not None
    h.bot.chat.tools = None  # what a restart knows
    h.fake.script_chat(reply_json("You love hiking [M1]."))
    await h.say(f"{h.mention} and at Easter?")
    assert h.sent()[-1].content == "You love hiking [M1]."
