"""End to end without Discord: synthetic speech → Opus RTP → adapter → pipeline → STT → ingest.

Speech comes from espeak-ng, is resampled by sox to Discord's 48 kHz stereo,
Opus-encoded with discord.py's own encoder in 20 ms frames, DAVE-sealed,
transport-encrypted with discord.py's own AEAD method, and handed — from a
separate thread, paced like a live socket — to voice-recv's real
``AudioReader.callback`` with the adapter's DAVE layer, voice-recv's real
jitter buffer / router thread / decoder (hardened), and ``PipelineSink``.

Scenario (20 ms ticks): two humans talking over each other, the bot itself
talking, an opted-out member talking, an unmapped sender, camera RTP, one
frame whose DAVE decrypt fails and one corrupt Opus frame.
"""

from __future__ import annotations

import asyncio
import io
import shutil
import subprocess
import threading
import time
import wave
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import discord
import pytest
from discord.ext.voice_recv.reader import AudioReader

from bot.voice import discord_adapter as adapter
from bot.voice.ids import is_synthetic_id
from bot.voice.pipeline import VoiceIngestPipeline
from bot.voice.stt import FasterWhisperTranscriber, OpenAITranscriber, local_stt_available
from bot.voice.types import FRAME_BYTES, VoiceSettings
from memory.models import IncomingMessage
from tests.voice.test_voice_contract import (
    KEY,
    MODE,
    FakeDaveSession,
    Guild,
    Member,
    RtpSender,
    opus_available,
)

pytestmark = pytest.mark.slow

TEXT_A = "I moved to Berlin last year and I work as a nurse"
TEXT_B = "My sister Anna has two cats and she lives in Toronto"

GUILD_ID = 500
CHANNEL_ID = 600
ALICE, BOB, CAROL, BOT = 1001, 1002, 1003, 9000
SSRC = {ALICE: 11, BOB: 12, CAROL: 13, BOT: 19}
STRANGER_SSRC = 77  # sends audio before SPEAKING mapped it to anyone
ALICE_VIDEO_SSRC = 21  # camera RTP arriving on the voice socket


def _missing_tools() -> str | None:
    for tool in ("espeak-ng", "sox"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/setup.sh --tests installs it)"
    if not opus_available():
        return "libopus is not installed (apt-get install libopus0)"
    return None


@dataclass
class Clip:
    text: str
    pcm48: bytes  # s16le stereo 48 kHz, padded to whole 20 ms frames
    duration_s: float  # espeak's own length

    @property
    def frames(self) -> list[bytes]:
        return [self.pcm48[i : i + FRAME_BYTES] for i in range(0, len(self.pcm48), FRAME_BYTES)]


def synthesise(text: str, workdir: Path, name: str) -> Clip:
    wav = workdir / f"{name}.wav"
    raw = workdir / f"{name}.raw"
    subprocess.run(["espeak-ng", "-w", str(wav), text], check=True, capture_output=True)
    subprocess.run(
        ["sox", str(wav), "-r", "48000", "-c", "2", "-b", "16", "-e", "signed-integer", str(raw)],
        check=True,
        capture_output=True,
    )
    with wave.open(str(wav)) as w:
        duration = w.getnframes() / w.getframerate()
    pcm = raw.read_bytes()
    pcm += bytes(-len(pcm) % FRAME_BYTES)
    return Clip(text, pcm, duration)


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Clip]:
    missing = _missing_tools()
    assert missing is None, missing
    workdir = tmp_path_factory.mktemp("voice")
    return {"a": synthesise(TEXT_A, workdir, "a"), "b": synthesise(TEXT_B, workdir, "b")}


# ── a voice client as far as voice-recv's AudioReader can tell ──────────


class Socket:
    def sendto(self, data: bytes, addr: Any) -> int:
        # UDPKeepAlive: failing here while "not connected" ends its thread.
        raise OSError("no network in tests")


class Connection:
    def __init__(self, dave_session: Any) -> None:
        self.dave_session = dave_session
        self.dave_protocol_version = 1
        self.socket = Socket()
        self.endpoint_ip = "127.0.0.1"
        self.voice_port = 9
        self.listeners: list[Callable[[bytes], None]] = []

    def add_socket_listener(self, callback: Callable[[bytes], None]) -> None:
        self.listeners.append(callback)

    def remove_socket_listener(self, callback: Callable[[bytes], None]) -> None:
        self.listeners.remove(callback)


class ReaderVoiceClient:
    """The attributes voice-recv's reader, router, decoder and timers touch."""

    mode = MODE

    def __init__(self, members: dict[int, Member], dave_session: Any) -> None:
        self.secret_key = list(KEY)
        self.guild = Guild(members)
        self.guild.me = members[BOT]  # type: ignore[attr-defined]
        self.client = self
        self._connection = Connection(dave_session)
        # What voice-recv's gateway hook fills from READY / SPEAKING (op 5).
        self._ssrc_to_id = {ssrc: uid for uid, ssrc in SSRC.items()}
        self.stop_listening_calls = 0

    def _get_id_from_ssrc(self, ssrc: int) -> int | None:
        return self._ssrc_to_id.get(ssrc)

    def get_user(self, uid: int) -> None:
        return None

    def wait_until_connected(self, timeout: float | None = None) -> bool:
        return False

    def is_connected(self) -> bool:
        return False

    def stop_listening(self) -> None:
        self.stop_listening_calls += 1

    def dispatch_sink(self, event: str, *args: Any) -> None:
        pass


# ── the scenario ────────────────────────────────────────────────────────


@dataclass
class Stream:
    user_id: int | None
    sender: RtpSender
    frames: list[bytes]  # Opus payloads before DAVE
    start_tick: int
    seal: bool = True
    corrupt_at: int | None = None
    undecryptable_at: int | None = None
    sent: int = field(default=0)


def opus_frames(clip: Clip) -> list[bytes]:
    encoder = discord.opus.Encoder()  # one encoder per stream, like a client
    frames = [encoder.encode(f, 960) for f in clip.frames]
    # Clients send five silence frames when a user stops talking, then nothing.
    return frames + [adapter.OPUS_SILENCE] * 5


def build_streams(clips: dict[str, Clip]) -> list[Stream]:
    return [
        Stream(
            ALICE,
            RtpSender(SSRC[ALICE], extension=True),
            opus_frames(clips["a"]),
            10,
            corrupt_at=60,
        ),
        Stream(
            BOB,
            RtpSender(SSRC[BOB], extension=True),
            opus_frames(clips["b"]),
            90,
            undecryptable_at=5,
        ),
        Stream(BOT, RtpSender(SSRC[BOT]), opus_frames(clips["a"]), 30),
        Stream(CAROL, RtpSender(SSRC[CAROL], extension=True), opus_frames(clips["b"]), 50),
        Stream(None, RtpSender(STRANGER_SSRC), opus_frames(clips["a"])[:50], 20, seal=False),
        Stream(
            None,
            RtpSender(ALICE_VIDEO_SSRC, payload_type=103),
            [bytes([0x90, i % 256]) * 300 for i in range(40)],
            0,
            seal=False,
        ),
    ]


def packet_for(stream: Stream, index: int) -> bytes:
    payload = stream.frames[index]
    if index == stream.corrupt_at:
        payload = b"\x03"  # libopus: "corrupted stream"
    if stream.seal and stream.user_id is not None and payload != adapter.OPUS_SILENCE:
        payload = FakeDaveSession.seal(stream.user_id, payload)
        if index == stream.undecryptable_at:
            # Fails authentication, like a frame from a stale epoch.
            payload = payload[:-3] + bytes([payload[-3] ^ 0xFF]) + adapter.DAVE_MAGIC
    return stream.sender.packet(payload)


def play(streams: list[Stream], listeners: list[Callable[[bytes], None]]) -> int:
    """Like discord.py's SocketReader thread: call listeners per datagram, in real time."""
    last = max(s.start_tick + len(s.frames) for s in streams)
    t0 = time.perf_counter()
    sent = 0
    for tick in range(last):
        for s in streams:
            i = tick - s.start_tick
            if 0 <= i < len(s.frames):
                raw = packet_for(s, i)
                for callback in list(listeners):
                    callback(raw)
                sent += 1
        delay = t0 + (tick + 1) * 0.02 - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
    return sent


def wav_duration(audio: bytes) -> float:
    with wave.open(io.BytesIO(audio)) as w:
        assert (w.getframerate(), w.getnchannels()) == (16_000, 1)
        return w.getnframes() / w.getframerate()


@dataclass
class Outcome:
    ingested: list[IncomingMessage]
    pipeline: dict[str, Any]
    layer: dict[str, int]
    sink: dict[str, int]
    decode_errors: int
    router_alive_after: bool
    reader_error: Exception | None
    stt_speakers_heard: list[int]


async def run_scenario(
    clips: dict[str, Clip],
    transcriber: Any,
    forward: Callable[[IncomingMessage], Awaitable[object]] | None = None,
) -> Outcome:
    members = {
        ALICE: Member(ALICE),
        BOB: Member(BOB),
        CAROL: Member(CAROL),
        BOT: Member(BOT, bot=True),
    }
    names = {ALICE: "Alice", BOB: "Bob", CAROL: "Carol"}
    opted_out = {CAROL}
    dave = FakeDaveSession({ALICE, BOB, CAROL, BOT})
    vc = ReaderVoiceClient(members, dave)
    ingested: list[IncomingMessage] = []

    async def ingest(msg: IncomingMessage) -> None:
        ingested.append(msg)
        if forward is not None:
            await forward(msg)

    class HeardBy:
        """Records which speaker each STT call was for, via the pipeline's name lookup."""

        def __init__(self) -> None:
            self.speakers: list[int] = []

    heard = HeardBy()

    def resolve_name(uid: int) -> str:
        heard.speakers.append(uid)
        return names.get(uid, str(uid))

    pipeline = VoiceIngestPipeline(
        GUILD_ID,
        CHANNEL_ID,
        transcriber,
        ingest,
        settings=VoiceSettings(),
        is_opted_out=lambda uid: uid in opted_out,
        resolve_name=resolve_name,
        is_bot=lambda uid: uid == BOT,
    )
    await pipeline.start()
    sink = adapter.PipelineSink(pipeline)
    stopped = threading.Event()
    reader_errors: list[Exception | None] = []

    def after(error: Exception | None) -> None:
        reader_errors.append(error)
        stopped.set()

    reader, layer = adapter.build_reader(sink, vc, after=after)
    assert isinstance(reader, AudioReader)
    decode_errors_before = adapter.decode_stats()["decode_errors"]
    reader.start()
    assert vc._connection.listeners == [reader.callback]
    feeder = threading.Thread(
        target=play, args=(build_streams(clips), vc._connection.listeners), name="udp-feeder"
    )
    feeder.start()
    await asyncio.to_thread(feeder.join)
    # Let the router drain its jitter buffers: until no frame has come for a
    # whole second (one quiet 0.2 s look ended it early on a loaded machine,
    # where the router thread can wait that long for its turn).
    previous, quiet = -1, 0
    while quiet < 5:
        frames = sink.stats["frames"]
        quiet = quiet + 1 if frames == previous else 0
        previous = frames
        await asyncio.sleep(0.2)
    router_alive = reader.packet_router.is_alive() and reader.is_listening()
    reader.stop()
    assert await asyncio.to_thread(stopped.wait, 10)
    await pipeline.close()
    return Outcome(
        ingested=ingested,
        pipeline=pipeline.stats,
        layer=layer.stats,
        sink=dict(sink.stats),
        decode_errors=adapter.decode_stats()["decode_errors"] - decode_errors_before,
        router_alive_after=router_alive,
        reader_error=reader_errors[0] if reader_errors else None,
        stt_speakers_heard=heard.speakers,
    )


def check_common(out: Outcome) -> dict[str, IncomingMessage]:
    by_author = {m.author_id: m for m in out.ingested}
    # One utterance per human who did not opt out; nobody else.
    assert sorted(by_author) == [str(ALICE), str(BOB)], out.ingested
    assert len(out.ingested) == 2
    assert by_author[str(ALICE)].author_name == "Alice"
    for m in out.ingested:
        assert m.source == "voice"
        assert (m.guild_id, m.channel_id) == (str(GUILD_ID), str(CHANNEL_ID))
        assert is_synthetic_id(m.id) and m.created_at.endswith("Z")
    # Ids sort the same way as timestamps; Alice started first.
    by_id = sorted(out.ingested, key=lambda m: int(m.id))
    assert [m.created_at for m in by_id] == sorted(m.created_at for m in out.ingested)
    assert by_id[0].author_id == str(ALICE)
    # The bot and the opted-out member never got near the transcriber.
    assert sorted(out.stt_speakers_heard) == [ALICE, BOB]
    assert out.sink["dropped_bot"] > 0
    assert out.pipeline["dropped_opted_out"] > 100
    assert out.pipeline["frames_in"] == out.sink["forwarded"] - out.pipeline["dropped_opted_out"]
    assert out.pipeline["dropped_frames_queue_full"] == 0
    # DAVE layer: the stranger, the camera and the bad frame became silence.
    assert out.layer["no_user"] == 50
    assert out.layer["not_audio"] == 40
    assert out.layer["failed"] == 1
    assert out.layer["dave_ok"] > 400
    # The corrupt frame was decoded as silence and the router kept running.
    assert out.decode_errors == 1
    assert out.router_alive_after and out.reader_error is None
    return by_author


def by_length(clips: dict[str, Clip], durations: list[float]) -> Callable[[bytes, Any], str]:
    """The fake server cannot recognise speech: tell the two clips apart by length."""

    def transcribe(audio: bytes, form: Any) -> str:
        d = wav_duration(audio)
        durations.append(d)
        a, b = clips["a"].duration_s, clips["b"].duration_s
        return TEXT_A + "." if abs(d - a) < abs(d - b) else TEXT_B + "."

    return transcribe


async def test_voice_end_to_end_with_fake_transcription_server(
    clips: dict[str, Clip], fake_openai: Any
) -> None:
    durations: list[float] = []
    fake_openai.transcription_handler = by_length(clips, durations)
    stt = OpenAITranscriber(fake_openai.client(), language="en")
    out = await run_scenario(clips, stt)
    by_author = check_common(out)
    assert by_author[str(ALICE)].content == TEXT_A + "."
    assert by_author[str(BOB)].content == TEXT_B + "."
    requests = fake_openai.transcription_requests()
    assert len(requests) == 2
    assert requests[0].body["model"] == "gpt-4o-mini-transcribe"
    # Each utterance is its clip, give or take pre-roll, tail and trimming.
    expected = sorted([clips["a"].duration_s, clips["b"].duration_s])
    for got, want in zip(sorted(durations), expected, strict=True):
        assert abs(got - want) < 0.5, (durations, expected)


async def test_voice_transcript_nurse_fact_reaches_memory(
    clips: dict[str, Clip], fake_openai: Any, tmp_path: Path
) -> None:
    """Voice → memory engine: the nurse fact is extracted and found, attributed to Alice."""
    from memory.config import EmbeddingConfig, MemoryConfig
    from memory.engine import Memory

    cfg = MemoryConfig.for_data_dir(tmp_path / "data", embedding=EmbeddingConfig(provider="none"))
    mem = await Memory.open(cfg)
    try:
        fake_openai.transcription_handler = by_length(clips, [])
        outcomes: list[Any] = []

        async def to_memory(msg: IncomingMessage) -> None:
            outcomes.append(await mem.ingest_message(msg))

        stt = OpenAITranscriber(fake_openai.client(), language="en")
        check_common(await run_scenario(clips, stt, forward=to_memory))
        assert [o.status for o in outcomes] == ["queued", "queued"]
        assert [await o.wait() for o in outcomes] == [True, True]
        assert await mem.drain()
        guild = str(GUILD_ID)
        facts = await mem.facts.find(guild, subject=str(ALICE), active=True, limit=50)
        nurse = [f for f in facts if "nurse" in f.fact.lower()]
        assert nurse, facts
        assert all(f.channel_id in (None, str(CHANNEL_ID)) for f in nurse)
        source = await mem.get_message(guild, str(nurse[0].source_message_id))
        assert source is not None
        assert (source.source, source.author_id) == ("voice", str(ALICE))
        hits = await mem.search(guild, "Who works as a nurse?")
        assert any("nurse" in h.text.lower() and h.subject == str(ALICE) for h in hits), hits
    finally:
        await mem.close()


@pytest.mark.skipif(not local_stt_available(), reason="local-stt extra not installed")
async def test_voice_end_to_end_with_local_model(clips: dict[str, Clip]) -> None:
    stt = FasterWhisperTranscriber()
    try:
        out = await run_scenario(clips, stt)
    finally:
        await stt.aclose()
    by_author = check_common(out)
    alice = by_author[str(ALICE)].content.lower()
    bob = by_author[str(BOB)].content.lower()
    assert "berlin" in alice and "nurse" in alice, alice
    assert "toronto" in bob and "sister" in bob, bob
