"""Which pairs of a subject's current facts consolidation looks at, and what
it does with them offline.

Offline only two things are certain enough to change memory without a
model: exact duplicates after normalisation (case, punctuation, spacing),
merged into the older fact; and two values of the same single-valued slot
(``memory.decision``'s slot rules: where someone lives, their job,
"favourite X", ...), where the write decision says the newer observation
supersedes the older one. Everything else is left as it is."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from memory.decision import CurrentFact, decide, slot_of
from memory.store.consolidation import Action, PoolFact

_PUNCT = re.compile(r"[^\w\s]+", re.UNICODE)


def normalise(text: str) -> str:
    return " ".join(_PUNCT.sub(" ", text.casefold()).split())


def _slot_key(fact: str) -> tuple[str, tuple[str, ...]] | None:
    slot = slot_of(fact)
    return None if slot is None else (slot.kind, slot.key)


def may_pair(a: PoolFact, b: PoolFact) -> bool:
    """Offline prefilter: the same normalised text, or the same slot."""
    if a.subject != b.subject or a.id == b.id:
        return False
    if normalise(a.fact) == normalise(b.fact):
        return True
    ka = _slot_key(a.fact)
    return ka is not None and ka == _slot_key(b.fact)


def offline_verdict(a: PoolFact, b: PoolFact) -> Action | None:
    """The change a pair calls for offline, or None (different facts, or not sure)."""
    if normalise(a.fact) == normalise(b.fact):
        keep, drop = sorted((a, b), key=lambda f: (f.observed_at, f.id))
        return Action("merge", keep.id, drop.id, "exact duplicate after normalisation")
    newer, older = sorted((a, b), key=lambda f: (f.last_observed_at, f.id), reverse=True)
    decision = decide(
        newer.fact,
        newer.last_observed_at,
        [CurrentFact(older.id, older.fact, older.observed_at, older.last_observed_at)],
    )
    if decision.kind == "supersede" and decision.targets == (older.id,):
        return Action("supersede", newer.id, older.id, decision.reason)
    return None


def pairs_of(
    pool: Sequence[PoolFact],
    partners: dict[str, list[PoolFact]],
    keep: Callable[[PoolFact, PoolFact], bool] = may_pair,
) -> list[tuple[PoolFact, PoolFact]]:
    """Each pair that ``keep`` lets through once (candidate first), candidates
    in pool order; only facts of the same subject pair."""
    seen: set[tuple[int, int]] = set()
    out: list[tuple[PoolFact, PoolFact]] = []
    for c in pool:
        for other in partners.get(c.subject, []):
            key = (min(c.id, other.id), max(c.id, other.id))
            if key in seen or c.id == other.id or not keep(c, other):
                continue
            seen.add(key)
            out.append((c, other))
    return out
