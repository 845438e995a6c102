"""SQL for procedures: the guild's standing instructions to the bot, per guild or channel.

Each change writes its ``procedure_change`` action-log row in the same
transaction, so the log never disagrees with the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory.db.core import Connection
from memory.db.sql import marks
from memory.models import Procedure
from memory.store import ops as store_ops

_COLS = "id, guild_id, channel_id, text, author, created_at"


def _row(r: Any) -> Procedure:
    return Procedure(
        id=int(r["id"]),
        guild_id=r["guild_id"],
        channel_id=r["channel_id"],
        text=r["text"],
        author=r["author"],
        created_at=r["created_at"],
    )


def in_scope(con: Connection, guild_id: str, channel_id: str | None) -> list[Procedure]:
    """One scope's procedures, oldest first: the guild's (``channel_id`` None) or a channel's."""
    if channel_id is None:
        rows = con.execute(
            f"SELECT {_COLS} FROM procedures WHERE guild_id = ? AND channel_id IS NULL ORDER BY id",
            (guild_id,),
        ).fetchall()
    else:
        rows = con.execute(
            f"SELECT {_COLS} FROM procedures WHERE guild_id = ? AND channel_id = ? ORDER BY id",
            (guild_id, channel_id),
        ).fetchall()
    return [_row(r) for r in rows]


def of_guild(con: Connection, guild_id: str) -> list[Procedure]:
    """Every procedure of a guild: guild-wide first, then by channel, oldest first."""
    rows = con.execute(
        f"SELECT {_COLS} FROM procedures WHERE guild_id = ? "
        "ORDER BY channel_id IS NOT NULL, channel_id, id",
        (guild_id,),
    ).fetchall()
    return [_row(r) for r in rows]


def for_channels(con: Connection, guild_id: str, channel_ids: Sequence[str]) -> list[Procedure]:
    """The guild-wide procedures, then those of ``channel_ids`` (in that order), oldest first."""
    found = in_scope(con, guild_id, None)
    ids = list(dict.fromkeys(c for c in channel_ids if c))
    if not ids:
        return found
    rows = con.execute(
        f"SELECT {_COLS} FROM procedures WHERE guild_id = ? "
        f"AND channel_id IN ({marks(len(ids))}) ORDER BY id",
        [guild_id, *ids],
    ).fetchall()
    by_channel = sorted((_row(r) for r in rows), key=lambda p: ids.index(p.channel_id or ""))
    return found + by_channel


def add(
    con: Connection,
    guild_id: str,
    channel_id: str | None,
    text: str,
    author: str,
    now: str,
    *,
    limit: int,
) -> Procedure | str:
    """The new procedure, or why it was refused (the scope is full, or it is already there)."""
    current = in_scope(con, guild_id, channel_id)
    if any(p.text.casefold() == text.casefold() for p in current):
        return "duplicate"
    if len(current) >= limit:
        return "full"
    cur = con.execute(
        "INSERT INTO procedures (guild_id, channel_id, text, author, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (guild_id, channel_id, text, author, now),
    )
    added = Procedure(int(cur.lastrowid), guild_id, channel_id, text, author, now)
    _log(con, "add", added, author, now)
    return added


def remove(
    con: Connection, guild_id: str, procedure_id: int, actor: str, now: str
) -> Procedure | None:
    """The removed procedure; None if the guild has none with that id."""
    row = con.execute(
        f"SELECT {_COLS} FROM procedures WHERE guild_id = ? AND id = ?", (guild_id, procedure_id)
    ).fetchone()
    if row is None:
        return None
    gone = _row(row)
    con.execute("DELETE FROM procedures WHERE id = ?", (procedure_id,))
    _log(con, "remove", gone, actor, now)
    return gone


def _log(con: Connection, op: str, p: Procedure, actor: str, now: str) -> None:
    where = f"channel {p.channel_id}" if p.channel_id else "guild-wide"
    store_ops.log_action(
        con,
        "procedure_change",
        f"procedure {p.id} {'added' if op == 'add' else 'removed'} ({where}) by {actor}",
        now,
        guild_id=p.guild_id,
        detail={
            "op": op,
            "procedure_id": p.id,
            "channel_id": p.channel_id,
            "text": p.text,
            "actor": actor,
        },
    )
