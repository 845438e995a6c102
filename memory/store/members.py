"""SQL for what memory keeps about one member of a guild: the facts about
them, their own messages and how many there are per channel."""

from __future__ import annotations

from collections.abc import Sequence

from memory.db.core import Connection
from memory.db.sql import chunks, marks
from memory.models import Fact, StoredMessage
from memory.store.facts import FACT_COLUMNS, row_to_fact
from memory.store.messages import MESSAGE_COLUMNS, row_to_message


def facts_about(con: Connection, guild_id: str, user_id: str, limit: int) -> list[Fact]:
    """Facts whose subject is the member, current ones first, newest first."""
    rows = con.execute(
        f"SELECT {FACT_COLUMNS} FROM memory_facts WHERE guild_id = ? AND subject = ? "
        "ORDER BY is_active DESC, id DESC LIMIT ?",
        (guild_id, user_id, limit),
    ).fetchall()
    return [row_to_fact(r) for r in rows]


def is_known(con: Connection, guild_id: str, user_id: str) -> bool:
    """Whether the guild holds anything of the member: a member row, facts
    about them, their messages or a fact waiting for their consent."""
    row = con.execute(
        "SELECT EXISTS (SELECT 1 FROM members WHERE guild_id = ? AND user_id = ?) "
        "OR EXISTS (SELECT 1 FROM memory_facts WHERE guild_id = ? AND subject = ?) "
        "OR EXISTS (SELECT 1 FROM messages WHERE guild_id = ? AND author_id = ?) "
        "OR EXISTS (SELECT 1 FROM consent_queue WHERE guild_id = ? AND user_id = ?)",
        (guild_id, user_id) * 4,
    ).fetchone()
    return bool(row[0])


def message_counts(con: Connection, guild_id: str, user_id: str) -> dict[str, int]:
    """The member's stored messages per channel."""
    return {
        str(r[0]): int(r[1])
        for r in con.execute(
            "SELECT channel_id, count(*) FROM messages WHERE guild_id = ? AND author_id = ? "
            "GROUP BY channel_id ORDER BY channel_id",
            (guild_id, user_id),
        )
    }


def messages_of(con: Connection, guild_id: str, user_id: str, limit: int) -> list[StoredMessage]:
    """The member's own stored messages, oldest first."""
    rows = con.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE guild_id = ? AND author_id = ? "
        "ORDER BY created_at, seq LIMIT ?",
        (guild_id, user_id, limit),
    ).fetchall()
    return [row_to_message(r) for r in rows]


def authors_of(con: Connection, guild_id: str, message_ids: Sequence[str]) -> dict[str, str]:
    """Message id → author id, for the stored ones among ``message_ids``."""
    found: dict[str, str] = {}
    for chunk in chunks(list(dict.fromkeys(message_ids))):
        for r in con.execute(
            f"SELECT id, author_id FROM messages WHERE guild_id = ? AND id IN ({marks(len(chunk))})",
            [guild_id, *chunk],
        ):
            found[str(r[0])] = str(r[1])
    return found
