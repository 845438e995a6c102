"""VoiceManager: the consent rules and the wiring the voice cog relies on."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from discord.ext.voice_recv import rtp
from discord.ext.voice_recv.opus import VoiceData

from bot.voice.discord_adapter import DaveRecvClient, PipelineSink
from bot.voice.service import (
    OPT_OUT_COMMAND,
    VoiceJoinError,
    VoiceManager,
    dave_health,
    describe_transcriber,
    privacy_notice,
    voice_error_log,
)
from bot.voice.stt import FasterWhisperTranscriber, OpenAITranscriber
from bot.voice.types import VoiceSettings
from memory.models import IncomingMessage
from tests.helpers import eventually
from tests.voice.test_voice_contract import Guild, Member
from tests.voice.test_voice_units import MarkerVad, VirtualClock, stereo_frame

GUILD = 10
ME = 99


class FakeVoiceClient:
    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.sink: Any = None
        self.after: Any = None
        self.listening = False

    def listen(self, sink: Any, *, after: Any = None) -> None:
        self.events.append("listen")
        self.sink, self.after, self.listening = sink, after, True

    def is_listening(self) -> bool:
        return self.listening

    def stop_listening(self) -> None:
        self.events.append("stop_listening")
        self.listening = False

    async def disconnect(self, *, force: bool = False) -> None:
        self.events.append("disconnect")

    def receive_stats(self) -> dict[str, int]:
        return {"dave_ok": 900, "plain": 10, "failed": 5, "no_user": 0}


class FakeVoiceChannel:
    def __init__(self, cid: int, guild: Guild, events: list[str], *, send_fails: bool = False):
        self.id = cid
        self.guild = guild
        self.mention = f"<#{cid}>"
        self.events = events
        self.sent: list[str] = []
        self.connect_kwargs: dict[str, Any] = {}
        self.send_fails = send_fails
        self.vc: FakeVoiceClient | None = None

    async def send(self, text: str) -> None:
        if self.send_fails:
            raise PermissionError("Missing Permissions")
        self.events.append("notice")
        self.sent.append(text)

    async def connect(self, **kwargs: Any) -> FakeVoiceClient:
        self.events.append("connect")
        self.connect_kwargs = kwargs
        self.vc = FakeVoiceClient(self.events)
        return self.vc


def make_guild() -> Guild:
    members = {1: Member(1), 2: Member(2), ME: Member(ME, bot=True), 50: Member(50, bot=True)}
    members[1].display_name = "Alice"
    guild = Guild(members)
    guild.id = GUILD  # type: ignore[attr-defined]
    guild.me = members[ME]  # type: ignore[attr-defined]
    return guild


class Store:
    """Stands in for the cog's persistence of opt-outs."""

    def __init__(self, initial: set[int] | None = None, fail: bool = False) -> None:
        self.rows: set[tuple[int, int]] = {(GUILD, u) for u in (initial or set())}
        self.saves: list[tuple[int, int, bool]] = []
        self.fail = fail

    async def load(self, guild_id: int) -> list[int]:
        return [u for g, u in self.rows if g == guild_id]

    async def save(self, guild_id: int, user_id: int, opted_out: bool) -> None:
        self.saves.append((guild_id, user_id, opted_out))
        if self.fail:
            raise OSError("database is locked")
        if opted_out:
            self.rows.add((guild_id, user_id))
        else:
            self.rows.discard((guild_id, user_id))


class Stt:
    name = "test"

    def __init__(self) -> None:
        self.calls = 0

    async def transcribe(self, audio16k: np.ndarray) -> str:
        self.calls += 1
        return "hello there"


def make_manager(
    store: Store, clock: VirtualClock | None = None, **kw: Any
) -> tuple[VoiceManager, list]:
    ingested: list[IncomingMessage] = []

    async def ingest(msg: IncomingMessage) -> None:
        ingested.append(msg)

    manager = VoiceManager(
        transcriber=Stt(),
        ingest=ingest,
        settings=VoiceSettings(),
        load_opt_outs=store.load,
        save_opt_out=store.save,
        vad_factory=MarkerVad,
        clock=clock or VirtualClock(),
        **kw,
    )
    return manager, ingested


def say(sink: PipelineSink, member: Member, frames: int, clock: VirtualClock) -> None:
    for i in range(frames):
        data = VoiceData(rtp.FakePacket(1, i, i * 960), member, pcm=stereo_frame(i, voiced=True))
        sink.write(member, data)
        clock.now += 0.02


async def test_join_posts_notice_first_then_connects_with_dave_receiver() -> None:
    events: list[str] = []
    channel = FakeVoiceChannel(20, make_guild(), events)
    manager, _ = make_manager(Store())
    session = await manager.join(channel)
    assert events == ["notice", "connect", "listen"]
    assert channel.connect_kwargs == {"cls": DaveRecvClient, "self_deaf": False}
    assert isinstance(channel.vc.sink, PipelineSink)  # type: ignore[union-attr]
    notice = channel.sent[0]
    assert OPT_OUT_COMMAND in notice and "<#20>" in notice and "not kept" in notice
    assert session.pipeline.running
    assert await manager.join(channel) is session  # same channel: no second join
    await manager.close()


async def test_no_notice_no_recording() -> None:
    events: list[str] = []
    channel = FakeVoiceChannel(20, make_guild(), events, send_fails=True)
    manager, _ = make_manager(Store())
    with pytest.raises(VoiceJoinError, match="privacy notice"):
        await manager.join(channel)
    assert "connect" not in events and manager.session(GUILD) is None


async def test_persisted_opt_outs_apply_from_the_first_frame() -> None:
    clock = VirtualClock()
    events: list[str] = []
    channel = FakeVoiceChannel(20, make_guild(), events)
    manager, ingested = make_manager(Store(initial={2}), clock)
    session = await manager.join(channel)
    sink = channel.vc.sink  # type: ignore[union-attr]
    guild = channel.guild
    say(sink, guild.get_member(1), 30, clock)  # type: ignore[arg-type]
    say(sink, guild.get_member(2), 30, clock)  # type: ignore[arg-type]
    say(sink, guild.get_member(50), 30, clock)  # type: ignore[arg-type]  # another bot
    stats = session.pipeline.stats
    assert stats["dropped_opted_out"] == 30 and stats["frames_in"] == 30
    assert sink.stats["dropped_bot"] == 30
    assert await manager.leave(GUILD) is True
    assert events[-2:] == ["stop_listening", "disconnect"]
    assert [(m.author_id, m.author_name, m.content) for m in ingested] == [
        ("1", "Alice", "hello there")
    ]
    assert await manager.leave(GUILD) is False


async def test_opt_out_mid_session_discards_buffered_audio_and_persists() -> None:
    clock = VirtualClock()
    store = Store()
    channel = FakeVoiceChannel(20, make_guild(), [])
    manager, ingested = make_manager(store, clock)
    await manager.join(channel)
    sink = channel.vc.sink  # type: ignore[union-attr]
    say(sink, channel.guild.get_member(1), 30, clock)  # type: ignore[arg-type]
    await asyncio.sleep(0.05)
    await manager.opt_out(GUILD, 1)
    say(sink, channel.guild.get_member(1), 30, clock)  # type: ignore[arg-type]
    await manager.leave(GUILD)
    assert ingested == []
    assert store.saves == [(GUILD, 1, True)] and manager.is_opted_out(GUILD, 1)
    await manager.opt_in(GUILD, 1)
    assert not manager.is_opted_out(GUILD, 1) and store.rows == set()


async def test_storage_failures_err_on_the_side_of_not_transcribing() -> None:
    manager, _ = make_manager(Store(fail=True))
    with pytest.raises(OSError):
        await manager.opt_out(GUILD, 3)
    assert manager.is_opted_out(GUILD, 3)  # in effect although not persisted
    with pytest.raises(OSError):
        await manager.opt_in(GUILD, 3)
    assert manager.is_opted_out(GUILD, 3)


async def test_switching_channel_leaves_the_old_one() -> None:
    events: list[str] = []
    guild = make_guild()
    manager, _ = make_manager(Store())
    first = await manager.join(FakeVoiceChannel(20, guild, events))
    second = await manager.join(FakeVoiceChannel(21, guild, events))
    assert first is not second and not first.pipeline.running
    assert events == ["notice", "connect", "listen", "stop_listening", "disconnect"] + [
        "notice",
        "connect",
        "listen",
    ]
    await manager.close()


async def test_stats_for_the_dashboard() -> None:
    channel = FakeVoiceChannel(20, make_guild(), [])
    manager, _ = make_manager(Store(initial={2}))
    await manager.join(channel)
    channel.vc.after(RuntimeError("router died"))  # type: ignore[union-attr]
    stats = manager.stats()
    (s,) = stats["sessions"]
    assert (s["guild_id"], s["channel_id"], s["listening"]) == ("10", "20", True)
    assert s["receive"]["dave_ok"] == 900 and s["dave_health"] == "ok"
    assert s["receive_error"] == "RuntimeError: router died"
    assert s["pipeline"]["running"] is True and s["sink"]["frames"] == 0
    assert stats["opted_out"] == {"10": 1}
    await manager.close()
    assert manager.stats()["sessions"] == []


async def test_join_failures_and_a_stopped_receiver_are_logged_as_voice_errors(
    make_memory: Any,
) -> None:
    mem = await make_memory(embeddings="none")
    manager, _ = make_manager(Store(), report_error=voice_error_log(mem))
    with pytest.raises(VoiceJoinError):
        await manager.join(FakeVoiceChannel(20, make_guild(), [], send_fails=True))
    (row,) = await mem.admin.action_log(kind="voice_error")
    assert row.guild_id == str(GUILD) and "privacy notice" in row.message
    assert row.detail == {"stage": "join", "channel_id": "20", "error": "VoiceJoinError"}

    channel = FakeVoiceChannel(21, make_guild(), [])
    await manager.join(channel)
    await asyncio.to_thread(channel.vc.after, RuntimeError("router died"))  # type: ignore[union-attr]
    assert await eventually(lambda: _voice_errors(mem, 2))
    newest = (await mem.admin.action_log(kind="voice_error"))[0]
    assert "router died" in newest.message and newest.detail is not None
    assert newest.detail["stage"] == "receive" and newest.detail["channel_id"] == "21"
    await manager.close()


async def _voice_errors(mem: Any, n: int) -> bool:
    return len(await mem.admin.action_log(kind="voice_error")) == n


def test_dave_health() -> None:
    assert dave_health({}) == "unknown"
    assert dave_health({"dave_ok": 100, "failed": 400}) == "degraded"
    assert dave_health({"dave_ok": 400, "no_user": 10}) == "ok"


def test_privacy_notice_names_where_speech_goes(fake_openai: Any) -> None:
    text = privacy_notice("<#5>", where="on this bot's own machine")
    assert "on this bot's own machine" in text and "/memory forget" in text
    assert describe_transcriber(FasterWhisperTranscriber()) == (
        "offline, on the machine that runs this bot"
    )
    where = describe_transcriber(OpenAITranscriber(fake_openai.client()))
    assert where.startswith("by an external speech-to-text service (127.0.0.1:")
