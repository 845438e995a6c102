"""Fusing the rankings of a question's parts into the whole question's ranking.

A question that combines several things ("... between my visit to the
dentist and buying the bike?") is also searched part by part
(``memory.retrieval.decompose``). Each ranking votes for its hits by
reciprocal rank, ``weight / (k + rank)``: the whole question's ranking with
``whole_weight``, each part's with ``part_weight``. A hit the whole question
and a part both rank high leads; a hit only a part finds can enter the top
when that part ranks it high, which is how the top k comes to hold evidence
for every part rather than several hits for one part and none for another.

The result stays explainable the way ``memory.retrieval.newer_first`` is:
the fused order fills the *slots* of the whole question's ranking, so the
i-th hit takes the i-th score of the whole ranking (beyond its length, its
own score, never above the slot before). Each hit's ``parts.decomposed`` is
what fusion added to (or took from) its own ``combined`` score, and
``parts.query_part`` names the part that ranks it best when that part ranks
it above the whole question does ("" otherwise). A hit the whole question ranked keeps
that ranking's score parts; one only a part found keeps the part's.

Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from memory.models import Hit


@dataclass(frozen=True)
class PartFusionRule:
    """Reciprocal-rank fusion of the whole question's ranking with its parts'.

    Calibrated on the dev splits of LoCoMo, REALTALK and LongMemEval together:
    a part's first hit votes like the whole question's eighth or ninth, so it
    enters a top 10 ahead of what no part backs but does not displace what the
    whole question ranks first. Heavier part votes (0.6 to 1, or a steeper
    ``k`` of 2 to 3) found a little more for "both X and Y" questions and
    pushed out about as much that the whole question had right; summing the
    parts' votes instead of taking the best let the shared frame win."""

    k: float = 5.0  # the reciprocal-rank constant: larger flattens the vote
    whole_weight: float = 1.0
    part_weight: float = 0.45  # each part's ranking
    depth: int = 50  # hits of each part's ranking that vote
    enabled: bool = True


DEFAULT_PART_FUSION = PartFusionRule()

_Key = tuple[str, str]


def _key(h: Hit) -> _Key:
    return (h.kind, h.id)


def fuse_parts(
    whole: Sequence[Hit],
    parts: Sequence[tuple[str, Sequence[Hit]]],
    limit: int,
    rule: PartFusionRule = DEFAULT_PART_FUSION,
) -> list[Hit]:
    """``whole`` (best first) fused with each ``(part text, hits best first)``
    (module doc); at most ``limit`` hits."""
    if not rule.enabled or not parts:
        return list(whole[:limit])
    votes: dict[_Key, float] = {}
    hit_of: dict[_Key, Hit] = {}
    whole_rank: dict[_Key, int] = {}
    for rank, h in enumerate(whole):
        key = _key(h)
        if key in whole_rank:
            continue
        whole_rank[key] = rank
        hit_of[key] = h
        votes[key] = rule.whole_weight / (rule.k + rank + 1)
    # A hit's best part rank counts, not the sum of its part votes: the parts
    # share the question's frame, and a hit every part ranks for that frame
    # alone must not outvote what the whole question ranks first.
    part_rank: dict[_Key, tuple[int, str]] = {}
    for label, ranked in parts:
        for rank, h in enumerate(ranked[: max(0, rule.depth)]):
            key = _key(h)
            hit_of.setdefault(key, h)
            if rank < part_rank.get(key, (len(ranked), ""))[0]:
                part_rank[key] = (rank, label)
    found_by: dict[_Key, str] = {}
    for key, (rank, label) in part_rank.items():
        votes[key] = votes.get(key, 0.0) + rule.part_weight / (rule.k + rank + 1)
        if rank < whole_rank.get(key, len(whole)):
            found_by[key] = label  # the part ranks it above the whole question
    order = sorted(
        votes, key=lambda key: (-votes[key], whole_rank.get(key, len(whole)), key[0], key[1])
    )[: max(0, limit)]
    slots = [h.score for h in whole]
    out: list[Hit] = []
    for i, key in enumerate(order):
        h = hit_of[key]
        score = slots[i] if i < len(slots) else h.score
        if out:
            score = min(score, out[-1].score)
        out.append(_moved(h, score, found_by.get(key, "")))
    return out


def _moved(hit: Hit, score: float, label: str) -> Hit:
    delta = score - hit.score
    if delta == 0.0 and label == hit.parts.query_part:
        return hit
    parts = dataclasses.replace(
        hit.parts,
        combined=score,
        decomposed=hit.parts.decomposed + delta,
        query_part=label,
    )
    return dataclasses.replace(hit, score=score, parts=parts)
