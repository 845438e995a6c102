"""Where an in-memory index's next read of a table starts (the lexicons,
``memory.retrieval.lexicon`` and ``memory.retrieval.fact_lexicon``).

An index follows a table by watermarks — the highest seq or id it has read.
On SQLite one writer hands them out in commit order, so the next read starts
at the watermarks. On PostgreSQL a transaction that took a lower identity may
commit after a higher one was read: each read starts at the watermarks held
``RESCAN_S`` seconds ago, so such a row is read once it commits.

Not thread-safe: the owner holds its lock around ``start``.
"""

from __future__ import annotations

import time

from memory.db.core import Connection
from memory.db.sql import dialect_of

RESCAN_S = 10.0

Marks = tuple[int, ...]


class RescanWindow:
    def __init__(self) -> None:
        self._held: list[tuple[float, Marks]] = []  # (when, watermarks then), oldest first

    def start(self, con: Connection, marks: Marks) -> Marks:
        """The watermarks a read on ``con`` starts at, given those held now."""
        if dialect_of(con) != "postgresql":
            return marks
        now = time.monotonic()
        self._held = [(t, m) for t, m in self._held if now - t < RESCAN_S]
        low = self._held[0][1] if self._held else marks
        self._held.append((now, marks))
        return low
