"""Relations between facts: undirected edges to a fact's nearest neighbours
of the same guild, written when the fact's vector is written.

A fact links to at most ``MAX_LINKS`` active facts whose cosine similarity
is at least ``LINK_MIN``; the edge's strength is that cosine. An edge is
stored once (``a_id < b_id``, a primary key), so writing it again changes
nothing. A fact whose vector is written again (its text changed) gets its
edges anew. Edges go with their facts: a trigger deletes them with either
fact; readers keep to active facts, so an archived fact's edges rest until
it is restored or deleted."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memory.db.core import Connection, Database
from memory.db.sql import chunks, marks
from memory.models import Fact
from memory.store.search import facts_by_ids
from memory.store.vectors import knn

LINK_MIN = 0.6
MAX_LINKS = 5


@dataclass(frozen=True)
class Related:
    fact_id: int
    other_id: int
    strength: float


def edge(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


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
    """The active facts ``fact_id`` (vector ``blob``) links to: (other id, cosine)."""
    out: list[tuple[int, float]] = []
    for other, distance in knn(con, "facts", model, guild_id, blob, max_links + 1):
        cosine = 1.0 - distance
        if other != fact_id and cosine >= link_min:
            out.append((other, round(cosine, 4)))
    return out[:max_links]


def save_links(
    con: Connection, guild_id: str, links: dict[int, list[tuple[int, float]]], now: str
) -> int:
    """Replace each fact's edges with ``links``; an edge is written only while
    both facts are active (one may have gone since the neighbours were read).
    The number of edges written."""
    written = 0
    for fact_id, others in links.items():
        con.execute("DELETE FROM fact_relations WHERE a_id = ? OR b_id = ?", (fact_id, fact_id))
        for other, strength in others:
            a, b = edge(fact_id, other)
            written += con.execute(
                "INSERT OR IGNORE INTO fact_relations (a_id, b_id, guild_id, strength, created_at) "
                "SELECT ?, ?, ?, ?, ? WHERE (SELECT count(*) FROM memory_facts WHERE id IN (?, ?) "
                "AND guild_id = ? AND is_active = 1) = 2",
                (a, b, guild_id, strength, now, a, b, guild_id),
            ).rowcount
    return written


def relate(con: Connection, model: str, guild_id: str, fact_id: int, blob: bytes, now: str) -> int:
    """Link ``fact_id`` to its nearest neighbours in one transaction."""
    found = neighbours(con, model, guild_id, fact_id, blob)
    return save_links(con, guild_id, {fact_id: found}, now)


async def relate_written(
    db: Database, model: str, rows: Sequence[tuple[int, str, str, bytes]], now: str
) -> int:
    """Relate facts whose vectors were just written (rows as ``put_fact_vectors``
    takes them). The nearest-neighbour searches run on a reader, so the
    writer thread only inserts the edges."""

    def find(con: Connection) -> dict[str, dict[int, list[tuple[int, float]]]]:
        out: dict[str, dict[int, list[tuple[int, float]]]] = {}
        for fact_id, guild_id, _hash, blob in rows:
            out.setdefault(guild_id, {})[fact_id] = neighbours(con, model, guild_id, fact_id, blob)
        return out

    found = await db.read(find)
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
