"""Per-speaker endpointing: turns a stream of 20 ms frames into utterances.

Rules (all from ``VoiceSettings``):

* pre-roll: the frames just before the first voiced frame are kept, so the
  onset of the first word (which VAD flags late) is not clipped;
* end after ``hangover_ms`` of consecutive non-speech, keeping only
  ``tail_keep_ms`` of it;
* end when packets stop for ``idle_gap_ms`` — Discord clients stop sending
  when a user stops talking, so live this is the usual end of a turn;
* force a cut at ``max_utterance_s`` so one monologue cannot hold an
  unbounded buffer or a single enormous STT request;
* drop utterances with less than ``min_voiced_ms`` of speech (coughs,
  clicks, keyboard blips), which STT models love to hallucinate on.

The clock is the caller's: ``now`` is passed in, so tests are exact.
"""

from __future__ import annotations

import logging
from collections import deque

import numpy as np

from bot.voice.types import MONO_FRAME_BYTES, Segment, VoiceSettings
from bot.voice.vad import FrameVad

log = logging.getLogger(__name__)


class SpeakerSegmenter:
    def __init__(self, speaker_id: int, vad: FrameVad, settings: VoiceSettings) -> None:
        self.speaker_id = speaker_id
        self._vad = vad
        self._settings = settings
        self._preroll: deque[tuple[bytes, float]] = deque(maxlen=max(1, settings.preroll_frames))
        self._frames: list[bytes] = []
        self._times: list[float] = []
        self._voiced = 0
        self._trailing = 0
        self._last_arrival: float | None = None
        self.segments = 0
        self.dropped_short = 0
        self.forced_cuts = 0

    @property
    def active(self) -> bool:
        return bool(self._frames)

    @property
    def last_arrival(self) -> float | None:
        return self._last_arrival

    def push(self, frame: bytes, now: float) -> list[Segment]:
        """Feed one 20 ms mono frame that arrived at ``now``; returns finished segments."""
        if len(frame) != MONO_FRAME_BYTES:
            raise ValueError(f"expected {MONO_FRAME_BYTES} bytes, got {len(frame)}")
        out: list[Segment] = []
        if self._last_arrival is not None and self._gap_elapsed(now):
            # The speaker went quiet (no packets) and came back: whatever was
            # buffered belongs to the previous turn, including the pre-roll.
            seg = self._finish("idle")
            if seg is not None:
                out.append(seg)
            self._preroll.clear()
        self._last_arrival = now
        voiced = self._vad.is_speech(frame)

        if not self._frames:
            if not voiced:
                if self._settings.preroll_frames:
                    self._preroll.append((frame, now))
                return out
            self._frames = [f for f, _ in self._preroll] + [frame]
            self._times = [t for _, t in self._preroll] + [now]
            self._preroll.clear()
            self._voiced = 1
            self._trailing = 0
        else:
            self._frames.append(frame)
            self._times.append(now)
            if voiced:
                self._voiced += 1
                self._trailing = 0
            else:
                self._trailing += 1

        if self._trailing >= self._settings.hangover_frames:
            seg = self._finish("silence")
        elif len(self._frames) >= self._settings.max_frames:
            self.forced_cuts += 1
            seg = self._finish("max_length")
        else:
            seg = None
        if seg is not None:
            out.append(seg)
        return out

    def flush_idle(self, now: float) -> Segment | None:
        """End the current utterance if no packet arrived for ``idle_gap_ms``."""
        if self._last_arrival is None or not self._gap_elapsed(now):
            return None
        self._preroll.clear()
        return self._finish("idle") if self._frames else None

    def flush(self) -> Segment | None:
        """End whatever is buffered (shutdown); still applies the short-blip rule."""
        self._preroll.clear()
        return self._finish("flush") if self._frames else None

    def discard(self) -> None:
        """Forget all buffered audio without emitting it (speaker opted out)."""
        self._frames = []
        self._times = []
        self._preroll.clear()
        self._voiced = 0
        self._trailing = 0

    def _gap_elapsed(self, now: float) -> bool:
        assert self._last_arrival is not None
        return (now - self._last_arrival) * 1000 >= self._settings.idle_gap_ms

    def _finish(self, reason: str) -> Segment | None:
        frames, times = self._frames, self._times
        voiced, trailing = self._voiced, self._trailing
        self._frames, self._times = [], []
        self._voiced = self._trailing = 0
        if not frames:
            return None
        if voiced < self._settings.min_voiced_frames:
            self.dropped_short += 1
            log.debug(
                "speaker %s: dropped %d-frame blip with %d voiced frames",
                self.speaker_id,
                len(frames),
                voiced,
            )
            return None
        # Trim trailing non-speech beyond the kept tail; the trailing count is
        # exact because it resets on every voiced frame.
        excess = trailing - self._settings.tail_keep_frames
        if excess > 0:
            frames = frames[:-excess]
            times = times[:-excess]
        self.segments += 1
        pcm = np.frombuffer(b"".join(frames), dtype="<i2").astype(np.int16)
        return Segment(
            speaker_id=self.speaker_id,
            pcm48=pcm,
            started_at=times[0],
            ended_at=times[-1],
            voiced_frames=voiced,
            reason=reason,
        )
