"""The short-term window of a reply (memory/reply/window.py) on the real
engine, and how ``compose_reply`` puts it in the chat request (fake OpenAI server)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from memory import Memory, ReplyRequest, compose_reply, iso, record_bot_reply
from memory.llm import ChatModel
from memory.reply.window import WindowQuery, clamp_recent_messages, recent_window
from memory.text import estimate_tokens
from tests.fakeopenai import FakeOpenAI
from tests.helpers import ALICE, BOB, CHANNEL, GUILD, msg

PRIVATE = "666666666666666666"
THREAD = "777777777777777777"
T0 = datetime(2026, 11, 22, 11, 0, tzinfo=UTC)
REPLY = json.dumps({"text": "Hi.", "memoryLine": None, "memoryLookupQuery": None})


def at(minute: float) -> str:
    return iso(T0 + timedelta(minutes=minute))


async def say(mem: Memory, text: str, minute: float, **kw: Any) -> str:
    m = msg(text, created_at=at(minute), **kw)
    assert await (await mem.ingest_message(m)).wait()
    return m.id


def query(**kw: Any) -> WindowQuery:
    values: dict[str, Any] = {
        "guild_id": GUILD,
        "channel_id": CHANNEL,
        "before": at(1000),
        "before_id": "",
        "exclude_ids": (),
        "visible_channels": frozenset({CHANNEL, PRIVATE, THREAD}),
        "excluded_channels": frozenset(),
    }
    values.update(kw)
    return WindowQuery(**values)


async def texts(mem: Memory, **kw: Any) -> list[str]:
    return [t.content for t in await recent_window(mem, query(**kw))]


async def test_the_latest_messages_before_the_trigger_oldest_first(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    for i in range(50):
        await say(
            mem,
            f"message number {i}",
            i,
            author=BOB if i % 2 else ALICE,
            name="Bob" if i % 2 else "Alice",
        )
    trigger = await say(mem, "the question", 50)
    await say(mem, "said after the question", 51)

    turns = await recent_window(mem, query(before=at(50), exclude_ids=(trigger,), max_messages=35))

    assert [t.content for t in turns] == [
        f"{'Bob' if i % 2 else 'Alice'}: message number {i}" for i in range(15, 50)
    ]
    assert {t.role for t in turns} == {"user"}
    # The bound is clamped to 10–120.
    assert len(await texts(mem, before=at(50), max_messages=3)) == 10
    assert clamp_recent_messages(3) == 10 and clamp_recent_messages(500) == 120


async def test_of_one_millisecond_only_earlier_snowflakes_came_before(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    await say(mem, "just before", 5, id="900000000000000100")
    await say(mem, "just after", 5, id="900000000000000300")
    q = {"before": at(5), "before_id": "900000000000000200"}
    assert await texts(mem, **q) == ["Alice: just before"]
    # Without the trigger's id, its whole millisecond is left out.
    assert await texts(mem, before=at(5)) == []


async def test_the_window_stays_within_its_token_bound(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    for i in range(30):
        await say(mem, f"{i:02d} " + "word " * 40, i)
    turns = await recent_window(mem, query(max_tokens=300))
    assert turns and sum(t.tokens for t in turns) <= 300
    # The newest are kept, contiguous up to the trigger.
    assert turns[-1].text.startswith("29 ")
    numbers = [int(t.text[:2]) for t in turns]
    assert numbers == list(range(30 - len(turns), 30))
    one_more = estimate_tokens(f"Alice: {(f'{29 - len(turns):02d} ' + 'word ' * 40).strip()}")
    assert sum(t.tokens for t in turns) + one_more > 300
    assert await texts(mem, max_tokens=0) == []


async def test_unreadable_and_excluded_channels_never_enter(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    mem = await make_memory(embeddings="none")
    await say(mem, "public chatter", 1)
    await say(mem, "the secret plan", 2, channel=PRIVATE)
    assert await texts(mem) == ["Alice: public chatter"]
    assert await texts(mem, channel_id=PRIVATE, visible_channels=frozenset({CHANNEL})) == []
    assert await texts(mem, excluded_channels=frozenset({CHANNEL})) == []
    # A channel excluded after its messages were stored is left out of the window too.
    await mem.guilds.set_setting(GUILD, "excluded_channels", CHANNEL)
    fake_openai.script_chat(REPLY)
    chat = ChatModel(fake_openai.client(), "gpt-4o-mini", timeout_s=30.0)
    result = await compose_reply(
        mem,
        chat,
        request("hello?", created_at=at(10)),
        persona="p",
        temperature=0.7,
        max_tokens=100,
    )
    assert result.window == ()
    assert [m["role"] for m in fake_openai.chat_requests()[0].body["messages"]] == [
        "system",
        "user",
    ]


async def test_no_window_where_memory_is_off(make_memory: Any, fake_openai: FakeOpenAI) -> None:
    mem = await make_memory(embeddings="none")
    await say(mem, "chatter from before", 1)
    await mem.guilds.set_setting(GUILD, "memory_enabled", "false")
    fake_openai.script_chat(REPLY)
    chat = ChatModel(fake_openai.client(), "gpt-4o-mini", timeout_s=30.0)
    result = await compose_reply(
        mem, chat, request("hi", created_at=at(10)), persona="p", temperature=0.7, max_tokens=50
    )
    assert result.window == ()
    assert "chatter from before" not in str(fake_openai.chat_requests()[0].body)


async def test_a_thread_sees_its_history_and_its_starter(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    starter = await say(mem, "who is up for a hike on Saturday?", 1)
    await say(mem, "unrelated parent chatter", 2)
    await say(mem, "me, if it does not rain", 3, channel=THREAD, author=BOB, name="Bob")
    q = {"channel_id": THREAD, "starter_message_id": starter}
    assert await texts(mem, **q) == [
        "Alice: who is up for a hike on Saturday?",
        "Bob: me, if it does not rain",
    ]
    # Not when the parent channel is unreadable or excluded.
    hidden = frozenset({THREAD})
    assert await texts(mem, **q, visible_channels=hidden) == ["Bob: me, if it does not rain"]
    excluded = frozenset({CHANNEL})
    assert await texts(mem, **q, excluded_channels=excluded) == ["Bob: me, if it does not rain"]


async def test_the_bots_replies_are_assistant_turns_and_never_memory(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    asked = await say(mem, "what is the capital of Peru?", 1)
    await record_bot_reply(
        mem,
        guild_id=GUILD,
        channel_id=CHANNEL,
        message_id="900000000000000010",
        reply_to_id=asked,
        to_user_id=ALICE,
        text="Lima, famous for xylophonist ceviche.",
        created_at=at(2),
    )
    await say(mem, "thanks!", 3, author=BOB, name="Bob")
    turns = await recent_window(mem, query())
    assert [(t.role, t.content) for t in turns] == [
        ("user", "Alice: what is the capital of Peru?"),
        ("assistant", "Lima, famous for xylophonist ceviche."),
        ("user", "Bob: thanks!"),
    ]
    assert await mem.settle()
    assert await mem.search(GUILD, "xylophonist ceviche", scope="all", gate=False) == []
    assert await mem.get_message(GUILD, "900000000000000010") is None
    # Erased with the member it answered.
    await mem.forget(GUILD, ALICE)
    assert await texts(mem) == ["Bob: thanks!"]


async def test_only_the_latest_replies_of_a_channel_are_kept(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    for i in range(130):
        await record_bot_reply(
            mem,
            guild_id=GUILD,
            channel_id=CHANNEL,
            message_id=str(900000000000001000 + i),
            reply_to_id=None,
            to_user_id=ALICE,
            text=f"reply {i}",
            created_at=at(i),
        )
    # Nothing is kept where memory is off or the channel excluded.
    await mem.guilds.set_setting(GUILD, "excluded_channels", CHANNEL)
    await record_bot_reply(
        mem,
        guild_id=GUILD,
        channel_id=CHANNEL,
        message_id="900000000000009999",
        reply_to_id=None,
        to_user_id=ALICE,
        text="not kept",
        created_at=at(500),
    )
    await mem.guilds.set_setting(GUILD, "excluded_channels", None)
    await mem.guilds.set_setting(GUILD, "memory_enabled", "false")
    await record_bot_reply(
        mem,
        guild_id=GUILD,
        channel_id=CHANNEL,
        message_id="900000000000009998",
        reply_to_id=None,
        to_user_id=ALICE,
        text="not kept either",
        created_at=at(501),
    )
    count = await mem.db.read(
        lambda con: con.execute("SELECT count(*) FROM bot_replies").fetchone()[0]
    )
    assert count == 120
    turns = await recent_window(mem, query(max_messages=120, max_tokens=10_000))
    assert [t.text for t in turns] == [f"reply {i}" for i in range(10, 130)]


def request(text: str, **kw: Any) -> ReplyRequest:
    values: dict[str, Any] = {
        "guild_id": GUILD,
        "guild_name": "Hikers",
        "channel_id": CHANNEL,
        "channel_name": "general",
        "author_id": ALICE,
        "author_name": "Alice",
        "message_id": "900000000000000001",
        "text": text,
        "visible_channels": frozenset({CHANNEL}),
        "channel_names": {CHANNEL: "general"},
    }
    values.update(kw)
    return ReplyRequest(**values)


async def test_compose_puts_the_window_between_system_and_member(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    mem = await make_memory(embeddings="none")
    await say(mem, "anyone been to Zermatt?", 1, author=BOB, name="Bob")
    await record_bot_reply(
        mem,
        guild_id=GUILD,
        channel_id=CHANNEL,
        message_id="900000000000000020",
        reply_to_id=None,
        to_user_id=BOB,
        text="Zermatt is lovely in June.",
        created_at=at(2),
    )
    await say(mem, "private stuff", 3, channel=PRIVATE)
    trigger = await say(mem, "is June too early?", 4)
    answer = json.dumps({"text": "June works.", "memoryLine": None, "memoryLookupQuery": None})
    fake_openai.script_chat(answer)
    chat = ChatModel(fake_openai.client(), "gpt-4o-mini", timeout_s=30.0)
    result = await compose_reply(
        mem,
        chat,
        request(
            "is June too early?",
            message_id=trigger,
            created_at=at(4),
            replied_text="Zermatt is lovely in June.",
            replied_id="900000000000000020",
        ),
        persona="p",
        temperature=0.7,
        max_tokens=100,
    )
    turns = fake_openai.chat_requests()[0].body["messages"]
    assert [(t["role"], t["content"]) for t in turns[1:]] == [
        ("user", "Bob: anyone been to Zermatt?"),
        # The replied-to message is in the window: not repeated.
        ("assistant", "Zermatt is lovely in June."),
        ("user", "Alice: is June too early?"),
    ]
    assert len(result.window) == 2
    assert result.model == "gpt-4o-mini" and result.llm_calls == 1
    # The fake server counts words; the usage is the endpoint's, passed through.
    assert result.prompt_tokens == sum(len(t["content"].split()) for t in turns)
    assert result.completion_tokens == len(answer.split())
    detail = result.log_detail()
    assert detail["window_messages"] == 2 and detail["lookup"] is False
