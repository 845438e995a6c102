"""From ``(speaker_id, 20 ms PCM)`` to ``IncomingMessage`` — no discord imports.

Threads and queues::

    receive thread ── feed_threadsafe ──► inbox (bounded deque, drops counted)
    event loop ─ frame task: downmix → per-speaker VAD segmenter ─► utterance queue (bounded)
               ─ idle task: ends turns whose packets stopped
               ─ STT workers: resample (thread) → transcriber (off-loop) → ingest(IncomingMessage)

Failures of transcription and ingest are counted in ``stats`` and reported
through ``report_error`` (the bot writes them to the action log as
``voice_error``), at most once a minute per stage with the count since the
last report, so a dead endpoint cannot flood the log.

Privacy: a speaker who opted out is dropped in ``feed_threadsafe`` before a
single byte of their audio is queued, and re-checked before transcription
and before ingest, so an opt-out during an utterance discards it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from bot.voice.audio import downmix_s16_stereo, mono48_to_16k
from bot.voice.ids import SyntheticIds
from bot.voice.segmenter import SpeakerSegmenter
from bot.voice.stt import Transcriber
from bot.voice.types import FRAME_BYTES, Segment, VoiceSettings
from bot.voice.vad import FrameVad, WebRtcVad
from memory import Clock, IncomingMessage, Throttle, iso, system_clock

log = logging.getLogger(__name__)

IngestFn = Callable[[IncomingMessage], Awaitable[object]]
# Told of each transcript once it is ingested (the bot answers the ones naming it).
TranscriptListener = Callable[[IncomingMessage], None]
MonotonicClock = Callable[[], float]
# (guild id, message, detail); detail holds "stage" and "channel_id" at least.
VoiceErrorReport = Callable[[int, str, dict[str, Any]], Awaitable[object]]

ERROR_REPORT_INTERVAL_S = 60.0

# A speaker silent this long has probably left; their segmenter (and VAD
# state) is released so a long session does not accumulate them.
_SPEAKER_EXPIRY_S = 300.0


class VoiceIngestPipeline:
    def __init__(
        self,
        guild_id: int,
        channel_id: int,
        transcriber: Transcriber,
        ingest: IngestFn,
        vad_factory: Callable[[], FrameVad] | None = None,
        clock: MonotonicClock = time.monotonic,
        settings: VoiceSettings | None = None,
        is_opted_out: Callable[[int], bool] | None = None,
        *,
        resolve_name: Callable[[int], str] | None = None,
        is_bot: Callable[[int], bool] | None = None,
        wall_clock: Clock = system_clock,
        ids: SyntheticIds | None = None,
        report_error: VoiceErrorReport | None = None,
        on_transcript: TranscriptListener | None = None,
    ) -> None:
        self.guild_id = guild_id
        self.channel_id = channel_id
        self.settings = settings or VoiceSettings()
        self._transcriber = transcriber
        self._ingest = ingest
        mode = self.settings.vad_mode
        self._vad_factory: Callable[[], FrameVad] = vad_factory or (lambda: WebRtcVad(mode))
        self._clock = clock
        self._wall_clock = wall_clock
        self._is_opted_out = is_opted_out or (lambda _uid: False)
        self._is_bot = is_bot or (lambda _uid: False)
        self._resolve_name = resolve_name or str
        self._ids = ids or SyntheticIds()
        self._report_error = report_error
        self._on_transcript = on_transcript
        self._error_throttle = Throttle(ERROR_REPORT_INTERVAL_S, clock)

        self._lock = threading.Lock()
        self._inbox: deque[tuple[int, float, bytes]] = deque()
        self._wake_pending = False
        self._accepting = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._utterances: asyncio.Queue[Segment | None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._workers: list[asyncio.Task[None]] = []
        self._frame_task: asyncio.Task[None] | None = None
        self._closed = False

        self._segmenters: dict[int, SpeakerSegmenter] = {}
        self._carry: dict[int, bytes] = {}
        self._mono0 = 0.0
        self._wall0: datetime | None = None
        self._last_ingested_at: str | None = None
        self._counters: dict[str, int] = {
            "frames_in": 0,
            "frames_processed": 0,
            "dropped_frames_queue_full": 0,
            "dropped_opted_out": 0,
            "dropped_bot": 0,
            "dropped_not_running": 0,
            "dropped_bad_frames": 0,
            "frame_errors": 0,
            "segments": 0,
            "dropped_short": 0,
            "forced_cuts": 0,
            "dropped_utterances_queue_full": 0,
            "discarded_opted_out_utterances": 0,
            "transcribed": 0,
            "empty_transcripts": 0,
            "stt_errors": 0,
            "ingested": 0,
            "ingest_errors": 0,
        }

    # ── receive side (any thread) ────────────────────────────────────────

    def feed_threadsafe(self, speaker_id: int, pcm: bytes) -> None:
        """Hand over decoded 48 kHz stereo s16le PCM (normally 20 ms) of one speaker.

        Called from voice-recv's router thread; never blocks and never raises,
        because an exception there stops receiving for everyone.
        """
        try:
            self._feed(speaker_id, pcm)
        except Exception:
            log.exception("voice pipeline %s: feed failed", self.channel_id)

    def _feed(self, speaker_id: int, pcm: bytes) -> None:
        if not self._accepting:
            self._count("dropped_not_running")
            return
        if self._is_bot(speaker_id):
            self._count("dropped_bot")
            return
        if self._opted_out(speaker_id):
            self._count("dropped_opted_out")
            return
        now = self._clock()
        schedule = False
        with self._lock:
            if len(self._inbox) >= self.settings.frame_queue_frames:
                self._counters["dropped_frames_queue_full"] += 1
                return
            self._inbox.append((speaker_id, now, bytes(pcm)))
            self._counters["frames_in"] += 1
            if not self._wake_pending:
                self._wake_pending = schedule = True
        if schedule and self._loop is not None and self._wake is not None:
            try:
                self._loop.call_soon_threadsafe(self._wake.set)
            except RuntimeError:  # loop closed during shutdown
                self._count("dropped_not_running")

    def _opted_out(self, speaker_id: int) -> bool:
        try:
            return bool(self._is_opted_out(speaker_id))
        except Exception:
            # If consent cannot be checked, do not record: fail closed.
            log.exception("opt-out check failed for %s; dropping audio", speaker_id)
            return True

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counters[name] += n

    # ── lifecycle (event loop) ───────────────────────────────────────────

    async def start(self) -> None:
        if self._loop is not None:
            return
        if self._closed:
            raise RuntimeError("pipeline already closed")
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._utterances = asyncio.Queue(maxsize=self.settings.utterance_queue)
        # Map the monotonic clock to UTC once: timestamps then stay ordered
        # even if the wall clock is stepped during the session.
        self._mono0 = self._clock()
        self._wall0 = self._wall_clock()
        self._frame_task = asyncio.create_task(
            self._frame_loop(), name=f"voice-frames-{self.channel_id}"
        )
        self._tasks = [asyncio.create_task(self._idle_loop(), name=f"voice-idle-{self.channel_id}")]
        self._workers = [
            asyncio.create_task(self._stt_worker(), name=f"voice-stt-{self.channel_id}-{i}")
            for i in range(self.settings.stt_workers)
        ]
        self._accepting = True
        log.info("voice pipeline started: guild %s channel %s", self.guild_id, self.channel_id)

    async def close(self) -> None:
        """Stop accepting audio, finish every buffered utterance, await STT and ingest."""
        if self._closed:
            return
        self._closed = True
        self._accepting = False
        if self._loop is None:
            return
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._frame_task is not None:
            assert self._wake is not None
            self._wake.set()
            await self._frame_task
        for seg in list(self._segmenters.values()):
            self._emit(seg.flush())
        assert self._utterances is not None
        for _ in self._workers:
            await self._utterances.put(None)
        await asyncio.gather(*self._workers, return_exceptions=True)
        log.info("voice pipeline closed: %s", self.stats)

    def forget_speaker(self, speaker_id: int) -> None:
        """Drop everything buffered for a speaker (they opted out mid-session)."""
        with self._lock:
            kept = [item for item in self._inbox if item[0] != speaker_id]
            self._inbox.clear()
            self._inbox.extend(kept)
        seg = self._segmenters.get(speaker_id)
        if seg is not None:
            seg.discard()
            self._retire(speaker_id, seg)
        self._carry.pop(speaker_id, None)

    @property
    def running(self) -> bool:
        return self._accepting

    @property
    def stats(self) -> dict[str, Any]:
        with self._lock:
            out: dict[str, Any] = dict(self._counters)
            out["inbox"] = len(self._inbox)
        for seg in self._segmenters.values():
            out["segments"] += seg.segments
            out["dropped_short"] += seg.dropped_short
            out["forced_cuts"] += seg.forced_cuts
        out["utterance_queue"] = self._utterances.qsize() if self._utterances else 0
        out["speakers"] = len(self._segmenters)
        out["running"] = self._accepting
        out["transcriber"] = getattr(self._transcriber, "name", type(self._transcriber).__name__)
        out["last_ingested_at"] = self._last_ingested_at
        return out

    # ── segmentation (event loop) ────────────────────────────────────────

    async def _frame_loop(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            with self._lock:
                batch = list(self._inbox)
                self._inbox.clear()
                self._wake_pending = False
            for speaker_id, arrived, pcm in batch:
                try:
                    self._process_frame(speaker_id, arrived, pcm)
                except Exception:
                    # One bad frame must not end transcription for the channel.
                    self._count("frame_errors")
                    log.exception(
                        "voice channel %s: frame of %s failed", self.channel_id, speaker_id
                    )
            if not self._accepting:
                with self._lock:
                    if not self._inbox:
                        return
            # Yield between batches so a flood of frames cannot starve the loop.
            await asyncio.sleep(0)

    def _process_frame(self, speaker_id: int, arrived: float, pcm: bytes) -> None:
        if self._opted_out(speaker_id):
            self._count("dropped_opted_out")
            return
        data = self._carry.pop(speaker_id, b"") + pcm
        usable = len(data) - len(data) % FRAME_BYTES
        rest = data[usable:]
        if rest:
            if len(rest) % 4:
                # Not whole stereo samples: corrupt, and it would misalign
                # every later frame of this speaker.
                self._count("dropped_bad_frames")
            else:
                # Opus may decode 10/40/60 ms packets; keep the remainder so
                # the VAD always sees whole 20 ms frames.
                self._carry[speaker_id] = rest
        seg = self._segmenters.get(speaker_id)
        if seg is None:
            seg = self._segmenters[speaker_id] = SpeakerSegmenter(
                speaker_id, self._vad_factory(), self.settings
            )
        for off in range(0, usable, FRAME_BYTES):
            mono = downmix_s16_stereo(data[off : off + FRAME_BYTES]).tobytes()
            self._count("frames_processed")
            for done in seg.push(mono, arrived):
                self._emit(done)

    async def _idle_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.idle_check_s)
            now = self._clock()
            for speaker_id, seg in list(self._segmenters.items()):
                try:
                    self._emit(seg.flush_idle(now))
                except Exception:
                    self._count("frame_errors")
                    log.exception("voice channel %s: idle flush failed", self.channel_id)
                last = seg.last_arrival
                if not seg.active and last is not None and now - last > _SPEAKER_EXPIRY_S:
                    self._retire(speaker_id, seg)

    def _retire(self, speaker_id: int, seg: SpeakerSegmenter) -> None:
        self._count("segments", seg.segments)
        self._count("dropped_short", seg.dropped_short)
        self._count("forced_cuts", seg.forced_cuts)
        del self._segmenters[speaker_id]
        self._carry.pop(speaker_id, None)

    def _emit(self, segment: Segment | None) -> None:
        if segment is None:
            return
        if self._opted_out(segment.speaker_id):
            self._count("discarded_opted_out_utterances")
            return
        assert self._utterances is not None
        try:
            self._utterances.put_nowait(segment)
        except asyncio.QueueFull:
            self._count("dropped_utterances_queue_full")
            log.warning(
                "voice channel %s: STT backlog full, dropped a %.1f s utterance of %s",
                self.channel_id,
                segment.duration_s,
                segment.speaker_id,
            )

    # ── transcription and ingest (event loop, work off-loop) ─────────────

    async def _stt_worker(self) -> None:
        assert self._utterances is not None
        while True:
            segment = await self._utterances.get()
            if segment is None:
                return
            try:
                await self._transcribe_and_ingest(segment)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("voice channel %s: utterance failed", self.channel_id)

    async def _transcribe_and_ingest(self, segment: Segment) -> None:
        if self._opted_out(segment.speaker_id):
            self._count("discarded_opted_out_utterances")
            return
        audio16k = await asyncio.to_thread(mono48_to_16k, segment.pcm48)
        try:
            text = await asyncio.wait_for(
                self._transcriber.transcribe(audio16k), timeout=self.settings.stt_timeout_s
            )
        except Exception as exc:
            self._count("stt_errors")
            log.exception(
                "voice channel %s: transcription of %.1f s failed",
                self.channel_id,
                segment.duration_s,
            )
            await self._report("stt", f"transcription of {segment.duration_s:.1f} s failed", exc)
            return
        self._count("transcribed")
        text = (text or "").strip()
        if not text:
            self._count("empty_transcripts")
            return
        if self._opted_out(segment.speaker_id):  # opted out while we transcribed
            self._count("discarded_opted_out_utterances")
            return
        message = self._message(segment, text)
        try:
            await self._ingest(message)
        except Exception as exc:
            self._count("ingest_errors")
            log.exception("voice channel %s: ingest failed", self.channel_id)
            await self._report("ingest", "ingest of a transcript failed", exc)
            return
        self._count("ingested")
        self._last_ingested_at = message.created_at
        if self._on_transcript is not None:
            try:
                self._on_transcript(message)
            except Exception:  # a listener must not stop transcription
                log.exception("voice channel %s: transcript listener failed", self.channel_id)

    async def _report(self, stage: str, what: str, exc: BaseException) -> None:
        if self._report_error is None:
            return
        held = self._error_throttle.admit(stage)
        if held is None:
            return
        detail = {
            "stage": stage,
            "channel_id": str(self.channel_id),
            "error": type(exc).__name__,
            "errors": held + 1,
        }
        try:
            await self._report_error(self.guild_id, f"{what}: {exc}", detail)
        except Exception:  # reporting must not stop transcription
            log.exception("voice channel %s: could not report an error", self.channel_id)

    def _message(self, segment: Segment, text: str) -> IncomingMessage:
        assert self._wall0 is not None
        started = self._wall0 + timedelta(seconds=segment.started_at - self._mono0)
        try:
            name = self._resolve_name(segment.speaker_id) or str(segment.speaker_id)
        except Exception:
            log.exception("could not resolve the name of %s", segment.speaker_id)
            name = str(segment.speaker_id)
        return IncomingMessage(
            id=self._ids.next(started),
            guild_id=str(self.guild_id),
            channel_id=str(self.channel_id),
            author_id=str(segment.speaker_id),
            author_name=name,
            content=text,
            created_at=iso(started),
            source="voice",
            is_bot=False,
        )
