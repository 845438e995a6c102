"""Unit tests for the discord-free parts of the voice pipeline."""

from __future__ import annotations

import asyncio
import io
import threading
import wave
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from bot.voice.audio import downmix_s16_stereo, mono48_to_16k
from bot.voice.ids import (
    SYNTHETIC_MARK,
    SyntheticIds,
    is_synthetic_id,
    make_synthetic_id,
    snowflake_time,
)
from bot.voice.pipeline import VoiceIngestPipeline
from bot.voice.segmenter import SpeakerSegmenter
from bot.voice.service import voice_error_log
from bot.voice.stt import OpenAITranscriber, encode_wav
from bot.voice.types import FRAME_BYTES, MONO_FRAME_BYTES, VoiceSettings
from bot.voice.vad import WebRtcVad
from memory.models import IncomingMessage
from tests.helpers import eventually

# ── helpers ─────────────────────────────────────────────────────────────

VOICED_LEVEL = 10_000


class MarkerVad:
    """A FrameVad whose truth is written into the frame: first sample ≥ 10000 = speech."""

    def __init__(self) -> None:
        self.calls = 0

    def is_speech(self, frame: bytes) -> bool:
        self.calls += 1
        return int(np.frombuffer(frame[:2], dtype="<i2")[0]) >= VOICED_LEVEL


def mono_frame(tag: int, voiced: bool) -> bytes:
    value = VOICED_LEVEL + tag if voiced else tag
    return np.full(MONO_FRAME_BYTES // 2, value, dtype="<i2").tobytes()


def stereo_frame(tag: int, voiced: bool) -> bytes:
    value = VOICED_LEVEL + tag if voiced else tag
    return np.full(FRAME_BYTES // 2, value, dtype="<i2").tobytes()


def tags_of(pcm: np.ndarray) -> list[int]:
    """First sample of every 20 ms frame, i.e. the tag each frame was made with."""
    return [int(pcm[i]) for i in range(0, len(pcm), MONO_FRAME_BYTES // 2)]


class Feeder:
    """Drives a segmenter at 20 ms per frame on a virtual clock."""

    def __init__(self, seg: SpeakerSegmenter) -> None:
        self.seg = seg
        self.t = 0.0
        self.out: list = []

    def feed(self, n: int, voiced: bool, tag0: int = 1) -> None:
        for i in range(n):
            self.out += self.seg.push(mono_frame(tag0 + i, voiced), self.t)
            self.t += 0.02


def sine(freq: float, seconds: float, rate: int, amp: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return amp * np.sin(2 * np.pi * freq * t)


def peak_hz(x: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.fft.rfftfreq(len(x), 1 / rate)[int(np.argmax(spectrum))])


# ── audio ───────────────────────────────────────────────────────────────


def test_resampling_keeps_a_440_hz_tone() -> None:
    tone48 = (sine(440, 1.0, 48_000) * 32767).astype(np.int16)
    out = mono48_to_16k(tone48)
    assert out.dtype == np.float32
    assert len(out) == 16_000
    assert abs(peak_hz(out, 16_000) - 440) <= 1.0
    # Amplitude survives the anti-alias filter (ignore the filter's edges).
    middle = out[200:-200]
    assert 0.45 < float(np.max(np.abs(middle))) < 0.55


def test_resampling_removes_content_above_the_new_nyquist() -> None:
    # 12 kHz cannot exist at 16 kHz; without the low-pass it would alias to 4 kHz.
    out = mono48_to_16k((sine(12_000, 1.0, 48_000) * 32767).astype(np.int16))
    level = float(np.sqrt(np.mean(out[200:-200] ** 2)))
    assert 20 * np.log10(level / (0.5 / np.sqrt(2))) < -50


def test_downmix_averages_channels_without_wrapping() -> None:
    stereo = np.array([1000, 3000, 32767, 32767, -32768, -32768], dtype="<i2").tobytes()
    assert downmix_s16_stereo(stereo).tolist() == [2000, 32767, -32768]
    assert downmix_s16_stereo(stereo + b"\x01").tolist() == [2000, 32767, -32768]


def test_webrtc_vad_hears_speechlike_noise_not_silence() -> None:
    vad = WebRtcVad(2)
    assert vad.is_speech(bytes(MONO_FRAME_BYTES)) is False
    assert vad.is_speech(b"\x00" * 10) is False  # malformed length is never speech


# ── segmenter ───────────────────────────────────────────────────────────


def make_seg(**kw: object) -> tuple[SpeakerSegmenter, Feeder]:
    seg = SpeakerSegmenter(7, MarkerVad(), VoiceSettings(**kw))  # type: ignore[arg-type]
    return seg, Feeder(seg)


def test_segment_keeps_preroll_and_ends_after_hangover() -> None:
    seg, f = make_seg()
    f.feed(15, voiced=False, tag0=1)  # tags 1..15
    f.feed(30, voiced=True, tag0=100)
    f.feed(34, voiced=False, tag0=200)
    assert f.out == []  # 680 ms of silence is still inside the 700 ms hangover
    f.feed(1, voiced=False, tag0=234)
    assert len(f.out) == 1
    s = f.out[0]
    tags = tags_of(s.pcm48)
    # 200 ms pre-roll = the last 10 silent frames before speech.
    assert tags[:10] == list(range(6, 16))
    assert tags[10:40] == [VOICED_LEVEL + t for t in range(100, 130)]
    # Only 200 ms of the trailing silence is kept.
    assert tags[40:] == list(range(200, 210))
    assert s.reason == "silence" and s.voiced_frames == 30 and s.speaker_id == 7
    assert s.started_at == pytest.approx(5 * 0.02)
    assert s.ended_at == pytest.approx((15 + 30 + 9) * 0.02)


def test_pause_shorter_than_hangover_does_not_split() -> None:
    seg, f = make_seg()
    f.feed(20, voiced=True)
    f.feed(30, voiced=False)  # 600 ms pause
    f.feed(20, voiced=True)
    f.feed(40, voiced=False)
    assert len(f.out) == 1 and f.out[0].voiced_frames == 40


def test_short_blip_is_dropped_and_300_ms_is_kept() -> None:
    seg, f = make_seg()
    f.feed(14, voiced=True)  # 280 ms of speech
    f.feed(40, voiced=False)
    assert f.out == [] and seg.dropped_short == 1
    f.feed(15, voiced=True)  # exactly 300 ms
    f.feed(40, voiced=False)
    assert len(f.out) == 1 and f.out[0].voiced_frames == 15


def test_long_turn_is_force_cut() -> None:
    seg, f = make_seg(max_utterance_s=1.0)
    f.feed(120, voiced=True, tag0=0)
    assert [s.reason for s in f.out] == ["max_length", "max_length"]
    assert [len(s.pcm48) for s in f.out] == [50 * 960, 50 * 960]
    assert seg.forced_cuts == 2
    rest = seg.flush()
    assert rest is not None and rest.reason == "flush" and len(rest.pcm48) == 20 * 960
    # No audio is duplicated or lost across the cuts.
    all_tags = tags_of(np.concatenate([s.pcm48 for s in [*f.out, rest]]))
    assert all_tags == [VOICED_LEVEL + t for t in range(120)]


def test_default_force_cut_is_20_seconds() -> None:
    seg, f = make_seg()
    f.feed(1001, voiced=True)
    assert len(f.out) == 1 and f.out[0].duration_s == pytest.approx(20.0)


def test_idle_flush_when_packets_stop() -> None:
    seg, f = make_seg()
    f.feed(30, voiced=True)
    last = f.t - 0.02
    assert seg.flush_idle(last + 0.59) is None  # still within the 600 ms gap
    s = seg.flush_idle(last + 0.6)
    assert s is not None and s.reason == "idle" and s.voiced_frames == 30
    assert seg.flush_idle(last + 5) is None  # nothing left


def test_packet_gap_inside_push_ends_previous_turn_and_clears_preroll() -> None:
    seg, f = make_seg()
    f.feed(5, voiced=False, tag0=1)
    f.feed(20, voiced=True, tag0=50)
    f.t += 1.0  # the client stopped sending for a second
    f.feed(3, voiced=False, tag0=300)
    assert len(f.out) == 1 and f.out[0].reason == "idle"
    f.feed(20, voiced=True, tag0=400)
    f.feed(40, voiced=False, tag0=500)
    second = f.out[1]
    # The new pre-roll only holds frames from after the gap.
    assert tags_of(second.pcm48)[:3] == [300, 301, 302]


def test_discard_forgets_buffered_audio() -> None:
    seg, f = make_seg()
    f.feed(30, voiced=True)
    seg.discard()
    assert seg.flush() is None and not seg.active


def test_settings_validate() -> None:
    with pytest.raises(ValueError):
        VoiceSettings(preroll_ms=-1)
    with pytest.raises(ValueError):
        VoiceSettings(vad_mode=4)
    with pytest.raises(ValueError):
        VoiceSettings(max_utterance_s=0.1)
    s = VoiceSettings()
    assert (s.preroll_frames, s.hangover_frames, s.max_frames, s.min_voiced_frames) == (
        10,
        35,
        1000,
        15,
    )


# ── ids ─────────────────────────────────────────────────────────────────


def test_synthetic_ids_unique_ordered_and_marked() -> None:
    gen = SyntheticIds()
    t0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    same_ms = [gen.next(t0) for _ in range(50)]
    later = [gen.next(t0 + timedelta(milliseconds=i)) for i in range(1, 50)]
    ids = same_ms + later
    assert len(set(ids)) == len(ids)
    assert all(i.isdigit() for i in ids)
    as_int = [int(i) for i in ids]
    assert as_int == sorted(as_int)
    assert all(is_synthetic_id(i) for i in ids)
    assert all(int(i) & SYNTHETIC_MARK == SYNTHETIC_MARK for i in ids)
    assert snowflake_time(ids[0]) == t0
    assert 2**62 > as_int[0] > 10**17  # snowflake-sized: 18-19 digits, positive int64


def test_synthetic_ids_sort_with_real_snowflakes_by_time() -> None:
    real = 175928847299117063  # Discord's documented example, 2016-04-30
    assert not is_synthetic_id(real)
    assert not is_synthetic_id("not-a-number")
    before = make_synthetic_id(snowflake_time(real) - timedelta(seconds=1))
    after = make_synthetic_id(snowflake_time(real) + timedelta(seconds=1))
    assert before < real < after


def test_synthetic_ids_roll_into_next_ms_when_increments_run_out() -> None:
    gen = SyntheticIds()
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    ids = [int(gen.next(t0)) for _ in range(4097)]
    assert len(set(ids)) == 4097 and ids == sorted(ids)
    assert snowflake_time(ids[-1]) == t0 + timedelta(milliseconds=1)


def test_synthetic_ids_are_thread_safe() -> None:
    gen = SyntheticIds()
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    out: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        mine = [gen.next(t0) for _ in range(300)]
        with lock:
            out.extend(mine)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(out)) == 1200


# ── pipeline (marker VAD, scripted transcriber) ─────────────────────────


class RecordingTranscriber:
    """Returns a caller-chosen text per utterance and records what it heard."""

    name = "recording"

    def __init__(self, text_for: object = None, delay: float = 0.0) -> None:
        self.heard: list[np.ndarray] = []
        self._text_for = text_for
        self.delay = delay

    async def transcribe(self, audio16k: np.ndarray) -> str:
        self.heard.append(audio16k)
        if self.delay:
            await asyncio.sleep(self.delay)
        if callable(self._text_for):
            return str(self._text_for(audio16k))
        return f"utterance {len(self.heard)}"


class VirtualClock:
    """Monotonic seconds that the feeding thread advances; read from any thread."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


WALL0 = datetime(2026, 11, 22, 20, 0, tzinfo=UTC)


def make_pipeline(
    transcriber: RecordingTranscriber,
    ingested: list[IncomingMessage],
    *,
    opted_out: set[int] | None = None,
    bots: set[int] | None = None,
    clock: VirtualClock | None = None,
    vad_factory: Any = MarkerVad,
    report_error: Any = None,
    **settings: object,
) -> VoiceIngestPipeline:
    async def ingest(msg: IncomingMessage) -> None:
        ingested.append(msg)

    return VoiceIngestPipeline(
        guild_id=1,
        channel_id=2,
        transcriber=transcriber,
        ingest=ingest,
        vad_factory=vad_factory,
        clock=clock or VirtualClock(),
        settings=VoiceSettings(**settings),  # type: ignore[arg-type]
        is_opted_out=lambda uid: uid in (opted_out or set()),
        resolve_name=lambda uid: f"user{uid}",
        is_bot=lambda uid: uid in (bots or set()),
        wall_clock=lambda: WALL0,
        report_error=report_error,
    )


def feed_turn(
    pipe: VoiceIngestPipeline,
    clock: VirtualClock,
    speakers: dict[int, tuple[int, int]],
    total: int,
) -> None:
    """Each speaker talks during frame range [start, end); all share one clock."""
    for i in range(total):
        for uid, (start, end) in speakers.items():
            if start <= i < end:
                pipe.feed_threadsafe(uid, stereo_frame(i % 100, voiced=True))
        clock.now += 0.02


async def test_pipeline_ingests_per_speaker_with_ordered_ids() -> None:
    clock = VirtualClock()
    stt = RecordingTranscriber()
    got: list[IncomingMessage] = []
    pipe = make_pipeline(stt, got, clock=clock)
    await pipe.start()
    worker = threading.Thread(target=feed_turn, args=(pipe, clock, {11: (0, 50), 22: (25, 90)}, 90))
    worker.start()
    await asyncio.to_thread(worker.join)
    await pipe.close()
    assert [m.author_id for m in got] == ["11", "22"]
    assert [m.author_name for m in got] == ["user11", "user22"]
    assert all(m.source == "voice" and m.channel_id == "2" and m.guild_id == "1" for m in got)
    assert got[0].created_at == "2026-11-22T20:00:00.000Z"
    assert got[1].created_at == "2026-11-22T20:00:00.500Z"
    assert int(got[0].id) < int(got[1].id)
    assert [round(len(a) / 16_000, 2) for a in stt.heard] == [1.0, 1.3]
    assert pipe.stats["ingested"] == 2 and pipe.stats["frames_processed"] == 115


async def test_opted_out_and_bot_audio_is_never_buffered() -> None:
    clock = VirtualClock()
    stt = RecordingTranscriber()
    got: list[IncomingMessage] = []
    pipe = make_pipeline(stt, got, clock=clock, opted_out={33}, bots={99})
    await pipe.start()
    feed_turn(pipe, clock, {11: (0, 40), 33: (0, 40), 99: (0, 40)}, 40)
    stats = pipe.stats
    assert stats["dropped_opted_out"] == 40 and stats["dropped_bot"] == 40
    assert stats["frames_in"] == 40  # only speaker 11 ever reached the inbox
    await pipe.close()
    assert [m.author_id for m in got] == ["11"] and len(stt.heard) == 1


async def test_opting_out_mid_utterance_discards_it() -> None:
    clock = VirtualClock()
    stt = RecordingTranscriber()
    got: list[IncomingMessage] = []
    opted: set[int] = set()
    pipe = make_pipeline(stt, got, clock=clock, opted_out=opted)
    await pipe.start()
    feed_turn(pipe, clock, {11: (0, 40)}, 40)
    await asyncio.sleep(0.05)  # let the frame task buffer it
    opted.add(11)
    pipe.forget_speaker(11)
    await pipe.close()
    assert got == [] and stt.heard == []


async def test_idle_task_ends_turn_when_packets_stop() -> None:
    clock = VirtualClock()
    stt = RecordingTranscriber()
    got: list[IncomingMessage] = []
    pipe = make_pipeline(stt, got, clock=clock, idle_check_s=0.01)
    await pipe.start()
    feed_turn(pipe, clock, {11: (0, 30)}, 30)
    await asyncio.sleep(0.05)
    assert got == []
    clock.now += 0.6
    assert await eventually(lambda: bool(got))
    assert len(got) == 1  # transcribed while the pipeline is still running
    await pipe.close()


async def test_full_inbox_drops_and_counts() -> None:
    clock = VirtualClock()
    stt = RecordingTranscriber()
    got: list[IncomingMessage] = []
    pipe = make_pipeline(stt, got, clock=clock, frame_queue_frames=10)
    await pipe.start()
    # The loop cannot run while this coroutine feeds, like a stalled loop.
    for i in range(25):
        pipe.feed_threadsafe(11, stereo_frame(i, voiced=True))
    assert pipe.stats["dropped_frames_queue_full"] == 15
    await pipe.close()


async def test_feed_before_start_and_after_close_is_dropped() -> None:
    stt = RecordingTranscriber()
    got: list[IncomingMessage] = []
    pipe = make_pipeline(stt, got)
    pipe.feed_threadsafe(11, stereo_frame(0, voiced=True))
    await pipe.start()
    await pipe.close()
    pipe.feed_threadsafe(11, stereo_frame(0, voiced=True))
    assert pipe.stats["dropped_not_running"] == 2


async def test_odd_sized_pcm_is_regrouped_into_20_ms_frames() -> None:
    clock = VirtualClock()
    stt = RecordingTranscriber()
    got: list[IncomingMessage] = []
    pipe = make_pipeline(stt, got, clock=clock)
    await pipe.start()
    ten_ms = stereo_frame(1, voiced=True)[: FRAME_BYTES // 2]
    for _ in range(40):
        pipe.feed_threadsafe(11, ten_ms)
    pipe.feed_threadsafe(11, b"\x01\x02\x03")  # not whole samples
    await pipe.close()
    assert pipe.stats["frames_processed"] == 20
    assert pipe.stats["dropped_bad_frames"] == 1


async def test_stt_failure_and_empty_text_do_not_stop_the_pipeline() -> None:
    clock = VirtualClock()
    calls = {"n": 0}

    def text_for(_audio: np.ndarray) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("provider down")
        return "" if calls["n"] == 2 else "third time lucky"

    stt = RecordingTranscriber(text_for)
    got: list[IncomingMessage] = []
    pipe = make_pipeline(stt, got, clock=clock)
    await pipe.start()
    feed_turn(pipe, clock, {11: (0, 20), 22: (40, 60), 33: (80, 100)}, 140)
    await pipe.close()
    assert [m.content for m in got] == ["third time lucky"]
    assert pipe.stats["stt_errors"] == 1 and pipe.stats["empty_transcripts"] == 1


async def test_stt_failures_are_logged_as_voice_errors_at_most_once_a_minute(
    make_memory: Any,
) -> None:
    mem = await make_memory(embeddings="none")
    clock = VirtualClock()

    def down(_audio: np.ndarray) -> str:
        raise RuntimeError("provider down")

    pipe = make_pipeline(
        RecordingTranscriber(down), [], clock=clock, report_error=voice_error_log(mem)
    )
    await pipe.start()
    feed_turn(pipe, clock, {11: (0, 20), 22: (40, 60)}, 100)
    assert await eventually(lambda: pipe.stats["stt_errors"] == 2)
    (row,) = await mem.admin.action_log(kind="voice_error")
    assert row.guild_id == "1" and "provider down" in row.message
    assert row.detail is not None and row.detail["stage"] == "stt"
    assert (row.detail["channel_id"], row.detail["errors"]) == ("2", 1)
    clock.now += 61
    feed_turn(pipe, clock, {33: (0, 20)}, 40)
    await pipe.close()
    assert pipe.stats["stt_errors"] == 3
    newest = (await mem.admin.action_log(kind="voice_error"))[0]
    assert newest.id != row.id and newest.detail is not None
    assert newest.detail["errors"] == 2  # the one held back, and this one


# ── STT: OpenAI-compatible endpoint through the real client ─────────────


def test_encode_wav_is_16k_mono_pcm() -> None:
    wav = encode_wav(np.zeros(1600, dtype=np.float32))
    with wave.open(io.BytesIO(wav)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()) == (
            16_000,
            1,
            2,
            1600,
        )


async def test_openai_transcriber_sends_wav_and_bounds_concurrency(fake_openai) -> None:  # type: ignore[no-untyped-def]
    seen: list[bytes] = []

    def handler(audio: bytes, form: dict) -> str:  # type: ignore[type-arg]
        seen.append(audio)
        return " I work as a nurse. "

    fake_openai.transcription_handler = handler
    fake_openai.latency_s = 0.05
    stt = OpenAITranscriber(fake_openai.client(), language="en", max_concurrency=2)
    audio = sine(300, 0.5, 16_000).astype(np.float32)
    texts = await asyncio.gather(*(stt.transcribe(audio) for _ in range(5)))
    assert texts == ["I work as a nurse."] * 5
    reqs = fake_openai.transcription_requests()
    assert len(reqs) == 5 and fake_openai.max_in_flight <= 2
    form = reqs[0].body
    assert form["model"] == "gpt-4o-mini-transcribe"
    assert form["language"] == "en" and form["response_format"] == "json"
    assert form["file"]["content_type"] == "audio/wav"
    with wave.open(io.BytesIO(seen[0])) as w:
        assert (w.getframerate(), w.getnchannels(), w.getnframes()) == (16_000, 1, 8000)
    assert await stt.transcribe(np.zeros(0, dtype=np.float32)) == ""
    assert len(fake_openai.transcription_requests()) == 5  # empty audio never sent


async def test_a_failing_frame_does_not_stop_segmentation() -> None:
    class FlakyVad(MarkerVad):
        def is_speech(self, frame: bytes) -> bool:
            if self.calls == 3:
                self.calls += 1
                raise RuntimeError("vad exploded")
            return super().is_speech(frame)

    clock = VirtualClock()
    stt = RecordingTranscriber()
    got: list[IncomingMessage] = []
    pipe = make_pipeline(stt, got, clock=clock, vad_factory=FlakyVad)
    await pipe.start()
    feed_turn(pipe, clock, {11: (0, 40)}, 40)
    await pipe.close()
    assert pipe.stats["frame_errors"] == 1
    assert [m.author_id for m in got] == ["11"]
