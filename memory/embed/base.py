"""What an embedder is and how one is chosen: the ``Embedder`` protocol, the
text a fact is embedded as, model resolution, ``make_embedder``, and the
float32 blob format vectors are stored in.

Every embedder returns float32 rows of unit length, so a dot product is the
cosine similarity and sqlite-vec's distances mean the same for every provider.
``Embedder.model`` is the stable id stored next to each vector; vectors of
different ids are never compared. The providers are the bundled ONNX MiniLM
(``memory.embed.local``, English), the bundled multilingual e5
(``memory.embed.e5``) and any OpenAI-compatible API (``memory.embed.remote``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from memory.config import EmbeddingConfig
from memory.embed.e5 import E5_MODEL_ID, E5_SIMILARITY_FLOOR, MultilingualE5Embedder
from memory.embed.local import LOCAL_MODEL_ID, LocalMiniLMEmbedder
from memory.embed.remote import OPENAI_DEFAULT_MODEL, OpenAIEmbedder
from memory.errors import ConfigError, EmbeddingError

if TYPE_CHECKING:
    from openai import AsyncOpenAI


# The models that ship inside installed packages and run without a provider.
BUNDLED_MODELS = (LOCAL_MODEL_ID, E5_MODEL_ID)
# The cosine a model gives unrelated texts, for models whose cosines crowd
# near 1 (see memory.embed.e5); retrieval rescales it to 0.
_SIMILARITY_FLOORS = {E5_MODEL_ID: E5_SIMILARITY_FLOOR}


def similarity_floor(model: str) -> float:
    """The cosine ``model`` gives unrelated texts: 0 for most models."""
    return _SIMILARITY_FLOORS.get(model, 0.0)


def rescale_similarity(cosine: float, floor: float) -> float:
    """``cosine`` on a scale where ``floor`` is 0 and 1 stays 1."""
    return (cosine - floor) / (1.0 - floor) if floor else cosine


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


def fact_embedding_text(fact_type: str, fact: str, evidence: str | None) -> str:
    """The text a fact is embedded as: its type, the fact and, when there is
    one, the evidence, a line each (blank evidence is left out like None)."""
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

    The model id picks the implementation: a bundled id runs that bundled
    model, anything else goes to the OpenAI-compatible ``client``. That lets a
    guild's resolved model (``dataclasses.replace(cfg, model=...)``) override
    the process-wide provider.
    """
    if cfg.provider == "none":
        return None
    model = (cfg.model or "").strip() or provider_default_model(cfg.provider)
    if model == LOCAL_MODEL_ID:
        return LocalMiniLMEmbedder(threads=cfg.threads, batch_size=cfg.batch_size)
    if model == E5_MODEL_ID:
        return MultilingualE5Embedder(threads=cfg.threads)
    if model.startswith("local:"):
        raise ConfigError(
            f"unknown local embedding model {model!r}; these ship: {', '.join(BUNDLED_MODELS)}"
        )
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


def content_hash(text: str) -> str:
    """What a stored vector was made from: a vector is re-made only when it changes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
