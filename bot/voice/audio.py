"""PCM helpers with numpy only: stereo downmix and 48 kHz → 16 kHz."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from bot.voice.types import SAMPLE_RATE, STT_RATE

_DECIMATION = SAMPLE_RATE // STT_RATE  # 3
_TAPS = 63


def downmix_s16_stereo(pcm: bytes) -> np.ndarray:
    """Interleaved s16le stereo → int16 mono (mean of both channels).

    A trailing odd sample (never produced by Opus) is ignored rather than
    raising, because this runs on untrusted network input.
    """
    usable = len(pcm) - len(pcm) % 4
    stereo = np.frombuffer(pcm[:usable], dtype="<i2").reshape(-1, 2)
    # Sum in int32 so two full-scale channels do not wrap around.
    return (stereo.astype(np.int32).sum(axis=1) // 2).astype(np.int16)


@lru_cache(maxsize=1)
def _lowpass() -> np.ndarray:
    """Windowed-sinc anti-alias filter for decimation by 3.

    Cut-off at 7.2 kHz (0.9 × the new Nyquist) with a Blackman window:
    ~-70 dB stop band, flat where speech energy is, unity gain at DC.
    """
    cutoff = 0.9 * (STT_RATE / 2) / SAMPLE_RATE  # cycles per input sample
    n = np.arange(_TAPS) - (_TAPS - 1) / 2
    taps = 2 * cutoff * np.sinc(2 * cutoff * n) * np.blackman(_TAPS)
    taps /= taps.sum()
    taps.setflags(write=False)
    return taps


def mono48_to_16k(mono48: np.ndarray) -> np.ndarray:
    """int16 (or float) mono at 48 kHz → float32 mono at 16 kHz in [-1, 1]."""
    x = np.asarray(mono48)
    if x.dtype == np.int16:
        x = x.astype(np.float32) / 32768.0
    else:
        x = x.astype(np.float32, copy=False)
    if x.size == 0:
        return np.zeros(0, dtype=np.float32)
    filtered = np.convolve(x, _lowpass(), mode="same")
    out = filtered[::_DECIMATION].astype(np.float32)
    np.clip(out, -1.0, 1.0, out=out)
    return out
