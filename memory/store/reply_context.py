"""SQL for reply contexts: what one reply's model saw, kept for the operator.

A context is bounded JSON (see ``memory.reply.record``). Its refs name the
messages (``m:<id>``), facts (``f:<id>``) and members (``u:<id>``) whose
words it holds: erasing any of them erases every context that holds them.
A guild keeps its newest ``keep`` contexts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from memory.db.core import Connection
from memory.db.sql import chunks, marks

DEFAULT_KEEP = 500


def add_context(
    con: Connection,
    *,
    guild_id: str,
    channel_id: str | None,
    message_id: str,
    reply_id: str | None,
    context: dict[str, Any],
    refs: Iterable[str],
    now: str,
    keep: int = DEFAULT_KEEP,
) -> int:
    cur = con.execute(
        "INSERT INTO reply_contexts (guild_id, channel_id, message_id, reply_id, context, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (guild_id, channel_id, message_id, reply_id, json.dumps(context), now),
    )
    context_id = int(cur.lastrowid)
    con.executemany(
        "INSERT INTO reply_context_refs (context_id, guild_id, ref) VALUES (?, ?, ?)",
        [(context_id, guild_id, ref) for ref in sorted(set(refs))],
    )
    row = con.execute(
        "SELECT id FROM reply_contexts WHERE guild_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?",
        (guild_id, max(1, keep)),
    ).fetchone()
    if row is not None:
        con.execute(
            "DELETE FROM reply_contexts WHERE guild_id = ? AND id <= ?", (guild_id, int(row[0]))
        )
    return context_id


def context_for_message(con: Connection, guild_id: str, message_id: str) -> dict[str, Any] | None:
    """The newest context of the reply to ``message_id`` (or of reply ``message_id``)."""
    row = con.execute(
        "SELECT context, reply_id, created_at FROM reply_contexts WHERE guild_id = ? "
        "AND (message_id = ? OR reply_id = ?) ORDER BY id DESC LIMIT 1",
        (guild_id, message_id, message_id),
    ).fetchone()
    if row is None:
        return None
    context: dict[str, Any] = json.loads(row["context"])
    context["reply_id"] = row["reply_id"]
    context["created_at"] = row["created_at"]
    return context


def erase_refs(con: Connection, guild_id: str, refs: Sequence[str]) -> int:
    """Delete the contexts that hold any of ``refs``; how many went."""
    gone = 0
    for chunk in chunks(list(refs)):
        gone += con.execute(
            f"DELETE FROM reply_contexts WHERE id IN (SELECT context_id FROM reply_context_refs "
            f"WHERE guild_id = ? AND ref IN ({marks(len(chunk))}))",
            [guild_id, *chunk],
        ).rowcount
    return int(gone)


def message_refs(ids: Iterable[str]) -> list[str]:
    return [f"m:{i}" for i in ids]


def fact_refs(ids: Iterable[int]) -> list[str]:
    return [f"f:{i}" for i in ids]
