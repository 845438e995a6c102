"""Ordering by a score with a costly part of bounded weight
(memory.retrieval.bounded_order): the order is the full sort's, and the
costly part is computed only where it can still matter."""

from __future__ import annotations

import itertools
import random

from memory.retrieval.bounded_order import best_first

WEIGHT = 0.05


def _full_sort(items: list[tuple[int, float]], parts: dict[int, float]) -> list[int]:
    scored = [(item, min(1.0, cheap + WEIGHT * parts[item])) for item, cheap in items]
    return [item for item, _ in sorted(scored, key=lambda t: -t[1])]


def test_the_order_is_the_full_sorts_ties_in_input_order() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(0, 60)
        # Coarse values make ties, cheap and full, common.
        items = [(i, rng.choice([0.1, 0.2, 0.3, 0.35, 0.98, 1.0])) for i in range(n)]
        parts = {i: rng.choice([0.0, 0.5, 1.0]) for i in range(n)}
        cheap = dict(items)
        walk = best_first(
            items, parts.__getitem__, lambda i, p, c=cheap: min(1.0, c[i] + WEIGHT * p), WEIGHT
        )
        got = list(walk)
        assert [i for i, _, _ in got] == _full_sort(items, parts)
        assert all(p == parts[i] for i, p, _ in got)
        assert all(s == min(1.0, cheap[i] + WEIGHT * parts[i]) for i, _, s in got)


def test_the_costly_part_is_computed_only_where_it_can_still_move_an_item() -> None:
    items = [(i, 1.0 - i / 100) for i in range(100)]  # cheap scores 0.01 apart
    asked: list[int] = []

    def part(i: int) -> float:
        asked.append(i)
        return 1.0 if i == 4 else 0.0

    cheap = dict(items)
    walk = best_first(items, part, lambda i, p: cheap[i] + WEIGHT * p, WEIGHT)
    top = [i for i, _, _ in itertools.islice(walk, 3)]
    # Item 4 (cheap 0.96, full 1.01) passes items 0..3 (1.00..0.97).
    assert top == [4, 0, 1]
    # Reading three needs the parts of items whose cheap score is within the
    # weight of the third full score (0.99), not of the other ninety-odd.
    assert sorted(asked) == list(range(7))
    assert list(best_first([], part, lambda i, p: 0.0, WEIGHT)) == []
