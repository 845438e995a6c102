"""Relations in ranking: a small boost for a fact whose related fact is also
a candidate, and the 1–2 related facts the prompt slice may add.

The boost is ``RELATED_WEIGHT × the strongest edge`` to another candidate,
added to ``combined`` after the relevance gate has judged the fact: a
relation never lets an unrelated fact pass, it only orders relevant ones.
Only a fact that passed the gate is boosted (the gate reads ``combined``
again when ranking; a higher score never fails it). The part is kept in
``ScoreParts.related``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from memory.db.core import Connection
from memory.models import Fact, Hit, ScoreParts
from memory.retrieval.filters import FactFilter
from memory.retrieval.hits import fact_hit
from memory.store.relations import related_of
from memory.store.search import facts_by_ids

T = TypeVar("T")

RELATED_WEIGHT = 0.05
# Related facts the prompt slice may add after its ranked facts.
SLICE_RELATED = 2

Links = Mapping[int, Sequence[tuple[int, float]]]


def links_of(
    con: Connection, guild_id: str, fact_ids: Sequence[int]
) -> dict[int, list[tuple[int, float]]]:
    """Each fact's edges to active facts (other id, strength), strongest first."""
    out: dict[int, list[tuple[int, float]]] = {}
    for r in related_of(con, guild_id, fact_ids):
        out.setdefault(r.fact_id, []).append((r.other_id, r.strength))
    return out


def boost(
    scored: list[tuple[T, ScoreParts]], ids: Sequence[int], links: Links
) -> list[tuple[T, ScoreParts]]:
    """``scored`` (whose fact ids are ``ids``, in order) with the related boost."""
    present = set(ids)
    out: list[tuple[T, ScoreParts]] = []
    for (item, parts), fid in zip(scored, ids, strict=True):
        strongest = max((s for o, s in links.get(fid, ()) if o in present), default=0.0)
        if strongest > 0.0 and parts.passed:
            add = RELATED_WEIGHT * strongest
            parts = replace(parts, combined=min(1.0, parts.combined + add), related=add)
        out.append((item, parts))
    return out


def slice_related(
    con: Connection,
    guild_id: str,
    seeds: Sequence[int],
    exclude: set[int],
    visible: set[str] | None,
    only: FactFilter | None,
    limit: int = SLICE_RELATED,
) -> list[Hit]:
    """Up to ``limit`` current facts related to ``seeds`` (strongest edge
    first) that are not in ``exclude`` and that the reader may see."""
    best: dict[int, float] = {}
    for r in related_of(con, guild_id, seeds):
        if r.other_id not in exclude:
            best[r.other_id] = max(best.get(r.other_id, 0.0), r.strength)
    order = sorted(best, key=lambda i: (-best[i], i))
    found = facts_by_ids(con, guild_id, order, None)
    out: list[Hit] = []
    for fid in order:
        f: Fact | None = found.get(fid)
        if f is None or not f.is_active:
            continue
        if visible is not None and f.channel_id is not None and f.channel_id not in visible:
            continue
        if only is not None and not only.keep(f):
            continue
        add = RELATED_WEIGHT * best[fid]
        out.append(
            fact_hit(f, ScoreParts(0.0, None, f.confidence, 0.0, 0.0, combined=add, related=add))
        )
        if len(out) == limit:
            break
    return out
