"""``memory.reply.conversation`` without Discord: the real engine, the real ``openai``
client and the fake OpenAI server, driven with plain ``ReplyRequest`` values.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from memory import (
    LORE_SUBJECT,
    LLMError,
    Memory,
    ReplyRequest,
    ReplyResult,
    compose_reply,
)
from memory.errors import MalformedReply
from memory.llm import ChatModel
from memory.models import Hit, PromptSlice, ScoreParts
from memory.reply.conversation import render_fact, render_sections
from memory.reply.memory_query import render_results
from memory.reply.tools import parse_reply
from memory.text import estimate_tokens
from tests.fakeopenai import FakeOpenAI, Fault
from tests.helpers import ALICE, BOB, CHANNEL, GUILD, msg

PRIVATE = "666666666666666666"
PERSONA = "You are guildlore, this server's friendly bot."


def reply_json(
    text: str, line: str | None = None, lookup: str | dict[str, Any] | None = None
) -> str:
    return json.dumps({"text": text, "memoryLine": line, "memoryLookupQuery": lookup})


def request(
    text: str,
    *,
    message_id: str = "900000000000000001",
    visible: frozenset[str] = frozenset({CHANNEL}),
    replied_text: str | None = None,
) -> ReplyRequest:
    return ReplyRequest(
        guild_id=GUILD,
        guild_name="Hikers",
        channel_id=CHANNEL,
        channel_name="general",
        author_id=ALICE,
        author_name="Alice",
        message_id=message_id,
        text=text,
        visible_channels=visible,
        channel_names={CHANNEL: "general", PRIVATE: "mods"},
        replied_text=replied_text,
    )


async def compose(
    mem: Memory, fake: FakeOpenAI, req: ReplyRequest, chat: ChatModel | None = None
) -> ReplyResult:
    """One reply; ``chat``: the process's chat model when a test follows what
    it learns from one reply to the next (as the bot keeps one)."""
    own = chat is None
    # All the time a loaded machine needs: a test of the timeout passes its own.
    chat = chat or ChatModel(fake.client(), "gpt-4o-mini", timeout_s=30.0)
    try:
        return await compose_reply(mem, chat, req, persona=PERSONA, temperature=0.7, max_tokens=700)
    finally:
        if own:
            # On this loop: a client collected later closes on a dead loop and logs an error.
            await chat.client.close()


async def say(mem: Memory, text: str, **kw: Any) -> str:
    m = msg(text, **kw)
    assert await (await mem.ingest_message(m)).wait()
    return m.id


def system_of(fake: FakeOpenAI, i: int = 0) -> str:
    content: str = fake.chat_requests()[i].body["messages"][0]["content"]
    return content


# -- the prompt ---------------------------------------------------------------------------------


async def test_prompt_has_the_memory_sections_with_provenance(
    make_memory: Any, fake_openai: FakeOpenAI, clock: Any
) -> None:
    mem = await make_memory(clock=clock)
    # Said two days before "today": the prompt dates the fact by its message.
    await say(mem, "I love hiking in the Alps.", created_at="2026-11-20T09:00:00.000Z")
    await mem.lore.remember(
        GUILD, "the summer meetup is in Zermatt", source_text="the summer meetup is in Zermatt"
    )
    trigger = await say(mem, "any tips for my summer holiday?")
    assert await mem.settle()
    fake_openai.script_chat(reply_json("You love hiking! Zermatt should suit you."))

    result = await compose(
        mem, fake_openai, request("any tips for my summer holiday?", message_id=trigger)
    )

    assert result.text == "You love hiking! Zermatt should suit you."
    assert result.stored == () and result.lookup_query is None and result.lookup_hits == 0
    assert any("loves hiking in the Alps" in h.text for h in result.retrieved)
    (sent,) = fake_openai.chat_requests()
    assert sent.body["response_format"] == {"type": "json_object"}
    system = system_of(fake_openai)
    assert system.startswith(PERSONA)
    assert 'the Discord server "Hikers", channel #general. Today is 2026-11-22 (UTC)' in system
    assert "Known facts about this user:" in system
    assert "Relevant durable memory:" in system
    assert "Relevant past messages:" in system
    assert "Alice loves hiking in the Alps. (conf 0.62, 2026-11-20" in system
    assert 'evidence: "I love hiking in the Alps."' in system
    assert "Memory line: the summer meetup is in Zermatt." in system
    assert "any tips" not in system  # the message being answered is not a "past message"
    assert sent.body["messages"][-1] == {
        "role": "user",
        "content": "Alice: any tips for my summer holiday?",
    }


async def test_memory_from_channels_the_audience_cannot_read_stays_out(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    mem = await make_memory()
    await say(mem, "I work as a nurse in Berlin.", channel=PRIVATE)
    assert await mem.settle()
    fake_openai.script_chat(reply_json("Public."), reply_json("Private."))
    await compose(mem, fake_openai, request("where do I work?"))
    await compose(
        mem, fake_openai, request("where do I work?", visible=frozenset({CHANNEL, PRIVATE}))
    )
    assert "nurse in Berlin" not in system_of(fake_openai, 0)
    assert "nurse in Berlin" in system_of(fake_openai, 1)


async def test_the_replied_bot_message_is_the_assistant_turn(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    mem = await make_memory()
    fake_openai.script_chat(reply_json("Second answer."))
    await compose(mem, fake_openai, request("and one more thing", replied_text="First answer."))
    turns = fake_openai.chat_requests()[0].body["messages"]
    assert [t["role"] for t in turns] == ["system", "assistant", "user"]
    assert turns[1]["content"] == "First answer."


# -- the lookup ---------------------------------------------------------------------------------


async def test_a_lookup_makes_exactly_one_follow_up_with_numbered_hits(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    mem = await make_memory()
    await say(mem, "I love hiking in the Alps.")
    await say(mem, "My favourite food is ramen.", author=BOB, name="Bob")
    assert await mem.settle()
    fake_openai.script_chat(
        reply_json("", lookup="hiking in the Alps"),
        reply_json("Yes, you love hiking in the Alps [M1]."),
    )

    result = await compose(mem, fake_openai, request("what do I do on weekends?"))

    assert result.text == "Yes, you love hiking in the Alps [M1]."
    first, follow = (r.body["messages"] for r in fake_openai.chat_requests())
    assert len(fake_openai.chat_requests()) == 2
    assert follow[:-2] == first
    assert follow[-2]["role"] == "assistant"
    assert json.loads(follow[-2]["content"])["memoryLookupQuery"] == "hiking in the Alps"
    turn = follow[-1]["content"]
    assert turn.startswith('Memory lookup results for "hiking in the Alps":\n')
    assert "[M1] Alice loves hiking in the Alps. (conf 0.62" in turn
    assert "one more lookup" in turn
    assert "ramen" not in turn  # strict search: only hits that pass
    bullets = [line for line in turn.splitlines() if line.startswith("[M")]
    assert result.lookup_query == "hiking in the Alps"
    assert result.lookup_hits == len(bullets) >= 1
    assert any(h.kind == "fact" and "hiking" in h.text for h in result.retrieved)
    assert len({(h.kind, h.id) for h in result.retrieved}) == len(result.retrieved)


async def test_a_third_directive_lookup_is_not_run(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    mem = await make_memory()
    fake_openai.script_chat(
        reply_json("", lookup="hiking"),
        reply_json("", lookup="ramen"),
        # The calls are used up: this lookup is ignored and the text stands.
        reply_json("Hiking, I think.", lookup="anything else"),
    )
    result = await compose(mem, fake_openai, request("what do I do on weekends?"))
    assert result.text == "Hiking, I think."
    assert [c.query for c in result.calls] == ["hiking", "ramen"]
    assert len(fake_openai.chat_requests()) == 3
    assert (
        "Lookups are now disabled" in fake_openai.chat_requests()[2].body["messages"][-1]["content"]
    )


async def test_a_lookup_without_match_says_so(make_memory: Any, fake_openai: FakeOpenAI) -> None:
    mem = await make_memory()
    fake_openai.script_chat(
        reply_json("", lookup="quantum chromodynamics lecture notes"),
        reply_json("I don't have anything on that."),
    )
    result = await compose(mem, fake_openai, request("what did we say about physics?"))
    assert result.text == "I don't have anything on that."
    assert (result.lookup_query, result.lookup_hits) == ("quantum chromodynamics lecture notes", 0)
    turn = fake_openai.chat_requests()[1].body["messages"][-1]["content"]
    assert "no durable match" in turn and "[M1]" not in turn


async def test_a_failed_follow_up_keeps_the_first_answer(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    mem = await make_memory()
    fake_openai.script_chat(reply_json("Probably yes.", lookup="hiking"), Fault.status(500))
    result = await compose(mem, fake_openai, request("do I like hiking?"))
    assert result.text == "Probably yes."
    # Without a first answer to fall back on, the failure is the reply's.
    fake_openai.script_chat(reply_json("", lookup="hiking"), Fault.status(500))
    with pytest.raises(LLMError):
        await compose(mem, fake_openai, request("do I like hiking?"))


# -- plain text and failures --------------------------------------------------------------------


async def test_output_that_is_not_json_is_the_reply(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    mem = await make_memory()
    fake_openai.script_chat("Just plain words, no JSON here.")
    result = await compose(mem, fake_openai, request("hello"))
    assert result.text == "Just plain words, no JSON here."
    assert result.stored == () and result.lookup_query is None


@pytest.mark.parametrize(
    "fault",
    [Fault.status(500), Fault.status(429), Fault.timeout(600.0), Fault.malformed()],
    ids=["500", "429", "timeout", "malformed-body"],
)
async def test_a_model_failure_is_an_llm_error(
    make_memory: Any, fake_openai: FakeOpenAI, fault: Fault
) -> None:
    mem = await make_memory()
    fake_openai.script_chat(fault)
    chat = ChatModel(
        fake_openai.client(), "gpt-4o-mini", timeout_s=0.5 if fault.kind == "timeout" else 30.0
    )
    try:
        with pytest.raises(LLMError):
            await compose(mem, fake_openai, request("hello?"), chat)
    finally:
        await chat.client.close()


@pytest.mark.parametrize("garbage", ["", "   ", '{"memoryLine": "x"}', '{"text": [1, 2'])
async def test_unusable_output_is_a_malformed_reply(
    make_memory: Any, fake_openai: FakeOpenAI, garbage: str
) -> None:
    mem = await make_memory()
    fake_openai.script_chat(garbage)
    with pytest.raises(MalformedReply):
        await compose(mem, fake_openai, request("hello?"))
    assert await mem.facts.find(GUILD, subject=LORE_SUBJECT) == []


# -- the lore line ------------------------------------------------------------------------------


async def test_memory_line_is_stored_as_lore_with_its_event(
    make_memory: Any, fake_openai: FakeOpenAI, clock: Any
) -> None:
    # The clock stands still, so the second store happens at the creation time:
    # only the engine knows the line was known already (the write decision's
    # noop), the timestamps cannot tell.
    mem = await make_memory(clock=clock)
    said = "please remember that the server meetup is on Friday at the pub"
    line = "the server meetup is on Friday at the pub"
    fake_openai.script_chat(
        reply_json("Noted!", line=line), reply_json("Already noted.", line=line)
    )

    first = await compose(mem, fake_openai, request(said, message_id="900000000000000001"))
    again = await compose(mem, fake_openai, request(said, message_id="900000000000000002"))

    assert first.text == "Noted!"
    ((fact, event),) = [(r.fact, r.event) for r in first.stored]
    assert event == "add"
    assert fact.fact == "Memory line: the server meetup is on Friday at the pub."
    assert (fact.subject, fact.fact_type, fact.channel_id) == (LORE_SUBJECT, "lore", CHANNEL)
    assert fact.source_message_id == "900000000000000001"
    ((updated, event),) = [(r.fact, r.event) for r in again.stored]
    assert event == "noop" and updated.id == fact.id
    assert updated.created_at == updated.updated_at
    assert [f.id for f in await mem.facts.find(GUILD, subject=LORE_SUBJECT)] == [fact.id]


async def test_a_lookup_reply_can_store_a_line_from_each_turn(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    mem = await make_memory()
    said = "remember the cabin is in Arosa and the hike starts at dawn"
    fake_openai.script_chat(
        reply_json("", line="the cabin is in Arosa", lookup="cabin"),
        reply_json("Got both.", line="the hike starts at dawn"),
    )
    result = await compose(mem, fake_openai, request(said))
    assert [(r.fact.fact, r.event) for r in result.stored] == [
        ("Memory line: the cabin is in Arosa.", "add"),
        ("Memory line: the hike starts at dawn.", "add"),
    ]


async def test_a_line_the_member_did_not_say_is_refused(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    mem = await make_memory()
    fake_openai.script_chat(reply_json("Sure.", line="bananas are the official currency"))
    result = await compose(mem, fake_openai, request("what's up?"))
    assert result.text == "Sure." and result.stored == ()
    assert await mem.facts.find(GUILD, subject=LORE_SUBJECT) == []


# -- pure parts: parsing and rendering ----------------------------------------------------------


def hit(text: str, *, kind: str = "fact", evidence: str | None = None, **kw: Any) -> Hit:
    parts = ScoreParts(lexical=0.5, semantic=0.4, confidence=0.8, recency=0.9, channel=1.0)
    base: dict[str, Any] = {
        "kind": kind,
        "id": "1",
        "guild_id": "g",
        "channel_id": "c",
        "subject": "u",
        "text": text,
        "fact_type": "preference",
        "evidence_text": evidence,
        "source_message_id": None,
        "confidence": 0.8,
        "created_at": "2026-11-20T10:00:00.000Z",
        "score": 0.6,
        "parts": parts,
    }
    base.update(kw)
    return Hit(**base)


def test_parse_reply_json_fields() -> None:
    r = parse_reply(
        json.dumps({"text": " hi ", "memoryLine": "x y z w", "memoryLookupQuery": None})
    )
    assert (r.text, r.memory_line, r.lookup, r.structured) == ("hi", "x y z w", None, True)
    long = parse_reply(json.dumps({"text": "", "memoryLookupQuery": "q" * 500}))
    assert long.lookup == "q" * 220 and long.text == ""
    fenced = parse_reply('Sure!\n```json\n{"text": "fenced"}\n```')
    assert fenced.text == "fenced"
    spanned = parse_reply('Here you go: {"text": "inside"} hope it helps')
    assert spanned.text == "inside" and spanned.structured


def test_parse_reply_plain_text_and_salvage() -> None:
    assert parse_reply("just words").text == "just words"
    assert not parse_reply("just words").structured
    assert parse_reply('{"text": "cut off here", "memoryLine": nu').text == "cut off here"
    for bad in ("", "  ", '{"memoryLine": "x"}', '{"text": [1, 2'):
        with pytest.raises(MalformedReply):
            parse_reply(bad)


def test_render_sections_with_provenance() -> None:
    s = PromptSlice(
        user_facts=(hit("Ana loves tea.", evidence='I love "green" tea'),),
        relevant_facts=(),
        relevant_messages=(hit("see you at 8", kind="message", author_name="Bo"),),
    )
    out = render_sections(s, {"c": "general"})
    assert out.splitlines() == [
        "Known facts about this user:",
        '- Ana loves tea. (conf 0.80, 2026-11-20, evidence: "I love \\"green\\" tea")',
        "",
        "Relevant durable memory:",
        "(none)",
        "",
        "Relevant past messages:",
        '- (2026-11-20, #general) Bo: "see you at 8"',
    ]
    text, shown = render_results("tea", [hit("Ana loves tea.")], 400, render_fact)
    assert shown == 1 and text.splitlines()[1].startswith("[M1] Ana loves tea. (conf 0.80")
    assert "no durable match" in render_results("tea", [], 400, render_fact)[0]


def test_results_stay_within_the_token_budget() -> None:
    hits = [hit(f"Fact number {i} " + "word " * 40) for i in range(10)]
    text, shown = render_results("facts", hits, 200, render_fact)
    assert 0 < shown < 10
    assert sum(estimate_tokens(line) for line in text.splitlines()[: shown + 1]) <= 200
    assert text.splitlines()[-1].startswith(f"({10 - shown} more left out")


async def test_the_request_keeps_to_its_consumers_allowlist(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    mem = await make_memory()
    line = "the summer meetup is in Zermatt"
    await mem.lore.remember(GUILD, line, source_text=line)
    await mem.guilds.set_setting(GUILD, "voice_memory_types", "facts")
    fake_openai.script_chat(
        reply_json("Zermatt."),
        reply_json("", lookup={"query": "summer meetup", "types": ["lore"]}),
        reply_json("I don't know."),
    )
    await compose(mem, fake_openai, request("where is the summer meetup?"))
    assert "Memory line: the summer meetup is in Zermatt." in system_of(fake_openai, 0)
    voice = replace(request("where is the summer meetup?"), consumer="voice")
    result = await compose(mem, fake_openai, voice)
    assert "Zermatt" not in system_of(fake_openai, 1)
    (call,) = result.calls
    assert call.error is not None and "not allowed for tool within voice" in call.error


async def test_a_model_that_writes_the_call_as_text_gets_the_directive_from_then_on(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    mem = await make_memory()
    await say(mem, "I love hiking in the Alps.")
    assert await mem.settle()
    fake_openai.script_chat(
        json.dumps({"name": "memory_query", "arguments": {"query": "hiking"}}),
        reply_json("You hike [M1]."),
        reply_json("Hello."),
    )
    chat = ChatModel(fake_openai.client(), "gpt-4o-mini", timeout_s=30.0)
    result = await compose(mem, fake_openai, request("what do I do on weekends?"), chat)
    assert result.text == "You hike [M1]." and result.mode == "directive"
    assert result.offered_tool
    first, follow = (r.body for r in fake_openai.chat_requests())
    assert "tools" in first and "tools" not in follow
    assert "[M1] Alice loves hiking in the Alps." in follow["messages"][-1]["content"]
    assert [c.via for c in result.calls] == ["directive"]
    await compose(mem, fake_openai, request("hi"), chat)
    await chat.client.close()
    third = fake_openai.chat_requests()[2].body
    assert "tools" not in third and "memoryLookupQuery" in third["messages"][0]["content"]
