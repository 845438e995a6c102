"""Which facts a search may consider, decided before anything is ranked:
the memory types its consumer may see, and an observation-time range."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memory.clock import iso
from memory.guild_settings import GuildSettings
from memory.memory_types import DEFAULT_SEARCH_TYPES, memory_type_of, resolve_types
from memory.models import Fact


@dataclass(frozen=True)
class FactFilter:
    """``types``: memory types to keep (None: every type); ``after``/``before``:
    ISO times bounding when a fact was observed (exclusive; None: open)."""

    types: frozenset[str] | None = None
    after: str | None = None
    before: str | None = None

    def keep(self, fact: Fact) -> bool:
        if self.types is not None and memory_type_of(fact.fact_type) not in self.types:
            return False
        if self.after is None and self.before is None:
            return True
        seen = fact.observed_at or fact.created_at
        if self.after is not None and seen <= self.after:
            return False
        return self.before is None or seen < self.before


def consumer_filter(
    settings: GuildSettings | None,
    consumer: str | Sequence[str] | None,
    types: Sequence[str] | None = None,
    *,
    after: datetime | None = None,
    before: datetime | None = None,
) -> FactFilter:
    """The filter of a search by ``consumer`` (one name, or several: the types
    all of them allow; None: facts, lore and episodes), narrowed to ``types``;
    ``TypeNotAllowed`` when ``types`` names one outside the allowlist."""
    names = [consumer] if isinstance(consumer, str) else list(consumer or ())
    allowed = DEFAULT_SEARCH_TYPES
    if names:
        if settings is None:
            raise ValueError("a consumer's allowlist needs the guild's settings")
        allowed = frozenset.intersection(*(settings.allowed_types(n) for n in names))
    chosen = resolve_types(types, allowed, " within ".join(names) or "search")
    return FactFilter(
        chosen,
        None if after is None else iso(after),
        None if before is None else iso(before),
    )
