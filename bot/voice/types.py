"""Constants, settings and value types shared by the voice pipeline.

Nothing here imports discord: everything behind the adapter sees only
``(speaker_id, 20 ms of 48 kHz stereo s16le PCM)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Discord voice: Opus at 48 kHz, 2 channels, 20 ms frames, decoded to s16le.
SAMPLE_RATE = 48_000
CHANNELS = 2
SAMPLE_WIDTH = 2
FRAME_MS = 20
FRAME_SAMPLES = SAMPLE_RATE * FRAME_MS // 1000  # 960 per channel
FRAME_BYTES = FRAME_SAMPLES * CHANNELS * SAMPLE_WIDTH  # 3840
MONO_FRAME_BYTES = FRAME_SAMPLES * SAMPLE_WIDTH  # 1920
STT_RATE = 16_000


@dataclass(frozen=True)
class VoiceSettings:
    """Endpointing, queue and transcription limits.

    The endpointing defaults follow from how Discord sends audio:
    Discord clients stop sending packets when a user stops talking, so the
    packet-gap timer (``idle_gap_ms``) is the main end-of-turn signal live,
    and the VAD hangover catches pauses inside a continuous stream.
    """

    preroll_ms: int = 200
    hangover_ms: int = 700
    max_utterance_s: float = 20.0
    min_voiced_ms: int = 300
    idle_gap_ms: int = 600
    # Trailing non-speech kept after the last voiced frame: enough for the
    # last phoneme's decay, not so much that STT models hallucinate on it.
    tail_keep_ms: int = 200
    vad_mode: int = 2
    # ~60 s of one speaker; a stalled loop drops audio instead of growing RAM.
    frame_queue_frames: int = 3000
    utterance_queue: int = 32
    stt_workers: int = 1
    stt_timeout_s: float = 120.0
    idle_check_s: float = 0.1

    def __post_init__(self) -> None:
        for name in ("preroll_ms", "hangover_ms", "min_voiced_ms", "idle_gap_ms", "tail_keep_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.max_utterance_s * 1000 < max(self.min_voiced_ms, FRAME_MS):
            raise ValueError("max_utterance_s must exceed min_voiced_ms")
        if not 0 <= self.vad_mode <= 3:
            raise ValueError("vad_mode must be 0..3")
        for name in ("frame_queue_frames", "utterance_queue", "stt_workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.stt_timeout_s <= 0 or self.idle_check_s <= 0:
            raise ValueError("timeouts must be positive")

    @staticmethod
    def frames(ms: float) -> int:
        """Whole 20 ms frames in ``ms`` milliseconds (rounded up)."""
        return max(0, -(-int(round(ms)) // FRAME_MS))

    @property
    def preroll_frames(self) -> int:
        return self.frames(self.preroll_ms)

    @property
    def hangover_frames(self) -> int:
        return max(1, self.frames(self.hangover_ms))

    @property
    def max_frames(self) -> int:
        return max(1, self.frames(self.max_utterance_s * 1000))

    @property
    def min_voiced_frames(self) -> int:
        return self.frames(self.min_voiced_ms)

    @property
    def tail_keep_frames(self) -> int:
        return self.frames(self.tail_keep_ms)


@dataclass(frozen=True)
class Segment:
    """One speaker's utterance as the segmenter cut it, still at 48 kHz mono.

    ``started_at``/``ended_at`` are on the pipeline's monotonic clock: the
    arrival time of the first and last frame.
    """

    speaker_id: int
    pcm48: np.ndarray = field(repr=False)  # int16 mono
    started_at: float
    ended_at: float
    voiced_frames: int
    reason: str  # "silence" | "idle" | "max_length" | "flush"

    @property
    def duration_s(self) -> float:
        return len(self.pcm48) / SAMPLE_RATE


@dataclass(frozen=True)
class Utterance:
    """A segment ready for speech-to-text, resampled to 16 kHz float32."""

    guild_id: int
    channel_id: int
    speaker_id: int
    audio16k: np.ndarray = field(repr=False)
    started_at: float
    ended_at: float

    @property
    def duration_s(self) -> float:
        return len(self.audio16k) / STT_RATE
