"""Frame-level voice-activity detection behind one small protocol."""

from __future__ import annotations

from typing import Protocol

from bot.voice.types import MONO_FRAME_BYTES, SAMPLE_RATE


class FrameVad(Protocol):
    """Decides speech / non-speech for one 20 ms, 48 kHz, s16le mono frame."""

    def is_speech(self, frame: bytes) -> bool: ...


class WebRtcVad:
    """webrtcvad (the ``webrtcvad-wheels`` build) on Discord's native frames.

    webrtcvad accepts 48 kHz and 20 ms directly, so no resampling happens
    per frame. One instance per speaker:
    the detector keeps state between frames.
    """

    def __init__(self, mode: int = 2) -> None:
        import webrtcvad  # local: keeps `import bot.voice` free of native loads

        if not 0 <= mode <= 3:
            raise ValueError("webrtcvad mode must be 0..3")
        self._vad = webrtcvad.Vad(mode)
        self.mode = mode

    def is_speech(self, frame: bytes) -> bool:
        if len(frame) != MONO_FRAME_BYTES:
            # webrtcvad raises on odd lengths; a malformed frame is not speech.
            return False
        return bool(self._vad.is_speech(frame, SAMPLE_RATE))
