"""Voice replies on the real ``GuildloreBot`` under dpytest, with a real engine.

Utterances go the whole way: frames into the voice sink, the segmenter,
speech-to-text (the fake OpenAI server's transcription endpoint, through the
real ``openai`` client), ``ingest_message``, the ``voice_transcript`` event,
the replies cog and the chat model (the fake server again). ``leave_voice``
drains the pipeline, and ``run_all_events`` waits for the event handlers, so
once both return every reply that was going to be posted has been posted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import discord
import discord.ext.test as dpytest
import pytest
import pytest_asyncio

from bot.cogs.replies import APOLOGY
from bot.cogs.voice import join_voice, leave_voice
from bot.settings import ReplyConfig
from bot.voice.wake import addresses, wake_keys, words
from tests.bot.test_bot import make_private, open_harness, reply_json
from tests.bot.test_bot_commands import _grant_manage_guild
from tests.fakeopenai import FakeOpenAI, Fault
from tests.voice.test_voice_cog import VoiceHarness, voice_harness
from tests.voice.test_voice_service import say

QUESTION = "what is the plan for Saturday?"


async def open_voice(
    make_memory: Any, fake: FakeOpenAI, voice_interval_s: float
) -> AsyncIterator[VoiceHarness]:
    """Alice (Manage Server) and Bob in the lounge; voice replies at most one per
    ``voice_interval_s`` per guild."""
    async for h in open_harness(make_memory, fake):
        h.bot.reply_config = ReplyConfig(cooldown_s=0, voice_interval_s=voice_interval_s)
        await h.bot.reload_extension("bot.cogs.replies")
        v = voice_harness(h, fake)
        await _grant_manage_guild(h, h.alice)
        await v.move(h.alice, v.lounge)
        await v.move(h.bob, v.lounge)
        yield v
        await v.manager.close()


@pytest_asyncio.fixture
async def vh(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[VoiceHarness]:
    async for v in open_voice(make_memory, fake_openai, 0):
        yield v


@pytest_asyncio.fixture
async def limited(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[VoiceHarness]:
    async for v in open_voice(make_memory, fake_openai, ReplyConfig().voice_interval_s):
        yield v


def bot_name(vh: VoiceHarness) -> str:
    me = vh.h.guild.me
    assert me is not None
    return me.display_name


async def enable(vh: VoiceHarness, **settings: str) -> None:
    gid = str(vh.h.guild.id)
    await vh.h.memory.guilds.set_setting(gid, "voice_replies", "true", actor="test")
    for key, value in settings.items():
        await vh.h.memory.guilds.set_setting(gid, key, value, actor="test")


async def speak(vh: VoiceHarness, *lines: tuple[discord.Member, str]) -> list[discord.Message]:
    """One voice session in the lounge in which each (member, transcript) is said once;
    what the bot posted besides the privacy notice."""
    h = vh.h
    h.fake.script_transcription(*(text for _, text in lines))
    await join_voice(h.bot, h.guild, h.alice, vh.lounge)
    (notice,) = h.sent()
    assert notice.content.startswith("🎙️")
    sink = vh.clients[-1].sink
    for member, _ in lines:
        say(sink, member, 40, vh.clock)  # type: ignore[arg-type]
    assert await leave_voice(h.bot, h.guild, h.alice)  # drains: STT, ingest, the event
    await dpytest.run_all_events()
    return h.sent()


# -- wake words ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("utterance", "expected"),
    [
        ("Guildlore, what is the plan?", True),
        ("hey guildlore what is the plan", True),
        ("ok guildlore, one question", True),
        ("ok so guildlore, one question", False),  # three words in: no longer a call
        ("GUILDLORE!", True),
        ("What do you think, Guildlore?", True),
        ("Hey Guild Lore, are you there?", True),  # speech-to-text split the name
        ("hey guild-lore", True),
        ("Gúildlore, ¿qué tal?", True),
        ("I think guildlore forgot my birthday again", False),  # about the bot, not to it
        ("guildlores are great", False),  # not the whole word
        ("hey guildlor", False),
        ("", False),
    ],
)
def test_addresses(utterance: str, expected: bool) -> None:
    assert addresses(utterance, wake_keys(["GuildLore"])) is expected


def test_wake_keys_and_words() -> None:
    assert words("Ça va, ÉLODIE_bot?") == ["ca", "va", "elodie", "bot"]
    assert wake_keys(["Guild Lore", "guildlore", "🤖", "x", "Lore-Master"]) == (
        "guildlore",
        "loremaster",
    )
    assert not addresses("loremaster hi", ())


# -- replies ---------------------------------------------------------------------------------


async def test_an_utterance_naming_the_bot_gets_a_reply_in_the_voice_chat(
    vh: VoiceHarness,
) -> None:
    h = vh.h
    gid = str(h.guild.id)
    await enable(vh)
    h.fake.script_chat(reply_json("Saturday is raid night, 8 pm."))
    (reply,) = await speak(vh, (h.alice, f"Hey {bot_name(vh)}, {QUESTION}"))
    assert reply.content == "Saturday is raid night, 8 pm."
    assert reply.channel.id == vh.lounge.id  # the voice channel's own text chat
    assert "message_reference" not in h.payloads[-1]  # nothing to reply to in Discord
    assert h.payloads[-1]["allowed_mentions"]["parse"] == []

    (request,) = h.fake.chat_requests()
    messages = request.body["messages"]
    assert f"channel #{vh.lounge.name}" in messages[0]["content"]
    assert messages[-1] == {
        "role": "user",
        "content": f"{h.alice.display_name}: Hey {bot_name(vh)}, {QUESTION}",
    }
    (row,) = await h.memory.admin.action_log(kind="reply", guild_id=gid)
    assert row.detail is not None
    assert row.detail["trigger"] == "voice" and row.detail["sent"] is True
    assert row.detail["channel_id"] == str(vh.lounge.id)
    assert row.detail["reply_id"] == str(reply.id)
    utterance = await h.memory.get_message(gid, row.detail["message_id"])
    assert utterance is not None and utterance.source == "voice"
    assert utterance.author_id == str(h.alice.id)
    assert row.message.startswith(f"replied to utterance {utterance.id} ")


async def test_an_utterance_not_naming_the_bot_gets_none(vh: VoiceHarness) -> None:
    h = vh.h
    await enable(vh)
    assert await speak(vh, (h.alice, QUESTION)) == []
    said = f"I think {bot_name(vh)} forgot my birthday again yesterday"
    assert await speak(vh, (h.bob, said)) == []
    assert h.fake.chat_requests() == []
    # Both were still transcribed into memory.
    assert len(h.fake.transcription_requests()) == 2


async def test_voice_replies_are_opt_in(vh: VoiceHarness) -> None:
    h = vh.h
    gid = str(h.guild.id)
    assert (await h.memory.guilds.settings(gid)).voice_replies is False
    assert await speak(vh, (h.alice, f"{bot_name(vh)}, {QUESTION}")) == []
    assert h.fake.chat_requests() == []
    # Replies off for the guild silences voice too.
    await enable(vh, reply_mode="off")
    assert await speak(vh, (h.alice, f"{bot_name(vh)}, {QUESTION}")) == []
    assert h.fake.chat_requests() == []
    await h.memory.guilds.set_setting(gid, "reply_mode", None, actor="test")
    h.fake.script_chat(reply_json("Raid night."))
    assert [m.content for m in await speak(vh, (h.alice, f"{bot_name(vh)}, {QUESTION}"))] == [
        "Raid night."
    ]


async def test_configured_wake_words_replace_the_bots_name(vh: VoiceHarness) -> None:
    h = vh.h
    await enable(vh, voice_wake_words="Lore Master, scribe")
    assert await speak(vh, (h.alice, f"{bot_name(vh)}, {QUESTION}")) == []
    h.fake.script_chat(reply_json("One."), reply_json("Two."))
    assert [m.content for m in await speak(vh, (h.alice, f"loremaster {QUESTION}"))] == ["One."]
    assert [m.content for m in await speak(vh, (h.bob, f"{QUESTION} Scribe?"))] == ["Two."]


async def test_rate_limited_per_guild(limited: VoiceHarness) -> None:
    h = limited.h
    name = bot_name(limited)
    await enable(limited)
    h.fake.script_chat(reply_json("First."))
    sent = await speak(limited, (h.alice, f"{name}, {QUESTION}"), (h.bob, f"{name}, hello?"))
    assert [m.content for m in sent] == ["First."]
    assert await speak(limited, (h.bob, f"{name}, still there?")) == []
    assert len(h.fake.chat_requests()) == 1
    assert len(await h.memory.admin.action_log(kind="reply")) == 1
    # Text replies are not held back by it.
    h.fake.script_chat(reply_json("Text still works."))
    await h.say(f"{h.mention} hello")
    assert [m.content for m in h.sent()] == ["Text still works."]


async def test_without_the_rate_limit_each_naming_utterance_is_answered(
    vh: VoiceHarness,
) -> None:
    h = vh.h
    name = bot_name(vh)
    await enable(vh)
    h.fake.script_chat(reply_json("Yes."), reply_json("Yes."))
    sent = await speak(vh, (h.alice, f"{name}, {QUESTION}"), (h.bob, f"{name}, hello?"))
    assert [m.content for m in sent] == ["Yes.", "Yes."]


async def test_voice_replies_are_traced_without_channel_bias(vh: VoiceHarness) -> None:
    """The same fact, learned in the lounge's text chat: a text reply there
    ranks it with the channel signal, a voice reply without."""
    h = vh.h
    gid = str(h.guild.id)
    await enable(vh)
    await h.say("I love hiking in the Alps.", channel=vh.lounge)
    await h.settle()
    (fact,) = await h.memory.facts.find(gid, subject=str(h.alice.id))
    assert fact.channel_id == str(vh.lounge.id)
    h.fake.script_chat(reply_json("By text."), reply_json("By voice."))
    await h.say(f"{h.mention} any hiking tips?", channel=vh.lounge)
    (by_text,) = h.sent()
    (by_voice,) = await speak(vh, (h.alice, f"{bot_name(vh)}, any hiking tips?"))
    assert by_voice.content == "By voice."

    async def channel_part(reply: discord.Message) -> float:
        traces = await h.memory.traces.for_message(gid, str(reply.id))
        (t,) = [t for t in traces if t.fact_id == fact.id]
        assert t.score_parts is not None
        return float(t.score_parts["channel"])

    assert await channel_part(by_text) == 1.0
    assert await channel_part(by_voice) == 0.0
    # `/memory why` in the voice chat finds the voice reply's traces.
    assert await h.memory.traces.last_traced(gid, str(vh.lounge.id)) is not None


async def test_a_private_channels_memory_stays_out_of_a_public_voice_chat(
    vh: VoiceHarness,
) -> None:
    h = vh.h
    await enable(vh)
    make_private(h, h.mods, h.alice)
    await h.say("I am secretly planning a surprise party for Bob.", channel=h.mods)
    await h.settle()
    h.fake.script_chat(reply_json("Not that I know of."))
    await speak(vh, (h.alice, f"{bot_name(vh)}, any surprise party plans?"))
    system = h.fake.chat_requests()[-1].body["messages"][0]["content"]
    assert "surprise party" not in system


async def test_the_voice_reply_sees_the_voice_channels_recent_talk(vh: VoiceHarness) -> None:
    h = vh.h
    await enable(vh)
    assert await speak(vh, (h.bob, "the raid starts at eight tonight")) == []
    h.fake.script_chat(reply_json("At eight, Bob said."))
    (reply,) = await speak(vh, (h.alice, f"{bot_name(vh)}, when does the raid start?"))
    messages = h.fake.chat_requests()[-1].body["messages"]
    assert {
        "role": "user",
        "content": f"{h.bob.display_name}: the raid starts at eight tonight",
    } in (messages[1:-1])
    # The bot's own voice reply is an assistant turn of the next reply's window.
    h.fake.script_chat(reply_json("You're welcome."))
    await speak(vh, (h.alice, f"thanks {bot_name(vh)}"))
    window = h.fake.chat_requests()[-1].body["messages"][1:-1]
    assert {"role": "assistant", "content": reply.content} in window


async def test_a_failing_model_gets_an_apology_and_the_utterance_is_kept(
    vh: VoiceHarness,
) -> None:
    h = vh.h
    gid = str(h.guild.id)
    await enable(vh)
    h.fake.script_chat(Fault.status(500))
    (reply,) = await speak(vh, (h.alice, f"{bot_name(vh)}, what did I miss?"))
    assert reply.content == APOLOGY and reply.channel.id == vh.lounge.id
    (error,) = await h.memory.admin.action_log(kind="bot_error", guild_id=gid)
    assert error.detail is not None and error.detail["error"] == "reply_llm_error"
    assert error.detail["channel_id"] == str(vh.lounge.id)
    stored = await h.memory.get_message(gid, error.detail["message_id"])
    assert stored is not None and stored.content == f"{bot_name(vh)}, what did I miss?"
