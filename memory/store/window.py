"""SQL for the short-term conversation window: a channel's latest messages
from the inbox and the bot's own posted replies (the ``bot_replies`` table,
which nothing searches, embeds or extracts).

Every query filters by ``guild_id`` in SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory.db.core import Connection
from memory.db.sql import marks

# Before the trigger: an earlier time, or the same millisecond and a smaller
# snowflake (ids of one millisecond have the same length, so text order is
# number order). The plain ``created_at <= ?`` keeps the index's range scan.
_BEFORE = "created_at <= ? AND (created_at < ? OR length({id}) < length(?) OR {id} < ?)"


def _before(column: str, before: str, before_id: str) -> tuple[str, tuple[str, ...]]:
    return _BEFORE.format(id=column), (before, before, before_id, before_id)


@dataclass(frozen=True)
class WindowRow:
    """One message of a channel's recent history, as the window reads it."""

    message_id: str
    channel_id: str
    author_id: str
    author_name: str
    content: str
    created_at: str
    from_bot_itself: bool  # one of this bot's own replies (an assistant turn)


def recent_messages(
    con: Connection,
    guild_id: str,
    channel_id: str,
    before: str,
    before_id: str,
    exclude_ids: Sequence[str],
    limit: int,
) -> list[WindowRow]:
    """The channel's last ``limit`` non-empty inbox messages before (``before``,
    ``before_id``), newest first (through the guild/channel/time index)."""
    skip = list(exclude_ids) or [""]
    cond, args = _before("id", before, before_id)
    rows = con.execute(
        "SELECT id, channel_id, author_id, author_name, content, created_at FROM messages "
        "INDEXED BY messages_guild_channel_time "
        f"WHERE guild_id = ? AND channel_id = ? AND {cond} AND content != '' "
        f"AND id NOT IN ({marks(len(skip))}) ORDER BY created_at DESC, id DESC LIMIT ?",
        (guild_id, channel_id, *args, *skip, limit),
    ).fetchall()
    return [_row(r, False) for r in rows]


def recent_bot_replies(
    con: Connection, guild_id: str, channel_id: str, before: str, before_id: str, limit: int
) -> list[WindowRow]:
    """The bot's last ``limit`` replies in the channel before (``before``,
    ``before_id``), newest first."""
    cond, args = _before("message_id", before, before_id)
    rows = con.execute(
        "SELECT message_id AS id, channel_id, '' AS author_id, '' AS author_name, content, "
        f"created_at FROM bot_replies WHERE guild_id = ? AND channel_id = ? AND {cond} "
        "ORDER BY created_at DESC, message_id DESC LIMIT ?",
        (guild_id, channel_id, *args, limit),
    ).fetchall()
    return [_row(r, True) for r in rows]


def stored_message(con: Connection, guild_id: str, message_id: str) -> WindowRow | None:
    """One inbox message by id (a thread's starter, which lives in the parent channel)."""
    row = con.execute(
        "SELECT id, channel_id, author_id, author_name, content, created_at FROM messages "
        "WHERE guild_id = ? AND id = ?",
        (guild_id, message_id),
    ).fetchone()
    return _row(row, False) if row is not None else None


def _row(r: Any, own: bool) -> WindowRow:
    return WindowRow(
        message_id=r["id"],
        channel_id=r["channel_id"],
        author_id=r["author_id"],
        author_name=r["author_name"],
        content=r["content"],
        created_at=r["created_at"],
        from_bot_itself=own,
    )


def insert_bot_reply(
    con: Connection,
    *,
    guild_id: str,
    channel_id: str,
    message_id: str,
    reply_to_id: str | None,
    to_user_id: str,
    content: str,
    created_at: str,
    keep_per_channel: int,
) -> None:
    """Record a posted reply and keep only the channel's newest ``keep_per_channel``:
    no window reads further back, so older replies are of no use."""
    con.execute(
        "INSERT OR IGNORE INTO bot_replies (message_id, guild_id, channel_id, reply_to_id, "
        "to_user_id, content, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (message_id, guild_id, channel_id, reply_to_id, to_user_id, content, created_at),
    )
    con.execute(
        "DELETE FROM bot_replies WHERE guild_id = ? AND channel_id = ? AND message_id IN ("
        "SELECT message_id FROM bot_replies WHERE guild_id = ? AND channel_id = ? "
        "ORDER BY created_at DESC LIMIT -1 OFFSET ?)",
        (guild_id, channel_id, guild_id, channel_id, keep_per_channel),
    )


def forget_replies_to(con: Connection, guild_id: str, user_id: str) -> int:
    """Erase the bot's replies to a member (they answer, and may repeat, that member)."""
    cur = con.execute(
        "DELETE FROM bot_replies WHERE guild_id = ? AND to_user_id = ?", (guild_id, user_id)
    )
    return int(cur.rowcount)
