"""Relations between facts: undirected edges to a fact's nearest neighbours
of the same guild, written when the fact's vector is written.

A fact links to at most ``MAX_LINKS`` active facts whose cosine similarity
is at least ``LINK_MIN``; the edge's strength is that cosine. An edge is
stored once (``a_id < b_id``, a primary key), so writing it again changes
nothing. A fact whose vector is written again (its text changed) gets its
edges anew. Edges go with their facts: a trigger deletes them with either
fact; readers keep to active facts, so an archived fact's edges rest until
it is restored or deleted.

The neighbours come from the guild's in-memory vector matrix when the
caller has one (``relate_written``'s ``nearest``: the retriever's matrix, or
its coarse index once the guild is big); sqlite-vec's KNN, a scan of the
guild's whole partition in SQLite, is the fallback while the matrix loads."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from memory.db.core import Connection, Database
from memory.db.sql import chunks, marks
from memory.models import Fact
from memory.store.search import facts_by_ids
from memory.store.vectors import knn

LINK_MIN = 0.6
MAX_LINKS = 5

# (model, guild, query vectors, k) -> the k nearest active facts of each
# query, (id, cosine) best first; None when the caller has no matrix at hand.
NearestFacts = Callable[
    [str, str, np.ndarray, int], Awaitable[list[list[tuple[int, float]]] | None]
]


@dataclass(frozen=True)
class Related:
    fact_id: int
    other_id: int
    strength: float


def edge(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


def links_of(
    fact_id: int,
    found: Iterable[tuple[int, float]],
    *,
    link_min: float = LINK_MIN,
    max_links: int = MAX_LINKS,
) -> list[tuple[int, float]]:
    """The edges ``fact_id`` gets from its nearest facts ``found`` (best first)."""
    out = [(other, round(c, 4)) for other, c in found if other != fact_id and c >= link_min]
    return out[:max_links]


def neighbours(
    con: Connection,
    model: str,
    guild_id: str,
    fact_id: int,
    blob: bytes,
    *,
    link_min: float = LINK_MIN,
    max_links: int = MAX_LINKS,
) -> list[tuple[int, float]]:
    """The active facts ``fact_id`` (vector ``blob``) links to: (other id, cosine),
    read from sqlite-vec's index."""
    found = knn(con, "facts", model, guild_id, blob, max_links + 1)
    return links_of(
        fact_id,
        ((other, 1.0 - distance) for other, distance in found),
        link_min=link_min,
        max_links=max_links,
    )


def active_ids(con: Connection, guild_id: str, fact_ids: Iterable[int]) -> set[int]:
    """The active facts of ``guild_id`` among ``fact_ids``.

    The ids alone are the condition in SQL, the guild and the flag are checked
    here: with ``guild_id = ? AND is_active = 1`` beside ``id IN (...)``,
    SQLite's planner (no statistics) walks the guild's (guild_id, is_active)
    index, every active fact of the guild, instead of looking the ids up: 10 ms
    an edge at 100k facts (bench/big_guild.py)."""
    out: set[int] = set()
    for chunk in chunks(sorted(set(fact_ids))):
        rows = con.execute(
            f"SELECT id, guild_id, is_active FROM memory_facts WHERE id IN ({marks(len(chunk))})",
            chunk,
        ).fetchall()
        out.update(int(r[0]) for r in rows if r[1] == guild_id and int(r[2]) == 1)
    return out


def save_links(
    con: Connection, guild_id: str, links: dict[int, list[tuple[int, float]]], now: str
) -> int:
    """Replace each fact's edges with ``links``; an edge is written only while
    both facts are active (one may have gone since the neighbours were read).
    The number of edges written."""
    active = active_ids(
        con, guild_id, [*links, *(o for others in links.values() for o, _ in others)]
    )
    written = 0
    for fact_id, others in links.items():
        con.execute("DELETE FROM fact_relations WHERE a_id = ? OR b_id = ?", (fact_id, fact_id))
        for other, strength in others:
            if fact_id not in active or other not in active:
                continue
            a, b = edge(fact_id, other)
            written += con.execute(
                "INSERT OR IGNORE INTO fact_relations (a_id, b_id, guild_id, strength, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (a, b, guild_id, strength, now),
            ).rowcount
    return written


def relate(con: Connection, model: str, guild_id: str, fact_id: int, blob: bytes, now: str) -> int:
    """Link ``fact_id`` to its nearest neighbours in one transaction."""
    found = neighbours(con, model, guild_id, fact_id, blob)
    return save_links(con, guild_id, {fact_id: found}, now)


async def relate_written(
    db: Database,
    model: str,
    rows: Sequence[tuple[int, str, str, bytes]],
    now: str,
    nearest: NearestFacts | None = None,
) -> int:
    """Relate facts whose vectors were just written (rows as ``put_fact_vectors``
    takes them): a guild's rows are searched together in ``nearest`` (its
    in-memory matrix), or one by one in sqlite-vec on a reader when that has
    none at hand. The writer thread only inserts the edges."""
    by_guild: dict[str, list[tuple[int, bytes]]] = {}
    for fact_id, guild_id, _hash, blob in rows:
        by_guild.setdefault(guild_id, []).append((fact_id, blob))
    found: dict[str, dict[int, list[tuple[int, float]]]] = {}
    stored: dict[str, list[tuple[int, bytes]]] = {}
    for guild_id, items in by_guild.items():
        queries = np.stack([np.frombuffer(blob, dtype=np.float32) for _, blob in items])
        near = None if nearest is None else await nearest(model, guild_id, queries, MAX_LINKS + 1)
        if near is None:
            stored[guild_id] = items
            continue
        found[guild_id] = {
            fact_id: links_of(fact_id, hits) for (fact_id, _), hits in zip(items, near, strict=True)
        }

    def find(con: Connection) -> dict[str, dict[int, list[tuple[int, float]]]]:
        return {
            guild_id: {
                fact_id: neighbours(con, model, guild_id, fact_id, blob) for fact_id, blob in items
            }
            for guild_id, items in stored.items()
        }

    if stored:
        found.update(await db.read(find))
    written = 0
    for guild_id, links in found.items():
        written += await db.write(save_links, guild_id, links, now)
    return written


def related_of(
    con: Connection, guild_id: str, fact_ids: Iterable[int], limit_each: int = MAX_LINKS
) -> list[Related]:
    """The edges of ``fact_ids`` to active facts, strongest first per fact."""
    out: list[Related] = []
    for chunk in chunks(list(fact_ids)):
        held = marks(len(chunk))
        rows = con.execute(
            f"SELECT r.a_id, r.b_id, r.strength FROM fact_relations r "
            f"JOIN memory_facts fa ON fa.id = r.a_id AND fa.is_active = 1 "
            f"JOIN memory_facts fb ON fb.id = r.b_id AND fb.is_active = 1 "
            f"WHERE r.guild_id = ? AND (r.a_id IN ({held}) OR r.b_id IN ({held})) "
            f"ORDER BY r.strength DESC",
            [guild_id, *chunk, *chunk],
        ).fetchall()
        wanted = set(chunk)
        count: dict[int, int] = {}
        for r in rows:
            a, b, s = int(r[0]), int(r[1]), float(r[2])
            for this, other in ((a, b), (b, a)):
                if this in wanted and count.get(this, 0) < limit_each:
                    count[this] = count.get(this, 0) + 1
                    out.append(Related(this, other, s))
    return out


def all_edges(con: Connection, guild_id: str) -> list[tuple[int, int, float]]:
    return [
        (int(r[0]), int(r[1]), float(r[2]))
        for r in con.execute(
            "SELECT a_id, b_id, strength FROM fact_relations WHERE guild_id = ? ORDER BY a_id, b_id",
            (guild_id,),
        )
    ]


def related_facts(con: Connection, guild_id: str, fact_id: int) -> list[tuple[Fact, float]]:
    """The active facts related to ``fact_id``, strongest first, with the strength."""
    links = related_of(con, guild_id, [fact_id])
    found = facts_by_ids(con, guild_id, [r.other_id for r in links])
    return [(found[r.other_id], r.strength) for r in links if r.other_id in found]
