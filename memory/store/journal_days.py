"""SQL for journal days rendered from the stored messages, and the dirty-day
marks that tell the journal file writer which days changed.

Marks are UTC dates (``YYYY-MM-DD``, the first ten characters of a message's
fixed-width ISO UTC ``created_at``): the store functions that write them do
not know the journal's time zone, and the writer maps each UTC date to the
(at most two) local days it overlaps. They are written in the transaction
that changes the messages, so a committed change is never missed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from memory.db.core import Connection


@dataclass(frozen=True)
class DayMessage:
    """One stored message as a journal line needs it."""

    created_at: str
    author_name: str
    author_id: str
    guild_id: str
    channel_id: str
    content: str
    edited: bool


def utc_date(created_at: str) -> str:
    return created_at[:10]


def mark_dirty(con: Connection, created_ats: Iterable[str]) -> None:
    """Mark the UTC dates of these message times as changed."""
    days = sorted({utc_date(t) for t in created_ats if t})
    if days:
        con.executemany(
            "INSERT INTO journal_dirty (day) VALUES (?) ON CONFLICT (day) DO NOTHING",
            [(d,) for d in days],
        )


def mark_dirty_where(con: Connection, where: str, params: Sequence[Any]) -> None:
    """Mark the UTC dates of the stored messages matching ``where`` (SQL over
    ``messages``), before they change or go."""
    rows = con.execute(
        f"SELECT DISTINCT substr(created_at, 1, 10) FROM messages WHERE {where}", list(params)
    ).fetchall()
    mark_dirty(con, [str(r[0]) for r in rows])


def take_dirty(con: Connection) -> list[str]:
    """The marked UTC dates, unmarked in the same transaction: a change that
    commits after this marks its date again for the next round."""
    days = [str(r[0]) for r in con.execute("SELECT day FROM journal_dirty ORDER BY day")]
    if days:
        con.executemany("DELETE FROM journal_dirty WHERE day = ?", [(d,) for d in days])
    return days


def first_at_or_after(con: Connection, start: str) -> str | None:
    """The ``created_at`` of the first stored message at or after ``start``."""
    row = con.execute(
        "SELECT created_at FROM messages WHERE created_at >= ? ORDER BY created_at LIMIT 1",
        (start,),
    ).fetchone()
    return None if row is None else str(row[0])


def last_before(con: Connection, end: str) -> str | None:
    """The ``created_at`` of the last stored message before ``end``."""
    row = con.execute(
        "SELECT created_at FROM messages WHERE created_at < ? ORDER BY created_at DESC LIMIT 1",
        (end,),
    ).fetchone()
    return None if row is None else str(row[0])


def range_size(con: Connection, start: str, end: str) -> tuple[int, int]:
    """(messages, characters of their names, ids and texts) in ``[start, end)``."""
    row = con.execute(
        "SELECT count(*), coalesce(sum(length(author_name) + length(author_id) "
        "+ length(coalesce(guild_id, '')) + length(channel_id) + length(content)), 0) "
        "FROM messages WHERE created_at >= ? AND created_at < ?",
        (start, end),
    ).fetchone()
    return int(row[0]), int(row[1])


def messages_between(con: Connection, start: str, end: str) -> list[DayMessage]:
    """Stored messages with ``start <= created_at < end``, in time order
    (arrival order on ties)."""
    rows = con.execute(
        "SELECT created_at, author_name, author_id, guild_id, channel_id, content, edited_at "
        "FROM messages WHERE created_at >= ? AND created_at < ? ORDER BY created_at, seq",
        (start, end),
    ).fetchall()
    return [
        DayMessage(
            created_at=str(r[0]),
            author_name=str(r[1] or ""),
            author_id=str(r[2]),
            guild_id=str(r[3] or ""),
            channel_id=str(r[4]),
            content=str(r[5]),
            edited=bool(r[6]),
        )
        for r in rows
    ]
