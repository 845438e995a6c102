"""Synthetic, snowflake-shaped message ids for voice utterances.

Layout is Discord's: ``(ms since 2015-01-01) << 22 | worker << 17 |
process << 12 | increment``. Voice ids use worker 31 and process 31
(``0x3FF000`` in the low 22 bits) as the "synthetic" mark, and the
utterance's start time as the timestamp, so they sort chronologically
with real message ids of the same guild. The mark is a convenience for
humans and tools; the authoritative flag is ``source="voice"`` on the
message, because a real snowflake could in principle carry the same bits.
"""

from __future__ import annotations

import threading
from collections import deque
from datetime import UTC, datetime

DISCORD_EPOCH_MS = 1_420_070_400_000
SYNTHETIC_MARK = 0x3FF000  # worker=31, process=31
_INCREMENT_MASK = 0xFFF


def _ms(at: datetime) -> int:
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    ms = int(at.timestamp() * 1000) - DISCORD_EPOCH_MS
    if ms < 0:
        raise ValueError("time is before the Discord epoch")
    return ms


def make_synthetic_id(at: datetime, increment: int = 0) -> int:
    if not 0 <= increment <= _INCREMENT_MASK:
        raise ValueError("increment must fit in 12 bits")
    return (_ms(at) << 22) | SYNTHETIC_MARK | increment


def is_synthetic_id(value: str | int) -> bool:
    try:
        n = int(value)
    except (TypeError, ValueError):
        return False
    return n > 0 and (n & SYNTHETIC_MARK) == SYNTHETIC_MARK


def snowflake_time(value: str | int) -> datetime:
    ms = (int(value) >> 22) + DISCORD_EPOCH_MS
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


class SyntheticIds:
    """Issues unique synthetic ids; thread-safe, one instance per process.

    Two utterances can start in the same millisecond (two speakers, or a
    forced cut), so the 12-bit increment disambiguates; if a millisecond's
    4096 increments are used up, the id moves to the next millisecond,
    which keeps ordering intact. Remembering the last ``recent`` ids is
    enough because utterances are issued at most ~20 s after they start.
    """

    def __init__(self, recent: int = 8192) -> None:
        self._lock = threading.Lock()
        self._issued: set[int] = set()
        self._order: deque[int] = deque()
        self._recent = recent

    def next(self, at: datetime) -> str:
        ms = _ms(at)
        with self._lock:
            increment = 0
            while True:
                candidate = (ms << 22) | SYNTHETIC_MARK | increment
                if candidate not in self._issued:
                    break
                increment += 1
                if increment > _INCREMENT_MASK:
                    ms, increment = ms + 1, 0
            self._issued.add(candidate)
            self._order.append(candidate)
            while len(self._order) > self._recent:
                self._issued.discard(self._order.popleft())
        return str(candidate)
