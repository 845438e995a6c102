"""Ordering candidates by a score with a costly part of bounded weight.

A score that is a cheap sum plus one costly part (e.g. a part that reads
every word of a message) need not compute the costly part for every
candidate: the candidates are walked best first by the cheap score, and the
costly part is computed only for a candidate whose cheap score plus the
part's largest weight could still reach the best full score not yet given.
The order is exactly the one sorting every candidate by its full score gives
(ties in the input's order); far down a long list, where a search stops
reading, the costly part is never computed.

Pure: no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

__all__ = ["best_first"]

T = TypeVar("T")
# Slack for float sums compared with a bound they meet exactly.
_EPS = 1e-9


def best_first(
    items: Sequence[tuple[T, float]],
    part: Callable[[T], float],
    full: Callable[[T, float], float],
    bound: float,
) -> Iterator[tuple[T, float, float]]:
    """``(item, cheap score)`` pairs as ``(item, costly part, full score)``,
    best full score first.

    ``part(item)`` is the costly part, ``full(item, part)`` the full score,
    which is at most the cheap score plus ``bound`` (the part's largest
    weight) and is the cheap score when the part is 0; ``part`` is called
    only for items that bound lets rank next.
    Lazy: stop iterating and the rest is never scored.
    """
    order = sorted(range(len(items)), key=lambda i: -items[i][1])  # stable
    heap: list[tuple[float, int, float]] = []  # (-full score, input index, part)
    nxt = 0
    while nxt < len(order) or heap:
        while nxt < len(order) and (not heap or items[order[nxt]][1] + bound >= -heap[0][0] - _EPS):
            i = order[nxt]
            nxt += 1
            item, cheap = items[i]
            value = part(item)
            heapq.heappush(heap, (-(full(item, value) if value else cheap), i, value))
        negative, i, value = heapq.heappop(heap)
        yield items[i][0], value, -negative
