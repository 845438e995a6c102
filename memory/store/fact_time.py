"""When facts were observed and when they were true: the source message's
time, the ``fact_sources`` links (a fact and every message it was seen in),
and the SQL condition for the facts valid at a time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from memory.db.core import Connection
from memory.db.sql import chunks, marks


class FactSource(NamedTuple):
    message_id: str
    observed_at: str


def message_time(con: Connection, guild_id: str, message_id: str | None) -> str | None:
    """``created_at`` of a stored message of this guild, or None."""
    if message_id is None:
        return None
    row = con.execute(
        "SELECT created_at FROM messages WHERE guild_id = ? AND id = ?", (guild_id, message_id)
    ).fetchone()
    return None if row is None else str(row[0])


def observe(
    con: Connection, guild_id: str, fact_id: int, message_id: str | None, observed_at: str
) -> None:
    """Record that a fact was observed at ``observed_at`` (in ``message_id``).

    A new fact starts its span there. An older observation (an import or a
    replay of history) widens the span back in time; it never moves the
    latest observation backwards."""
    con.execute(
        "UPDATE memory_facts SET observed_at = min(coalesce(observed_at, :t), :t), "
        "valid_from = min(coalesce(valid_from, :t), :t), "
        "last_observed_at = max(coalesce(last_observed_at, :t), :t) WHERE id = :id",
        {"t": observed_at, "id": fact_id},
    )
    if message_id is not None:
        add_source(con, guild_id, fact_id, message_id, observed_at)


def add_source(
    con: Connection, guild_id: str, fact_id: int, message_id: str, observed_at: str
) -> None:
    """Link a fact to a message it was observed in; a second link is a no-op."""
    con.execute(
        "INSERT OR IGNORE INTO fact_sources (fact_id, message_id, guild_id, observed_at) "
        "VALUES (?, ?, ?, ?)",
        (fact_id, message_id, guild_id, observed_at),
    )


def fact_sources(con: Connection, guild_id: str, fact_id: int) -> list[FactSource]:
    """The messages a fact was observed in, oldest observation first."""
    rows = con.execute(
        "SELECT message_id, observed_at FROM fact_sources WHERE guild_id = ? AND fact_id = ? "
        "ORDER BY observed_at, message_id",
        (guild_id, fact_id),
    ).fetchall()
    return [FactSource(r["message_id"], r["observed_at"]) for r in rows]


def valid_clause(as_of: str | None, alias: str = "") -> tuple[str, list[Any]]:
    """SQL (starting with `` AND``) and its arguments keeping the facts valid at
    ``as_of`` (ISO text as ``memory.clock.iso`` writes it); None: current facts."""
    p = f"{alias}." if alias else ""
    if as_of is None:
        return f" AND {p}valid_to IS NULL", []
    return (
        f" AND {p}valid_from <= ? AND ({p}valid_to IS NULL OR {p}valid_to > ?)",
        [as_of, as_of],
    )


def superseded_sources(
    con: Connection, guild_id: str, message_ids: Sequence[str], as_of: str | None = None
) -> set[str]:
    """The messages among ``message_ids`` whose every fact has stopped being
    true (at ``as_of``; None: now). A message with no facts is not among them."""
    out: set[str] = set()
    for chunk in chunks(list(message_ids)):
        rows = con.execute(
            "SELECT fs.message_id FROM fact_sources fs JOIN memory_facts f ON f.id = fs.fact_id "
            f"WHERE fs.guild_id = ? AND fs.message_id IN ({marks(len(chunk))}) "
            "GROUP BY fs.message_id HAVING sum(CASE WHEN f.valid_to IS NULL OR f.valid_to > ? THEN 1 ELSE 0 END) = 0",
            [guild_id, *chunk, as_of if as_of is not None else "\uffff"],
        ).fetchall()
        out.update(r[0] for r in rows)
    return out
