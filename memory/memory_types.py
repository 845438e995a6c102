"""Memory types, and which of them each consumer may see.

A fact's stored ``fact_type`` is fine-grained (preference, profile, lore,
episode, ...); consumers reason about five coarser *memory types*:

- ``facts``: what members said about themselves and each other (every
  fact type not listed below);
- ``lore``: the guild's durable lines (``lore``);
- ``episodes``: summaries of past conversations (``episode``);
- ``procedures``: how the guild wants the bot to behave (``procedure``);
- ``insights``: inferred observations (``insight``).

Each consumer (replies, voice replies, the model's ``memory_query`` tool, the
public API) has an allowlist, a guild setting with a default. The engine
enforces it: results of other types never leave it, and a request that names
a type outside the list is refused with ``TypeNotAllowed``. ``procedures``
and ``insights`` are in no list unless an operator puts them there.
Procedures reach the model through the system prompt only: search never
returns them, whatever a list says.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from memory.errors import InvalidInput

MemoryType = Literal["facts", "lore", "episodes", "procedures", "insights"]
MEMORY_TYPES: tuple[str, ...] = ("facts", "lore", "episodes", "procedures", "insights")
# fact_type → memory type, for the types that are not plain facts.
_SPECIAL: dict[str, str] = {
    "lore": "lore",
    "episode": "episodes",
    "procedure": "procedures",
    "insight": "insights",
}

Consumer = Literal["replies", "voice", "tool", "api"]
CONSUMERS: tuple[str, ...] = ("replies", "voice", "tool", "api")
DEFAULT_ALLOWLISTS: dict[str, frozenset[str]] = {
    "replies": frozenset({"facts", "lore", "episodes", "procedures"}),
    "voice": frozenset({"facts", "lore", "episodes", "procedures"}),
    "tool": frozenset({"facts", "lore", "episodes"}),
    "api": frozenset({"facts", "lore", "episodes"}),
}
# What a search answers when nobody named a consumer (operator tools, benchmarks).
DEFAULT_SEARCH_TYPES = frozenset({"facts", "lore", "episodes"})
# Never search results: procedures are part of the system prompt instead.
NOT_SEARCHABLE = frozenset({"procedures"})


class TypeNotAllowed(InvalidInput):
    """A consumer asked for memory types outside its allowlist."""


def memory_type_of(fact_type: str | None) -> str:
    """The memory type of a stored ``fact_type``."""
    return _SPECIAL.get(fact_type or "", "facts")


def parse_types(values: Iterable[object]) -> frozenset[str]:
    """Memory type names (singular accepted: ``fact``, ``episode``); InvalidInput otherwise."""
    out: set[str] = set()
    bad: list[str] = []
    for raw in values:
        name = str(raw).strip().lower()
        if not name:
            continue
        if name not in MEMORY_TYPES and f"{name}s" in MEMORY_TYPES:
            name = f"{name}s"
        if name in MEMORY_TYPES:
            out.add(name)
        else:
            bad.append(str(raw)[:30])
    if bad:
        raise InvalidInput(
            f"unknown memory type(s) {', '.join(bad[:5])}; known: {', '.join(MEMORY_TYPES)}"
        )
    return frozenset(out)


def resolve_types(
    requested: Iterable[str] | None, allowed: frozenset[str], consumer: str
) -> frozenset[str]:
    """The types a search may return: ``requested`` (None: all of ``allowed``)
    within ``allowed``, minus what search never returns; ``TypeNotAllowed``
    naming what was refused."""
    if requested is None:
        return allowed - NOT_SEARCHABLE
    wanted = parse_types(requested)
    refused = sorted(wanted - allowed)
    if refused:
        raise TypeNotAllowed(
            f"memory type(s) {', '.join(refused)} are not allowed for {consumer}; "
            f"allowed: {', '.join(sorted(allowed)) or 'none'}"
        )
    unsearchable = sorted(wanted & NOT_SEARCHABLE)
    if unsearchable:
        raise TypeNotAllowed(
            f"{', '.join(unsearchable)} are not searchable: they are already in your instructions"
        )
    return wanted
