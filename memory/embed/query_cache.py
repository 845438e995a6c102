"""The query-vector cache: a query text embedded before, for the same model,
skips the model."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np


class QueryCache:
    """An LRU of query vectors keyed by (model id, text); used on the event loop only.

    Stored vectors are read-only copies: every caller gets the same array, so
    one that wrote into it would change the next caller's query.
    """

    def __init__(self, maxsize: int = 512) -> None:
        self.maxsize = max(0, maxsize)
        self._data: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()

    def get(self, model: str, text: str) -> np.ndarray | None:
        vec = self._data.get((model, text))
        if vec is not None:
            self._data.move_to_end((model, text))
        return vec

    def put(self, model: str, text: str, vector: np.ndarray) -> np.ndarray:
        """Store a read-only copy of ``vector`` and return it."""
        vec = np.array(vector, dtype=np.float32)
        vec.setflags(write=False)
        if self.maxsize == 0:
            return vec
        self._data[(model, text)] = vec
        self._data.move_to_end((model, text))
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)
        return vec

    def clear(self) -> None:
        self._data.clear()

    def __len__(self) -> int:
        return len(self._data)
