"""SQL for the durable record of Discord's message deletes and edits.

A row is written when the event is received and deleted in the transaction
that applies it; a row still present at start-up was received by a run that
died before applying it. A ``compact`` row is written in the transaction of
an erase and deleted once the database file was rewritten after it: one
present at start-up is a rewrite a crash kept from running.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from memory.db.core import Connection


@dataclass(frozen=True)
class LifecycleEvent:
    id: int
    kind: str  # "delete" | "edit" (``compact`` rows are not events)
    guild_id: str
    message_ids: list[str]
    content: str | None  # the new text of an edit
    edited_at: str | None


def record_event(
    con: Connection,
    kind: str,
    guild_id: str,
    message_ids: list[str],
    now: str,
    content: str | None = None,
    edited_at: str | None = None,
) -> int:
    cur = con.execute(
        "INSERT INTO lifecycle_events (kind, guild_id, message_ids, content, edited_at, "
        "received_at) VALUES (?, ?, ?, ?, ?, ?)",
        (kind, guild_id, json.dumps(message_ids), content, edited_at, now),
    )
    return int(cur.lastrowid)


def narrow_event(con: Connection, event_id: int, message_ids: list[str]) -> None:
    """Part of an event is applied: the row keeps only the ids still to do."""
    con.execute(
        "UPDATE lifecycle_events SET message_ids = ? WHERE id = ?",
        (json.dumps(message_ids), event_id),
    )


def finish_event(con: Connection, event_id: int | None) -> None:
    if event_id is not None:
        con.execute("DELETE FROM lifecycle_events WHERE id = ?", (event_id,))


def unapplied_events(con: Connection) -> list[LifecycleEvent]:
    """Events received and not applied, in the order they arrived."""
    out: list[LifecycleEvent] = []
    for r in con.execute(
        "SELECT id, kind, guild_id, message_ids, content, edited_at FROM lifecycle_events "
        "WHERE kind != 'compact' ORDER BY id"
    ):
        try:
            ids = [str(i) for i in json.loads(r[3])]
        except (TypeError, ValueError):
            ids = []
        out.append(LifecycleEvent(int(r[0]), str(r[1]), str(r[2]), ids, r[4], r[5]))
    return out


def owe_compaction(con: Connection, now: str) -> None:
    """An erase in this transaction: the file is to be rewritten after it."""
    con.execute(
        "INSERT INTO lifecycle_events (kind, guild_id, received_at) VALUES ('compact', '', ?)",
        (now,),
    )


def compaction_owed(con: Connection) -> int | None:
    """The newest erase waiting for a rewrite of the file (its row id), or None."""
    row = con.execute("SELECT max(id) FROM lifecycle_events WHERE kind = 'compact'").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def compaction_paid(con: Connection, upto: int) -> None:
    """A rewrite that started after erase ``upto`` committed has run."""
    con.execute("DELETE FROM lifecycle_events WHERE kind = 'compact' AND id <= ?", (upto,))
