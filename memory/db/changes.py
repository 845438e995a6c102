"""Change events: what a write transaction did that a cache outside the
database must follow (the in-memory vector matrices of ``memory.retrieval``,
the resolved guild settings).

Store functions ``record`` an event on the connection they write through;
``memory.db.core.Database`` collects the events of one transaction and hands
them to its subscribers after ``COMMIT`` — never for a transaction that rolled
back. ``ExternalCommit`` says that another connection (another process, or a
second ``Database`` on the same file) committed: its changes are known by
guild where the database can tell (PostgreSQL's notifications carry them),
otherwise not at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

VectorKind = Literal["facts", "messages"]


@dataclass(frozen=True)
class VectorsPut:
    """Vectors written into (or put back into) a KNN index: one guild, one model."""

    kind: VectorKind
    model: str
    guild_id: str
    ids: tuple[int, ...]
    blobs: tuple[bytes, ...]


@dataclass(frozen=True)
class VectorsRemoved:
    """Ids taken out of every model's KNN index (archived, deleted, forgotten)."""

    kind: VectorKind
    ids: tuple[int, ...]


@dataclass(frozen=True)
class FactsChanged:
    """Facts whose indexed text (fact, evidence) or validity changed in a
    write that leaves no ``fact_history`` row: a cache of facts re-reads
    them (a change with a history row is found through it)."""

    ids: tuple[int, ...]


@dataclass(frozen=True)
class SettingsChanged:
    """A guild's settings were written."""

    guild_id: str


@dataclass(frozen=True)
class ExternalCommit:
    """Another connection committed since this database last looked: the
    guilds whose vectors and whose settings it changed (None: unknown, any)."""

    vector_guilds: tuple[str, ...] | None = None
    settings_guilds: tuple[str, ...] | None = None


Change = VectorsPut | VectorsRemoved | FactsChanged | SettingsChanged | ExternalCommit


def record(con: Any, change: Change) -> None:
    """Note ``change`` in the transaction open on ``con``.

    Only a ``Database`` write transaction collects changes; on any other
    connection (a migration, a bare connection in a tool) nobody holds a cache
    to keep coherent, and the event is dropped.
    """
    pending = getattr(con, "changes", None)
    if pending is not None:
        pending.append(change)
