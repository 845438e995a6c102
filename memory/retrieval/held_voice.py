"""How each message a guild's lexicon holds is worded — its share of
statements and of first-person words (``memory.retrieval.voice``) — read once
as its text enters the lexicon rather than by every search that ranks it.

Message ranking reads both for hundreds of candidates per search, and a long
message's first-person share means reading every word of it: the biggest
part of ranking a question in parts at 100k long messages. The readings
depend on the text alone, so they are kept beside the lexicon's rows and
follow them (a message edited or removed leaves the lexicon's row at once,
and the edit is read again as it now reads). Each is kept with the text's
hash: a search that holds another text under the same seq (an edit racing
the search) reads its own text itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memory.retrieval.voice import first_person_share, statement_share

__all__ = ["HeldVoice"]


class HeldVoice:
    """The voice readings of a lexicon's rows (row numbers are the lexicon's).
    Not thread-safe by itself: the lexicon calls it under its lock."""

    def __init__(self) -> None:
        self._statement = np.zeros(0, dtype=np.float64)
        self._first_person = np.zeros(0, dtype=np.float64)
        self._hash = np.zeros(0, dtype=np.int64)

    @property
    def nbytes(self) -> int:
        return self._statement.nbytes + self._first_person.nbytes + self._hash.nbytes

    def grow(self, capacity: int) -> None:
        if capacity > len(self._hash):
            self._statement = np.resize(self._statement, capacity)
            self._first_person = np.resize(self._first_person, capacity)
            self._hash = np.resize(self._hash, capacity)

    def read(self, row: int, text: str) -> None:
        """Read ``text``, the lexicon's row ``row`` (within the grown capacity)."""
        self._statement[row] = statement_share(text)
        self._first_person[row] = first_person_share(text)
        self._hash[row] = hash(text)

    def keep(self, rows: np.ndarray) -> None:
        """Only ``rows`` stay, renumbered in their order (the lexicon's compaction)."""
        self._statement = self._statement[rows].copy()
        self._first_person = self._first_person[rows].copy()
        self._hash = self._hash[rows].copy()

    def of(self, rows: Sequence[int], texts: Sequence[str]) -> list[tuple[float, float] | None]:
        """(statement share, first-person share) of each row in ``rows`` if it
        was read from the text at the same position of ``texts``; None otherwise."""
        if not rows:
            return []
        at = np.asarray(rows, dtype=np.int64)
        same = (self._hash[at] == np.asarray([hash(t) for t in texts], dtype=np.int64)).tolist()
        statement = self._statement[at].tolist()
        first_person = self._first_person[at].tolist()
        return [
            (st, fp) if ok else None
            for ok, st, fp in zip(same, statement, first_person, strict=True)
        ]
