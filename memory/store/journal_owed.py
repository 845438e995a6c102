"""SQL for owed journal lines: processed messages whose line is not in the
journal files yet (``journaled = 0`` on a ``done`` row; see migration m022).

The pipeline records ``journaled`` in the transaction that finishes the
message, so a line that could not be written (a full disk) is owed as surely
as the message is stored. SQLite only: with the journal rendered from
PostgreSQL nothing is appended and nothing is owed.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.db.core import Connection

_OWED = "state = 'done' AND journaled = 0"


@dataclass(frozen=True)
class OwedMessage:
    """One stored message as its journal line needs it."""

    seq: int
    id: str
    created_at: str
    author_name: str
    author_id: str
    guild_id: str
    channel_id: str
    content: str
    edited: bool


def count_owed(con: Connection) -> int:
    return int(con.execute(f"SELECT count(*) FROM messages WHERE {_OWED}").fetchone()[0])


def owed_after(con: Connection, after_seq: int, limit: int) -> list[OwedMessage]:
    """Owed messages with ``seq > after_seq``, in arrival order."""
    rows = con.execute(
        "SELECT seq, id, created_at, author_name, author_id, guild_id, channel_id, content, "
        f"edited_at FROM messages WHERE {_OWED} AND seq > ? ORDER BY seq LIMIT ?",
        (after_seq, limit),
    ).fetchall()
    return [
        OwedMessage(
            seq=int(r[0]),
            id=str(r[1]),
            created_at=str(r[2]),
            author_name=str(r[3] or ""),
            author_id=str(r[4]),
            guild_id=str(r[5] or ""),
            channel_id=str(r[6]),
            content=str(r[7]),
            edited=bool(r[8]),
        )
        for r in rows
    ]


def owe_again(
    con: Connection,
    created_at: str,
    author_id: str,
    guild_id: str | None = None,
    channel_id: str | None = None,
) -> int:
    """A line of the message at ``created_at`` by ``author_id`` (in that guild
    and channel, when known) was cut from the journal (a write cut short):
    owe it again. How many messages."""
    sql = (
        "UPDATE messages SET journaled = 0 WHERE state = 'done' AND journaled = 1 "
        "AND created_at = ? AND author_id = ?"
    )
    args: list[str] = [created_at, author_id]
    if guild_id is not None:
        sql += " AND coalesce(guild_id, '') = ?"
        args.append(guild_id)
    if channel_id is not None:
        sql += " AND channel_id = ?"
        args.append(channel_id)
    cur = con.execute(sql, args)
    return int(cur.rowcount or 0)
