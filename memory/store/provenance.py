"""SQL for provenance: where a fact came from (the stored messages it was
observed in, and who wrote it first), and the facts a message gave."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from memory.db.core import Connection
from memory.db.sql import chunks, marks
from memory.models import Fact
from memory.store.facts import FACT_COLUMNS, row_to_fact


class SourceRow(NamedTuple):
    fact_id: int
    message_id: str
    channel_id: str
    author_id: str
    created_at: str  # when the message was written (Discord's time)


def sources_of(
    con: Connection, guild_id: str, fact_ids: Sequence[int]
) -> dict[int, list[SourceRow]]:
    """Each fact's stored source messages, oldest first: those of
    ``fact_sources`` and its ``source_message_id``. A source no longer stored
    (deleted, erased) is not listed."""
    out: dict[int, list[SourceRow]] = {}
    for chunk in chunks(list(dict.fromkeys(fact_ids))):
        held = marks(len(chunk))
        rows = con.execute(
            "SELECT s.fact_id, m.id, m.channel_id, m.author_id, m.created_at "
            "FROM fact_sources s JOIN messages m ON m.guild_id = s.guild_id AND m.id = s.message_id "
            f"WHERE s.guild_id = ? AND s.fact_id IN ({held}) "
            "UNION SELECT f.id, m.id, m.channel_id, m.author_id, m.created_at "
            "FROM memory_facts f JOIN messages m ON m.guild_id = f.guild_id "
            "AND m.id = f.source_message_id "
            f"WHERE f.guild_id = ? AND f.id IN ({held})",
            [guild_id, *chunk, guild_id, *chunk],
        ).fetchall()
        for r in rows:
            out.setdefault(int(r[0]), []).append(
                SourceRow(int(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]))
            )
    for rows_of in out.values():
        rows_of.sort(key=lambda s: (s.created_at, s.message_id))
    return out


def first_actors(con: Connection, guild_id: str, fact_ids: Sequence[int]) -> dict[int, str]:
    """Who wrote each fact first: its first history row's actor."""
    out: dict[int, str] = {}
    for chunk in chunks(list(dict.fromkeys(fact_ids))):
        rows = con.execute(
            "SELECT h.fact_id, h.actor FROM fact_history h WHERE h.id IN ("
            "SELECT min(id) FROM fact_history WHERE guild_id = ? "
            f"AND fact_id IN ({marks(len(chunk))}) GROUP BY fact_id)",
            [guild_id, *chunk],
        ).fetchall()
        out.update((int(r[0]), str(r[1])) for r in rows)
    return out


def facts_from_message(con: Connection, guild_id: str, message_id: str) -> list[Fact]:
    """The facts (any state) a message was a source of, oldest first."""
    rows = con.execute(
        f"SELECT {FACT_COLUMNS} FROM memory_facts WHERE guild_id = ? AND (source_message_id = ? "
        "OR id IN (SELECT fact_id FROM fact_sources WHERE guild_id = ? AND message_id = ?)) "
        "ORDER BY id",
        (guild_id, message_id, guild_id, message_id),
    ).fetchall()
    return [row_to_fact(r) for r in rows]


def facts_by_id(con: Connection, guild_id: str, fact_ids: Sequence[int]) -> dict[int, Fact]:
    out: dict[int, Fact] = {}
    for chunk in chunks(list(dict.fromkeys(fact_ids))):
        rows = con.execute(
            f"SELECT {FACT_COLUMNS} FROM memory_facts WHERE guild_id = ? "
            f"AND id IN ({marks(len(chunk))})",
            [guild_id, *chunk],
        ).fetchall()
        out.update((int(r["id"]), row_to_fact(r)) for r in rows)
    return out


def pending_from_message(con: Connection, guild_id: str, message_id: str) -> int:
    """Sensitive facts from the message that wait for its author's answer."""
    return int(
        con.execute(
            "SELECT count(*) FROM consent_queue WHERE guild_id = ? AND message_id = ?",
            (guild_id, message_id),
        ).fetchone()[0]
    )


def message_brief(
    con: Connection, guild_id: str, message_ids: Sequence[str]
) -> dict[str, SourceRow]:
    """Channel, author and time of stored messages (fact id 0)."""
    out: dict[str, SourceRow] = {}
    for chunk in chunks(list(dict.fromkeys(message_ids))):
        for r in con.execute(
            "SELECT id, channel_id, author_id, created_at FROM messages WHERE guild_id = ? "
            f"AND id IN ({marks(len(chunk))})",
            [guild_id, *chunk],
        ):
            out[str(r[0])] = SourceRow(0, str(r[0]), str(r[1]), str(r[2]), str(r[3]))
    return out
