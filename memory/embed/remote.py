"""The OpenAI-compatible embedding provider (``OpenAIEmbedder``).

``memory.embed.base.make_embedder`` picks this provider for any model id that
is not the bundled local one. The client is an ``AsyncOpenAI`` owned and closed by the caller, so
this module works against OpenAI itself or any server speaking its API.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from memory.embed.rows import check_texts, empty_rows, normalise_rows
from memory.errors import ConfigError, EmbeddingError

if TYPE_CHECKING:
    from openai import AsyncOpenAI

OPENAI_DEFAULT_MODEL = "text-embedding-3-small"

# Native widths of OpenAI's embedding models, so ``dims`` is known up front.
_OPENAI_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedder:
    """Embeddings through an ``AsyncOpenAI`` client the caller owns and closes.

    ``model`` is the API model name, with ``@<dims>`` appended when a reduced
    width is requested, because those vectors live in a different space.
    Without ``dims``, ``dims`` starts as OpenAI's native width for known model
    names (0 for others) and the first successful answer settles it: an
    OpenAI-compatible server may serve any model under any name.
    """

    def __init__(
        self,
        client: AsyncOpenAI,
        model: str = OPENAI_DEFAULT_MODEL,
        dims: int | None = None,
        *,
        batch_size: int = 256,
    ) -> None:
        if dims is not None and dims < 1:
            raise ConfigError(f"embedding dims must be positive, got {dims}")
        self._client = client
        self.api_model = model
        self.requested_dims = dims
        self.model = model if dims is None else f"{model}@{dims}"
        self.dims = dims if dims is not None else _OPENAI_DIMS.get(model, 0)
        self._dims_settled = dims is not None
        # The API caps one request at 2048 inputs; smaller batches keep each
        # request well under its total-token limit too.
        self.batch_size = max(1, min(batch_size, 2048))

    async def _embed_batch(self, batch: list[str]) -> np.ndarray:
        import openai

        # The API rejects empty strings; a space embeds as "nothing said".
        payload = [t if t.strip() else " " for t in batch]
        try:
            resp = await self._client.embeddings.create(
                model=self.api_model,
                input=payload,
                dimensions=openai.omit if self.requested_dims is None else self.requested_dims,
                # Explicit "float": the client otherwise asks for base64,
                # which some OpenAI-compatible servers do not speak.
                encoding_format="float",
            )
        # A non-JSON body surfaces from the client as a bare JSONDecodeError.
        except (openai.OpenAIError, ValueError) as exc:
            raise EmbeddingError(f"embedding request to {self.api_model!r} failed: {exc}") from exc
        try:
            rows = sorted(resp.data, key=lambda d: d.index)
            if len(rows) != len(batch):
                raise EmbeddingError(f"asked for {len(batch)} embeddings, got {len(rows)}")
            matrix = np.array([r.embedding for r in rows], dtype=np.float32)
        except (AttributeError, TypeError, ValueError) as exc:
            raise EmbeddingError(f"malformed embedding response: {exc}") from exc
        if matrix.ndim != 2 or matrix.shape[1] == 0:
            raise EmbeddingError(f"malformed embedding response of shape {matrix.shape}")
        return matrix

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = check_texts(texts)
        if not items:
            return empty_rows(self.dims)
        parts: list[np.ndarray] = []
        for i in range(0, len(items), self.batch_size):
            matrix = await self._embed_batch(items[i : i + self.batch_size])
            width = matrix.shape[1]
            if not self._dims_settled:
                self.dims, self._dims_settled = width, True
            elif width != self.dims:
                raise EmbeddingError(f"{self.model!r} returned {width} dims, expected {self.dims}")
            parts.append(matrix)
        return normalise_rows(np.concatenate(parts, axis=0))

    async def aclose(self) -> None:
        # The client belongs to the composition root, which closes it.
        return None
