"""The voice cog on the real ``GuildloreBot`` under dpytest, with a real engine.

Everything is real except the two things that cannot run offline: Discord's
voice gateway (``connect`` returns a recording stand-in for the DAVE receive
client) and the speech-to-text service (the fake OpenAI server). Voice state
changes go through discord.py's own ``parse_voice_state_update``, so the
cog's listener is dispatched the way the gateway would dispatch it.
As in test_bot_commands.py, the command bodies are called directly (dpytest
does not dispatch app commands); a fake ``Interaction`` checks the handlers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import discord
import discord.ext.test as dpytest
import pytest
import pytest_asyncio
from discord import app_commands
from discord.ext.test import backend as dback
from discord.ext.test import factories as dfacts

from bot.client import DEFAULT_EXTENSIONS, GuildloreBot
from bot.cogs.memory_commands import voice_consent
from bot.cogs.voice import MODERATORS_ONLY, join_voice, leave_voice, voice_status
from bot.runtime import build_voice, settings_clients
from bot.settings import SettingsError, load_settings
from bot.voice.service import VoiceManager, memory_consent_store
from bot.voice.stt import OpenAITranscriber, local_stt_available
from tests.bot.test_bot import Harness, open_harness, overwrite
from tests.bot.test_bot_commands import _grant_manage_guild
from tests.fakeopenai import FakeOpenAI
from tests.helpers import eventually
from tests.voice.test_voice_service import FakeVoiceClient, say
from tests.voice.test_voice_units import MarkerVad, VirtualClock


@dataclass
class VoiceHarness:
    h: Harness
    manager: VoiceManager
    lounge: discord.VoiceChannel
    attic: discord.VoiceChannel
    clock: VirtualClock
    # (channel id, what the bot had posted by then) per connect call
    connects: list[tuple[int, list[str]]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    clients: list[FakeVoiceClient] = field(default_factory=list)

    async def move(self, member: discord.Member, channel: Any) -> None:
        """A VOICE_STATE_UPDATE from the gateway: ``member`` is now in ``channel`` (or none)."""
        dback.get_state().parse_voice_state_update(
            {
                "guild_id": str(self.h.guild.id),
                "channel_id": str(channel.id) if channel is not None else None,
                "user_id": str(member.id),
                "session_id": f"s{member.id}",
                "deaf": False,
                "mute": False,
                "self_deaf": False,
                "self_mute": False,
                "self_video": False,
                "suppress": False,
                "request_to_speak_timestamp": None,
            }
        )
        await dpytest.run_all_events()


@pytest_asyncio.fixture
async def vh(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[VoiceHarness]:
    async for h in open_harness(make_memory, fake_openai):
        v = voice_harness(h, fake_openai)
        yield v
        await v.manager.close()


def voice_harness(h: Harness, fake: FakeOpenAI) -> VoiceHarness:
    """Two voice channels and a VoiceManager on the bot, as the runtime would attach it."""
    lounge = dback.make_voice_channel("Lounge", h.guild)
    attic = dback.make_voice_channel("Attic", h.guild)
    load, save = memory_consent_store(h.memory)
    clock = VirtualClock()

    async def connect(channel: Any) -> FakeVoiceClient:
        # Stands in for the voice gateway; records what the bot had posted by now.
        v.connects.append((channel.id, [str(p.get("content")) for p in h.payloads]))
        client = FakeVoiceClient(v.events)
        v.clients.append(client)
        return client

    manager = VoiceManager(
        transcriber=OpenAITranscriber(fake.client(), "gpt-4o-mini-transcribe"),
        ingest=h.memory.ingest_message,
        load_opt_outs=load,
        save_opt_out=save,
        vad_factory=MarkerVad,
        clock=clock,
        connect=connect,
    )
    h.bot.voice = manager
    v = VoiceHarness(h, manager, lounge, attic, clock)
    return v


def deny_bot(channel: discord.VoiceChannel, **perms: bool) -> None:
    """A permission overwrite for the bot in a voice channel (dpytest's channel dict
    lacks the voice fields discord.py needs)."""
    assert channel.guild.me is not None
    data = dfacts.dict_from_channel(channel)
    data.update(bitrate=channel.bitrate, user_limit=channel.user_limit)
    data["permission_overwrites"] = [overwrite(channel.guild.me, **perms)]
    dback.get_state().parse_channel_update(data)


# -- the command tree --------------------------------------------------------------------------


async def test_command_tree_and_extension_list() -> None:
    assert "bot.cogs.voice" in DEFAULT_EXTENSIONS
    bot = GuildloreBot(memory=None)  # type: ignore[arg-type]
    for ext in DEFAULT_EXTENSIONS:
        await bot.load_extension(ext)
    tree = {c.name: c for c in bot.tree.get_commands()}
    voice, memory = tree["voice"], tree["memory"]
    assert isinstance(voice, app_commands.Group) and isinstance(memory, app_commands.Group)
    assert {c.name for c in voice.commands} == {"join", "leave", "status"}
    assert voice.guild_only
    # Members can see /voice status; join and leave check Manage Server themselves.
    assert voice.default_permissions is None
    assert {"voice-opt-out", "voice-opt-in"} <= {c.name for c in memory.commands}
    join = voice.get_command("join")
    assert isinstance(join, app_commands.Command)
    (param,) = join.parameters
    assert param.name == "channel" and not param.required
    assert param.channel_types == [discord.ChannelType.voice]
    await bot.close()


# -- who may start and stop --------------------------------------------------------------------


async def test_a_member_without_manage_server_cannot_join_or_leave(vh: VoiceHarness) -> None:
    h = vh.h
    await vh.move(h.alice, vh.lounge)
    await vh.move(h.bob, vh.lounge)
    refused = await join_voice(h.bot, h.guild, h.bob, vh.lounge)
    assert refused.text == MODERATORS_ONLY and refused.ephemeral
    assert vh.connects == [] and h.payloads == [] and vh.manager.session(h.guild.id) is None

    await _grant_manage_guild(h, h.alice)
    joined = await join_voice(h.bot, h.guild, h.alice, None)  # her own channel
    assert joined.text.startswith(f"Transcribing {vh.lounge.mention} now")
    assert (await leave_voice(h.bot, h.guild, h.bob)).text == MODERATORS_ONLY
    assert vh.manager.session(h.guild.id) is not None
    left = await leave_voice(h.bot, h.guild, h.alice)
    assert left.text == f"Stopped transcribing <#{vh.lounge.id}> and left."
    assert vh.manager.session(h.guild.id) is None and vh.events[-1] == "disconnect"
    again = await leave_voice(h.bot, h.guild, h.alice)
    assert again.text == "I am not in a voice channel in this server."


async def test_join_handler_replies_ephemerally(vh: VoiceHarness) -> None:
    h = vh.h
    cog = h.bot.get_cog("VoiceCommands")
    assert cog is not None
    await vh.move(h.bob, vh.lounge)
    interaction = FakeInteraction(h.guild, h.bob, h.general)
    await cog.join.callback(cog, interaction, None)  # type: ignore[attr-defined]
    assert interaction.replies == [(MODERATORS_ONLY, True)]
    assert interaction.deferred is None and vh.connects == []

    await _grant_manage_guild(h, h.bob)
    interaction = FakeInteraction(h.guild, h.bob, h.general)
    await cog.join.callback(cog, interaction, vh.lounge)  # type: ignore[attr-defined]
    assert interaction.deferred is True  # connecting takes a while
    ((text, ephemeral),) = interaction.replies
    assert ephemeral and text.startswith(f"Transcribing {vh.lounge.mention} now")


# -- consent -----------------------------------------------------------------------------------


async def test_join_posts_the_privacy_notice_before_connecting(vh: VoiceHarness) -> None:
    h = vh.h
    await _grant_manage_guild(h, h.alice)
    await vh.move(h.alice, vh.lounge)
    answer = await join_voice(h.bot, h.guild, h.alice, vh.lounge)
    assert "privacy notice" in answer.text
    ((channel_id, posted_before_connect),) = vh.connects
    assert channel_id == vh.lounge.id
    (notice,) = posted_before_connect
    assert f"Voice transcription is on in {vh.lounge.mention}" in notice
    assert "`/memory voice-opt-out`" in notice and "`/memory forget-me`" in notice
    assert "127.0.0.1" in notice  # where speech goes: the (fake) external service
    (message,) = h.sent()
    assert message.channel.id == vh.lounge.id and message.content == notice
    assert vh.events == ["listen"]


async def test_no_notice_means_no_connection(vh: VoiceHarness) -> None:
    h = vh.h
    await _grant_manage_guild(h, h.alice)
    await vh.move(h.alice, vh.lounge)
    deny_bot(vh.lounge, send_messages=False)
    answer = await join_voice(h.bot, h.guild, h.alice, vh.lounge)
    assert answer.text == f"I need Send Messages in {vh.lounge.mention} to transcribe it."
    assert vh.connects == [] and h.payloads == []


async def test_opt_out_persists_and_takes_effect_opt_in_reverses(vh: VoiceHarness) -> None:
    h = vh.h
    gid = h.guild.id
    out = await voice_consent(h.memory, vh.manager, gid, h.bob.id, True)
    assert "ignore your voice" in out.text and out.ephemeral
    assert vh.manager.is_opted_out(gid, h.bob.id)
    assert await h.memory.guilds.voice_opt_outs() == {(str(gid), str(h.bob.id))}

    # A restart: a new manager knows nothing until it joins, then applies the
    # stored opt-out from the first frame.
    load, save = memory_consent_store(h.memory)
    restarted = VoiceManager(
        transcriber=vh.manager._transcriber,
        ingest=h.memory.ingest_message,
        load_opt_outs=load,
        save_opt_out=save,
        vad_factory=MarkerVad,
        clock=vh.clock,
        connect=lambda ch: _connected(FakeVoiceClient([])),
    )
    h.bot.voice = restarted
    assert not restarted.is_opted_out(gid, h.bob.id)
    await _grant_manage_guild(h, h.alice)
    await vh.move(h.alice, vh.lounge)
    await join_voice(h.bot, h.guild, h.alice, vh.lounge)
    assert restarted.is_opted_out(gid, h.bob.id)

    back = await voice_consent(h.memory, restarted, gid, h.bob.id, False)
    assert "transcribed again" in back.text
    assert not restarted.is_opted_out(gid, h.bob.id)
    assert await h.memory.guilds.voice_opt_outs() == set()
    await restarted.close()


async def test_opt_out_without_voice_configured_is_still_stored(vh: VoiceHarness) -> None:
    h = vh.h
    h.bot.voice = None
    await voice_consent(h.memory, None, h.guild.id, h.alice.id, True)
    assert await h.memory.guilds.voice_opt_outs() == {(str(h.guild.id), str(h.alice.id))}


async def test_speech_reaches_memory_and_opted_out_speech_does_not(vh: VoiceHarness) -> None:
    h = vh.h
    gid = str(h.guild.id)
    await voice_consent(h.memory, vh.manager, h.guild.id, h.bob.id, True)
    await _grant_manage_guild(h, h.alice)
    await vh.move(h.alice, vh.lounge)
    await vh.move(h.bob, vh.lounge)
    h.fake.script_transcription("I moved to Berlin last year and I work as a nurse")
    await join_voice(h.bot, h.guild, h.alice, vh.lounge)
    sink = vh.clients[0].sink
    say(sink, h.alice, 40, vh.clock)  # type: ignore[arg-type]
    say(sink, h.bob, 40, vh.clock)  # type: ignore[arg-type]
    assert await leave_voice(h.bot, h.guild, h.alice)  # drains: flush, STT, ingest
    await h.settle()
    assert len(h.fake.transcription_requests()) == 1  # Bob's audio never left the bot
    hits = await h.memory.search(gid, "nurse Berlin", scope="messages")
    assert [(m.kind, m.subject, m.channel_id) for m in hits] == [
        ("message", str(h.alice.id), str(vh.lounge.id))
    ]
    stored = await h.memory.get_message(gid, hits[0].id)
    assert stored is not None and stored.source == "voice"
    assert stored.author_name == h.alice.display_name
    facts = await h.memory.facts.find(gid, subject=str(h.alice.id))
    assert any("nurse" in f.fact for f in facts)
    assert await h.memory.facts.find(gid, subject=str(h.bob.id)) == []


# -- status ------------------------------------------------------------------------------------


async def test_status_text(vh: VoiceHarness) -> None:
    h = vh.h
    gid = h.guild.id
    await voice_consent(h.memory, vh.manager, gid, h.bob.id, True)
    idle = await voice_status(h.memory, vh.manager, "", h.guild)
    assert idle.text == (
        "**Voice:** not in a voice channel in this server.\n1 member opted out of voice here."
    )
    await _grant_manage_guild(h, h.alice)
    await vh.move(h.alice, vh.lounge)
    await join_voice(h.bot, h.guild, h.alice, vh.lounge)
    say(vh.clients[0].sink, h.bob, 10, vh.clock)  # type: ignore[arg-type]

    async def frames_counted() -> bool:
        status = await voice_status(h.memory, vh.manager, "", h.guild)
        return "• dropped: 10 frames" in status.text

    assert await eventually(frames_counted)  # the frame task runs off the sink's thread
    busy = await voice_status(h.memory, vh.manager, "", h.guild)
    lines = busy.text.splitlines()
    assert lines[0].startswith(f"**Voice:** transcribing <#{vh.lounge.id}>, started <t:")
    assert "(not receiving)" not in lines[0]
    assert "• speech-to-text: `openai:gpt-4o-mini-transcribe`; 0 speaker(s) heard" in lines
    assert any(line.startswith("• dropped: 10 frames of opted-out members") for line in lines)
    assert "• DAVE decryption: ok (900 frames decrypted, 5 failed)" in lines
    assert lines[-1] == "1 member opted out of voice here."
    off = await voice_status(h.memory, None, "voice transcription is turned off", h.guild)
    assert off.text.startswith("**Voice:** off — voice transcription is turned off.")


# -- leaving -----------------------------------------------------------------------------------


async def test_leaves_when_the_last_human_leaves(vh: VoiceHarness) -> None:
    h = vh.h
    assert h.guild.me is not None
    music = dback.get_state().store_user(dfacts.make_user_dict("musicbot", 1, None, bot=True))
    other_bot = dback.make_member(music, h.guild)
    await _grant_manage_guild(h, h.alice)
    await vh.move(h.alice, vh.lounge)
    await vh.move(h.bob, vh.lounge)
    await vh.move(other_bot, vh.lounge)
    await join_voice(h.bot, h.guild, h.alice, vh.lounge)
    await vh.move(h.guild.me, vh.lounge)  # the gateway reports the bot itself joining

    await vh.move(h.bob, vh.attic)  # moved elsewhere; Alice is still there
    await vh.move(h.alice, vh.lounge)  # a mute toggle: same channel
    assert vh.manager.session(h.guild.id) is not None
    await vh.move(h.alice, None)  # only the bots are left
    assert vh.manager.session(h.guild.id) is None
    assert vh.events == ["listen", "stop_listening", "disconnect"]


async def test_stops_when_the_bot_is_disconnected_or_moved(vh: VoiceHarness) -> None:
    h = vh.h
    me = h.guild.me
    assert me is not None
    await _grant_manage_guild(h, h.alice)
    await vh.move(h.alice, vh.lounge)
    await vh.move(h.bob, vh.attic)
    await join_voice(h.bot, h.guild, h.alice, vh.lounge)
    await vh.move(me, vh.lounge)
    await vh.move(me, vh.attic)  # a moderator dragged the bot: the notice was not posted there
    assert vh.manager.session(h.guild.id) is None
    assert vh.events[-2:] == ["stop_listening", "disconnect"]


async def test_join_refusals(vh: VoiceHarness) -> None:
    h = vh.h
    await _grant_manage_guild(h, h.alice)
    not_in_voice = await join_voice(h.bot, h.guild, h.alice, None)
    assert not_in_voice.text.startswith("Join a voice channel first")
    empty = await join_voice(h.bot, h.guild, h.alice, vh.attic)
    assert empty.text == f"Nobody is in {vh.attic.mention}; I join when people are there."
    h.bot.voice, h.bot.voice_unavailable = None, "voice transcription is turned off"
    await vh.move(h.alice, vh.lounge)
    off = await join_voice(h.bot, h.guild, h.alice, None)
    assert off.text == "I can't transcribe voice on this bot: voice transcription is turned off."
    assert vh.connects == []


async def test_switching_channels_and_joining_twice(vh: VoiceHarness) -> None:
    h = vh.h
    await _grant_manage_guild(h, h.alice)
    await vh.move(h.alice, vh.lounge)
    await vh.move(h.bob, vh.attic)
    await join_voice(h.bot, h.guild, h.alice, vh.lounge)
    twice = await join_voice(h.bot, h.guild, h.alice, vh.lounge)
    assert twice.text == f"I am already transcribing {vh.lounge.mention}."
    moved = await join_voice(h.bot, h.guild, h.alice, vh.attic)
    assert f"(and left <#{vh.lounge.id}>)" in moved.text
    assert [c for c, _ in vh.connects] == [vh.lounge.id, vh.attic.id]
    session = vh.manager.session(h.guild.id)
    assert session is not None and session.channel_id == vh.attic.id


async def test_unloading_the_cog_closes_the_voice_sessions(vh: VoiceHarness) -> None:
    # Bot.close() unloads every extension first (discord.py); dpytest's fake
    # websocket cannot run the rest of close(), so the unload is driven directly.
    h = vh.h
    await _grant_manage_guild(h, h.alice)
    await vh.move(h.alice, vh.lounge)
    await join_voice(h.bot, h.guild, h.alice, vh.lounge)
    session = vh.manager.session(h.guild.id)
    assert session is not None
    await h.bot.unload_extension("bot.cogs.voice")
    assert vh.manager.session(h.guild.id) is None and not session.pipeline.running
    assert vh.events == ["listen", "stop_listening", "disconnect"]


# -- building the manager from settings --------------------------------------------------------


async def test_build_voice_from_settings(make_memory: Any, fake_openai: FakeOpenAI) -> None:
    memory = await make_memory(embeddings="none")

    off_settings = load_settings(env={"GUILDLORE_VOICE_ENABLED": "false"})
    off = build_voice(off_settings, memory, settings_clients(off_settings))
    assert off.manager is None and "voice.enabled = false" in off.reason

    bare = load_settings(env={})
    none = build_voice(bare, memory, settings_clients(bare))
    assert none.manager is None and "no speech-to-text is configured" in none.reason

    # Default: the LLM endpoint's own client.
    shared_settings = load_settings(env={"GUILDLORE_LLM_BASE_URL": fake_openai.base_url})
    async with settings_clients(shared_settings) as clients:
        shared = build_voice(shared_settings, memory, clients)
        assert shared.manager is not None and clients.openai is not None
        assert clients.transcription is clients.openai
        assert isinstance(shared.transcriber, OpenAITranscriber)
        assert shared.transcriber._client is clients.openai
        assert shared.transcriber.model == "gpt-4o-mini-transcribe"

    # Its own endpoint gets its own key; the LLM key never goes there.
    env = {
        "OPENAI_API_KEY": "sk-llm",
        "GUILDLORE_VOICE_STT_BASE_URL": fake_openai.base_url,
        "GUILDLORE_VOICE_STT_API_KEY": "sk-voice",
        "GUILDLORE_VOICE_STT_MODEL": "gpt-transcribe",
        "GUILDLORE_VOICE_LANGUAGE": "en",
    }
    own_settings = load_settings(env=env)
    async with settings_clients(own_settings) as clients:
        own = build_voice(own_settings, memory, clients)
        assert own.manager is not None
        assert clients.transcription is not None and clients.transcription is not clients.openai
        fake_openai.script_transcription("hello")
        import numpy as np

        assert await own.transcriber.transcribe(np.zeros(1600, dtype=np.float32)) == "hello"
        (req,) = fake_openai.transcription_requests()
        assert req.headers.get("Authorization") == "Bearer sk-voice"
        assert (req.body["model"], req.body["language"]) == ("gpt-transcribe", "en")
        await own.aclose()
    assert clients.transcription.is_closed() and clients.openai is not None
    assert clients.openai.is_closed()

    # The opt-out store of the built manager is the engine's table.
    await shared.manager.opt_out(7, 8)
    assert await memory.guilds.voice_opt_outs() == {("7", "8")}


def test_voice_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(env={"GUILDLORE_VOICE_STT_BASE_URL": "localhost:9000"})
    assert "voice.stt_base_url must start with http://" in str(info.value)
    if not local_stt_available():
        with pytest.raises(SettingsError) as info:
            load_settings(env={"GUILDLORE_VOICE_STT": "local"})
        assert "local-stt extra is not installed" in str(info.value)
    # Voice off: its other settings are not held against the start.
    assert not load_settings(
        env={"GUILDLORE_VOICE_STT": "local", "GUILDLORE_VOICE_ENABLED": "0"}
    ).voice_enabled
    with pytest.raises(SettingsError) as info:
        load_settings(
            env={"GUILDLORE_VOICE_STT": "local", "GUILDLORE_VOICE_LOCAL_MODEL_PATH": "nope"}
        )
    assert "voice.local_model_path 'nope' is not a folder" in str(info.value)


# -- helpers -----------------------------------------------------------------------------------


async def _connected(client: FakeVoiceClient) -> FakeVoiceClient:
    return client


class _Response:
    def __init__(self, owner: FakeInteraction) -> None:
        self.owner = owner
        self.done = False

    def is_done(self) -> bool:
        return self.done

    async def defer(self, *, ephemeral: bool = False, thinking: bool = False) -> None:
        self.done = True
        self.owner.deferred = ephemeral

    async def send_message(self, content: str, *, ephemeral: bool = False, **kw: Any) -> None:
        self.done = True
        self.owner.replies.append((content, ephemeral))


class _Followup:
    def __init__(self, owner: FakeInteraction) -> None:
        self.owner = owner

    async def send(self, content: str, *, ephemeral: bool = False, **kw: Any) -> None:
        self.owner.replies.append((content, ephemeral))


class FakeInteraction:
    """What the handlers read of a ``discord.Interaction``; replies are recorded."""

    def __init__(self, guild: discord.Guild, user: discord.Member, channel: Any) -> None:
        self.guild, self.user, self.channel = guild, user, channel
        self.command = None
        self.replies: list[tuple[str, bool]] = []
        self.deferred: bool | None = None
        self.response = _Response(self)
        self.followup = _Followup(self)
