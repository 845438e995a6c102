"""Row helpers every embedder shares: input checks, empty results, unit length.

They sit in their own module so ``memory.embed.local`` (the bundled model)
and ``memory.embed.remote`` (the API provider) can both use them without
importing each other.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memory.errors import EmbeddingError


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    out = np.asarray(matrix, dtype=np.float32)
    if not np.all(np.isfinite(out)):
        raise EmbeddingError("embedding contains NaN or infinite values")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    # An all-zero row stays zero (cosine 0 with everything) instead of NaN.
    return out / np.maximum(norms, 1e-12)


def empty_rows(dims: int) -> np.ndarray:
    return np.zeros((0, dims), dtype=np.float32)


def check_texts(texts: Sequence[str]) -> list[str]:
    # A bare str is a Sequence[str] too; embedding it letter by letter is
    # never what the caller meant.
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not a single str")
    out = list(texts)
    for t in out:
        if not isinstance(t, str):
            raise TypeError(f"embed() texts must be str, got {type(t).__name__}")
    return out
