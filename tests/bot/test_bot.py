"""The real ``GuildloreBot`` driven through dpytest, with a real engine and the fake OpenAI server.

dpytest fakes Discord's gateway and HTTP API in-process: ``dpytest.message``
delivers a message to every listener and returns when their event tasks are
done, and whatever the bot sends lands in ``dpytest.sent_queue``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import discord
import discord.ext.test as dpytest
import pytest
import pytest_asyncio
from discord.ext.test import backend as dback
from discord.ext.test import callbacks as dcallbacks
from discord.ext.test import factories as dfacts

from bot.client import GuildloreBot, make_intents
from bot.cogs.replies import APOLOGY, NOT_CONFIGURED
from bot.settings import ReplyConfig
from memory.engine import Memory
from memory.llm import ChatModel
from memory.models import LORE_SUBJECT
from tests.fakeopenai import FakeOpenAI, Fault


def reply_json(text: str, line: str | None = None, lookup: str | None = None) -> str:
    return json.dumps({"text": text, "memoryLine": line, "memoryLookupQuery": lookup})


def without_sources(text: str) -> str:
    """A reply's text without its footer of cited sources (``-# Sources: …``)."""
    return text.split("\n-# Sources: ", 1)[0]


@dataclass
class Harness:
    bot: GuildloreBot
    memory: Memory
    fake: FakeOpenAI
    guild: discord.Guild
    other_guild: discord.Guild
    general: discord.TextChannel
    mods: discord.TextChannel
    other_general: discord.TextChannel
    alice: discord.Member
    bob: discord.Member
    stranger: discord.Member  # a member of the other guild
    payloads: list[dict[str, Any]] = field(default_factory=list)
    typing_in: list[int] = field(default_factory=list)

    @property
    def mention(self) -> str:
        assert self.bot.user is not None
        return f"<@{self.bot.user.id}>"

    async def say(
        self, content: str, member: discord.Member | None = None, channel: Any = None
    ) -> discord.Message:
        return await dpytest.message(
            content, channel=channel or self.general, member=member or self.alice
        )

    async def settle(self) -> None:
        assert await self.memory.settle(30)

    def sent(self) -> list[discord.Message]:
        out = []
        while not dpytest.sent_queue.empty():
            out.append(dpytest.sent_queue.get_nowait())
        return out

    async def reply_to(self, bot_message: discord.Message, content: str) -> discord.Message:
        """A member's Discord reply (message reference) to one of the bot's messages."""
        channel = bot_message.channel
        data = dfacts.make_message_dict(channel, self.alice, content=content)  # type: ignore[call-overload]
        data["type"] = 19
        data["message_reference"] = {
            "message_id": bot_message.id,
            "channel_id": channel.id,
            "guild_id": self.guild.id,
        }
        data["referenced_message"] = dfacts.dict_from_message(bot_message)
        dback.get_state().parse_message_create(data)
        await dpytest.run_all_events()
        found = dback.get_state()._get_message(data["id"])
        assert found is not None
        return found


def overwrite(target: discord.Member | discord.Role, **perms: bool) -> dict[str, Any]:
    allow, deny = discord.PermissionOverwrite(**perms).pair()
    kind = 0 if isinstance(target, discord.Role) else 1
    return {"id": target.id, "type": kind, "allow": str(allow.value), "deny": str(deny.value)}


def set_overwrites(channel: Any, *overwrites: dict[str, Any]) -> None:
    """Replace a channel's permission overwrites (dpytest's helper writes the
    pre-2.0 string types, which discord.py 2.x ignores for members)."""
    data = dfacts.dict_from_channel(channel)
    data["permission_overwrites"] = list(overwrites)
    dback.get_state().parse_channel_update(data)


def make_private(h: Harness, channel: Any, *readers: discord.Member) -> None:
    """Only ``readers`` (and the bot) can read ``channel``."""
    assert h.guild.me is not None
    set_overwrites(
        channel,
        overwrite(h.guild.default_role, read_messages=False),
        overwrite(h.guild.me, read_messages=True, send_messages=True),
        *(overwrite(m, read_messages=True) for m in readers),
    )


async def make_harness(memory: Memory, fake: FakeOpenAI, *, chat: bool = True) -> Harness:
    # All the time a loaded machine needs: a test of the timeout shortens it.
    model = ChatModel(fake.client(), "gpt-4o-mini", timeout_s=30.0) if chat else None
    intents = make_intents()
    # dpytest builds its fake members through the member cache, which needs this
    # intent; the bot itself never relies on it (messages and interactions carry
    # their member).
    intents.members = True
    bot = GuildloreBot(
        memory=memory,
        chat=model,
        reply_config=ReplyConfig(cooldown_s=0),
        intents=intents,
    )
    await bot._async_setup_hook()
    await bot.setup_hook()
    dpytest.configure(
        bot,
        guilds=2,
        text_channels=["general", "mods"],
        voice_channels=0,
        members=["alice", "bob"],
    )
    cfg = dpytest.get_config()
    guild, other = cfg.guilds
    channels = [c for c in cfg.channels if isinstance(c, discord.TextChannel)]
    general, mods, other_general, _ = channels
    alice, bob, stranger, _ = cfg.members
    h = Harness(bot, memory, fake, guild, other, general, mods, other_general, alice, bob, stranger)

    async def on_typing(channel: Any) -> None:
        h.typing_in.append(channel.id)

    dcallbacks.set_callback(on_typing, "send_typing")

    # Record what the bot asks Discord to post (allowed_mentions is in the payload).
    http = bot.http
    original = http.send_message

    async def recording_send(channel_id: int, *, params: Any) -> Any:
        h.payloads.append(dict(params.payload or {}))
        # dpytest's fake HTTP finds the channel in its caller's locals.
        channel = bot.get_channel(channel_id) or next(
            t for g in bot.guilds for t in g.threads if t.id == channel_id
        )
        assert channel is not None
        return await original(channel_id, params=params)

    http.send_message = recording_send  # type: ignore[method-assign,assignment]
    return h


async def open_harness(make_memory: Any, fake: FakeOpenAI) -> AsyncIterator[Harness]:
    """The body of the ``harness`` fixture (test_bot_commands.py reuses it)."""
    memory = await make_memory()
    h = await make_harness(memory, fake)
    yield h
    await dpytest.empty_queue()
    h.bot.accepting = False
    if h.bot.chat is not None:
        # Closed on this loop: a client collected later would close on a dead loop
        # and log an error into whichever test is running then.
        await h.bot.chat.client.close()


@pytest_asyncio.fixture
async def harness(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in open_harness(make_memory, fake_openai):
        yield h


# -- listening ----------------------------------------------------------------------------------


async def test_member_message_becomes_fact(harness: Harness) -> None:
    h = harness
    msg = await h.say("I love hiking in the Alps.")
    await h.settle()
    facts = await h.memory.facts.find(str(h.guild.id), subject=str(h.alice.id))
    assert [f.fact for f in facts] == [f"{h.alice.display_name} loves hiking in the Alps."]
    assert facts[0].channel_id == str(h.general.id)
    assert facts[0].source_message_id == str(msg.id)
    stored = await h.memory.get_message(str(h.guild.id), str(msg.id))
    assert stored is not None and stored.author_name == h.alice.display_name
    assert h.sent() == []  # no mention, no reply


async def test_own_messages_and_dms_are_not_ingested(harness: Harness) -> None:
    h = harness
    me = h.guild.me
    own = await h.say("I love being a bot.", member=me)
    dm = await h.alice.create_dm()
    private = await dpytest.message("I love secret things.", channel=dm, member=h.alice)
    await h.settle()
    assert await h.memory.get_message(str(h.guild.id), str(own.id)) is None
    assert private.guild is None
    assert h.memory.queue.stats.accepted == 0
    assert await h.memory.facts.find(str(h.guild.id)) == []
    assert h.sent() == []


async def test_guild_settings_are_honoured(harness: Harness) -> None:
    h = harness
    gid = str(h.guild.id)
    await h.memory.guilds.set_setting(gid, "excluded_channels", str(h.mods.id))
    skipped = await h.say("I love secret plans.", channel=h.mods)
    await h.memory.guilds.set_setting(gid, "memory_enabled", "false")
    off = await h.say("I love everything.", channel=h.general)
    await h.settle()
    assert await h.memory.get_message(gid, str(skipped.id)) is None
    assert await h.memory.get_message(gid, str(off.id)) is None


async def test_threads_are_ingested_with_their_own_channel(harness: Harness) -> None:
    h = harness
    data: Any = {
        "id": dfacts.make_id(),
        "type": 11,  # public thread
        "guild_id": h.guild.id,
        "parent_id": h.general.id,
        "owner_id": h.alice.id,
        "name": "trip planning",
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
    thread = h.guild.get_thread(data["id"])
    assert thread is not None
    msg = await h.say("I work as a nurse in Berlin.", channel=thread)
    await h.settle()
    stored = await h.memory.get_message(str(h.guild.id), str(msg.id))
    assert stored is not None and stored.channel_id == str(thread.id)
    facts = await h.memory.facts.find(str(h.guild.id), subject=str(h.alice.id))
    assert facts and facts[0].channel_id == str(thread.id)


# -- replies ------------------------------------------------------------------------------------


async def test_mention_reply_uses_the_members_facts_and_lore(harness: Harness) -> None:
    h = harness
    await h.say("I love hiking in the Alps.")
    await h.memory.lore.remember(
        str(h.guild.id),
        "the summer meetup is in Zermatt",
        source_text="the summer meetup is in Zermatt",
    )
    await h.settle()
    h.fake.script_chat(reply_json("You love hiking! Zermatt should suit you."))
    trigger = await h.say(f"{h.mention} any tips for my summer holiday?")

    sent = h.sent()
    assert [m.content for m in sent] == ["You love hiking! Zermatt should suit you."]
    # A Discord reply to the trigger (dpytest keeps the reference only in the payload).
    assert h.payloads[-1]["message_reference"]["message_id"] == trigger.id
    assert h.typing_in == [h.general.id]  # typing indicator while composing

    requests = h.fake.chat_requests()
    assert len(requests) == 1
    body = requests[0].body
    system = body["messages"][0]["content"]
    assert "Known facts about this user:" in system
    assert "Relevant durable memory:" in system
    assert "Relevant past messages:" in system
    assert f"{h.alice.display_name} loves hiking in the Alps. (conf 0.62" in system
    assert 'evidence: "I love hiking in the Alps."' in system
    assert "Memory line: the summer meetup is in Zermatt." in system
    assert body["response_format"] == {"type": "json_object"}
    user_turn = body["messages"][-1]["content"]
    assert user_turn == f"{h.alice.display_name}: any tips for my summer holiday?"
    # The message being answered is not shown back to the model as a "past message".
    assert "any tips" not in system


async def test_replies_never_ping_everyone_or_roles(harness: Harness) -> None:
    h = harness
    h.fake.script_chat(reply_json("@everyone look at this <@&123456789012345678>"))
    await h.say(f"{h.mention} say hi to everyone")
    (sent,) = h.sent()
    assert "@everyone" in sent.content
    allowed = h.payloads[-1]["allowed_mentions"]
    assert allowed["parse"] == []
    assert allowed.get("roles", []) == [] and allowed.get("users", []) == []
    assert allowed["replied_user"] is True


async def test_memory_line_becomes_lore_and_is_traced(harness: Harness) -> None:
    h = harness
    h.fake.script_chat(reply_json("Noted!", line="the server meetup is on Friday at the pub"))
    trigger = await h.say(
        f"{h.mention} please remember that the server meetup is on Friday at the pub"
    )
    assert [m.content for m in h.sent()] == ["Noted!"]
    lore = await h.memory.facts.find(str(h.guild.id), subject=LORE_SUBJECT)
    assert [f.fact for f in lore] == ["Memory line: the server meetup is on Friday at the pub."]
    assert lore[0].source_message_id == str(trigger.id)
    traces = await h.memory.traces.for_message(str(h.guild.id), str(trigger.id))
    stored = [t for t in traces if t.action == "stored"]
    assert [t.fact_id for t in stored] == [lore[0].id]


async def test_ungrounded_memory_line_is_refused(harness: Harness) -> None:
    h = harness
    h.fake.script_chat(reply_json("Sure.", line="bananas are the official currency"))
    await h.say(f"{h.mention} what's up?")
    assert await h.memory.facts.find(str(h.guild.id), subject=LORE_SUBJECT) == []


async def test_lookup_makes_exactly_one_follow_up_with_hits(harness: Harness) -> None:
    h = harness
    await h.say("I love hiking in the Alps.")
    await h.say("My favourite food is ramen.", member=h.bob)
    await h.settle()
    h.fake.script_chat(
        reply_json("", lookup="hiking in the Alps"),
        reply_json("Yes, you love hiking in the Alps [M1]."),
    )
    trigger = await h.say(f"{h.mention} do you remember what I do on weekends?")
    assert [without_sources(m.content) for m in h.sent()] == [
        "Yes, you love hiking in the Alps [M1]."
    ]

    requests = h.fake.chat_requests()
    assert len(requests) == 2
    follow = requests[1].body["messages"]
    assert follow[:-2] == requests[0].body["messages"]
    assert follow[-2]["role"] == "assistant"
    lookup_turn = follow[-1]["content"]
    assert 'Memory lookup results for "hiking in the Alps":' in lookup_turn
    assert f"[M1] {h.alice.display_name} loves hiking in the Alps." in lookup_turn
    assert "one more lookup" in lookup_turn  # a second of the two calls is allowed
    assert "ramen" not in lookup_turn  # strict search: only passing hits

    traces = await h.memory.traces.for_message(str(h.guild.id), str(trigger.id))
    retrieved = [t for t in traces if t.action == "retrieved"]
    assert any("hiking" in t.content for t in retrieved)
    hiking = next(t for t in retrieved if "hiking" in t.content)
    assert hiking.score is not None and hiking.score_parts is not None
    assert {"lexical", "semantic", "confidence", "recency", "channel"} <= set(hiking.score_parts)
    assert await h.memory.traces.last_traced(str(h.guild.id), str(h.general.id)) == str(trigger.id)


async def test_lookup_without_match_says_so(harness: Harness) -> None:
    h = harness
    h.fake.script_chat(
        reply_json("", lookup="quantum chromodynamics lecture notes"),
        reply_json("I don't have anything on that."),
    )
    await h.say(f"{h.mention} what did we say about physics?")
    assert [m.content for m in h.sent()] == ["I don't have anything on that."]
    follow = h.fake.chat_requests()[1].body["messages"][-1]["content"]
    assert "no durable match" in follow and "[M1]" not in follow


async def test_plain_text_reply_is_used_as_is(harness: Harness) -> None:
    h = harness
    h.fake.script_chat("Just plain words, no JSON here.")
    await h.say(f"{h.mention} hello")
    assert [m.content for m in h.sent()] == ["Just plain words, no JSON here."]


async def test_long_replies_are_split_at_the_discord_limit(harness: Harness) -> None:
    h = harness
    text = " ".join(f"word{i}" for i in range(900))  # ~7,000 characters
    h.fake.script_chat(reply_json(text))
    await h.say(f"{h.mention} tell me a long story")
    sent = h.sent()
    assert len(sent) >= 4
    assert all(len(m.content) <= 2000 for m in sent)
    assert sent[0].content.startswith("word0 word1")


async def test_replied_to_bot_message_triggers_a_reply(harness: Harness) -> None:
    h = harness
    h.fake.script_chat(reply_json("First answer."), reply_json("Second answer."))
    await h.say(f"{h.mention} hi")
    (first,) = h.sent()
    await h.reply_to(first, "thanks, and one more thing")
    assert [m.content for m in h.sent()] == ["Second answer."]
    second_request = h.fake.chat_requests()[1].body["messages"]
    assert {"role": "assistant", "content": "First answer."} in second_request


async def test_reply_mode_is_honoured(harness: Harness) -> None:
    h = harness
    gid = str(h.guild.id)
    h.fake.script_chat(reply_json("First answer."))
    await h.say(f"{h.mention} hi")
    (first,) = h.sent()
    await h.memory.guilds.set_setting(gid, "reply_mode", "mention")
    await h.reply_to(first, "a reply without a mention")
    assert h.sent() == []
    await h.memory.guilds.set_setting(gid, "reply_mode", "off")
    await h.say(f"{h.mention} are you there?")
    assert h.sent() == []
    assert len(h.fake.chat_requests()) == 1


async def test_another_guilds_facts_never_appear(harness: Harness) -> None:
    h = harness
    await h.say("I love sailing on Lake Geneva.", member=h.stranger, channel=h.other_general)
    await h.say("I love hiking in the Alps.")
    await h.settle()
    h.fake.script_chat(reply_json("", lookup="sailing Lake Geneva"), reply_json("No idea."))
    await h.say(f"{h.mention} who here likes boats?")
    assert len(h.fake.chat_requests()) == 2
    for request in h.fake.chat_requests():
        text = json.dumps(request.body)
        assert "loves sailing on Lake Geneva." not in text
        assert "I love sailing" not in text  # nor the message itself
        assert str(h.stranger.id) not in text
    follow = h.fake.chat_requests()[1].body["messages"][-1]["content"]
    assert "no durable match" in follow


async def test_reply_in_public_channel_hides_private_channel_memory(harness: Harness) -> None:
    h = harness
    make_private(h, h.mods, h.alice)
    assert not h.mods.permissions_for(h.bob).read_messages
    assert h.mods.permissions_for(h.alice).read_messages
    await h.say("I work as a nurse in Berlin.", channel=h.mods)
    await h.settle()
    h.fake.script_chat(reply_json("Public answer."), reply_json("Private answer."))
    await h.say(f"{h.mention} where do I work?", channel=h.general)
    await h.say(f"{h.mention} where do I work?", channel=h.mods)
    public, private = (r.body["messages"][0]["content"] for r in h.fake.chat_requests())
    assert "nurse in Berlin" not in public
    assert "nurse in Berlin" in private


# -- failures -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [Fault.status(500), Fault.status(429), Fault.timeout(600.0), Fault.malformed()],
    ids=["500", "429", "timeout", "malformed-body"],
)
async def test_llm_failures_get_an_apology(harness: Harness, fault: Fault) -> None:
    h = harness
    assert h.bot.chat is not None
    if fault.kind == "timeout":
        h.bot.chat.timeout_s = 0.5  # against a server that never answers in time
    h.fake.script_chat(fault)
    trigger = await h.say(f"{h.mention} hello?")
    h.bot.chat.timeout_s = 30.0
    assert [m.content for m in h.sent()] == [APOLOGY]
    errors = await h.memory.admin.action_log(kind="bot_error", guild_id=str(h.guild.id))
    assert len(errors) == 1
    assert errors[0].message.startswith("reply_llm_error")
    assert errors[0].detail is not None and errors[0].detail["message_id"] == str(trigger.id)
    # The bot keeps working afterwards.
    h.fake.script_chat(reply_json("Back again."))
    await h.say(f"{h.mention} hello again?")
    assert [m.content for m in h.sent()] == ["Back again."]


@pytest.mark.parametrize("garbage", ["", "   ", '{"memoryLine": "x"}', '{"text": [1, 2'])
async def test_unusable_model_output_gets_an_apology(harness: Harness, garbage: str) -> None:
    h = harness
    h.fake.script_chat(garbage)
    await h.say(f"{h.mention} hello?")
    assert [m.content for m in h.sent()] == [APOLOGY]
    errors = await h.memory.admin.action_log(kind="bot_error")
    assert errors and errors[0].message.startswith("reply_llm_error")


async def test_failed_follow_up_keeps_the_first_answer(harness: Harness) -> None:
    h = harness
    h.fake.script_chat(
        reply_json("Let me check… probably yes.", lookup="hiking"), Fault.status(500)
    )
    await h.say(f"{h.mention} do I like hiking?")
    assert [m.content for m in h.sent()] == ["Let me check… probably yes."]


async def test_without_llm_mentions_get_a_note_and_memory_still_works(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    memory = await make_memory()
    h = await make_harness(memory, fake_openai, chat=False)
    try:
        await h.say("I love hiking in the Alps.")
        await h.say(f"{h.mention} hello")
        await h.settle()
        assert [m.content for m in h.sent()] == [NOT_CONFIGURED]
        assert fake_openai.chat_requests() == []
        assert await memory.facts.find(str(h.guild.id), subject=str(h.alice.id))
    finally:
        await dpytest.empty_queue()
