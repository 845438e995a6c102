"""SQL for the durable inbox: messages, and the guild/channel/member rows
they introduce. Functions take a connection and run inside the transaction
that ``Database.write``/``read`` opened.

Every query that returns guild data filters by ``guild_id`` in SQL.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memory.db.core import Connection
from memory.db.sql import chunks, dialect_of, marks, rows_in
from memory.models import FailedMessage, IncomingMessage, StoredMessage
from memory.store.journal_days import mark_dirty, mark_dirty_where
from memory.store.reply_context import erase_refs, message_refs
from memory.store.usage import count, count_messages
from memory.store.vectors import delete_message_vectors_index

# Rows in one multi-row INSERT on PostgreSQL (12 values each for messages).
PG_ROWS_PER_STATEMENT = 500

MESSAGE_COLUMNS = (
    "id, guild_id, channel_id, author_id, author_name, content, created_at, source, is_bot, "
    "state, reply_to_id, edited_at"
)


def row_to_message(row: Any) -> StoredMessage:
    return StoredMessage(
        id=row["id"],
        guild_id=row["guild_id"],
        channel_id=row["channel_id"],
        author_id=row["author_id"],
        author_name=row["author_name"],
        content=row["content"],
        created_at=row["created_at"],
        source=row["source"],
        is_bot=bool(row["is_bot"]),
        state=row["state"],
        reply_to_id=row["reply_to_id"],
        edited_at=row["edited_at"],
    )


# -- messages (the durable inbox) ---------------------------------------------


def insert_messages(
    con: Connection, msgs: Sequence[IncomingMessage], received_at: str
) -> list[bool]:
    """INSERT OR IGNORE each message; True where the row is new.

    A handful of set-based statements for the whole group (rows travel as one
    JSON array), not several statements per message: this is the
    acknowledgement path, and every statement is a GIL hand-off for the writer
    thread while the event loop is busy.
    """
    ids = [m.id for m in msgs]
    existing = {r[0] for r in rows_in(con, "SELECT id FROM messages WHERE id IN ({in})", ids)}
    out: list[bool] = []
    rows: list[list[Any]] = []
    for m in msgs:
        new = m.id not in existing
        out.append(new)
        if new:
            existing.add(m.id)  # a repeated id later in the same group is not new
            rows.append(
                [
                    m.id,
                    m.guild_id,
                    m.channel_id,
                    m.author_id,
                    m.author_name,
                    m.content,
                    m.created_at,
                    m.source,
                    int(m.is_bot),
                    m.reply_to_id,
                    m.edited_at,
                ]
            )
    if not rows:
        return out
    mark_dirty(con, [r[6] for r in rows])
    # The daily series count each message on its own day, in this transaction.
    count_messages(con, [(r[1], r[6]) for r in rows], received_at)
    if dialect_of(con) == "postgresql":
        _insert_rows_pg(con, rows, received_at)
        return out
    payload = json.dumps(rows, ensure_ascii=False)
    con.execute(
        "INSERT OR IGNORE INTO messages (id, guild_id, channel_id, author_id, author_name, "
        "content, created_at, source, is_bot, reply_to_id, edited_at, received_at) "
        "SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, "
        "value ->> 6, value ->> 7, value ->> 8, value ->> 9, value ->> 10, ? FROM json_each(?) "
        "ORDER BY key",
        (received_at, payload),
    )
    # The latest name of each author wins (rows are applied in message order).
    con.execute(
        "INSERT INTO members (guild_id, user_id, display_name, updated_at) "
        "SELECT value ->> 1, value ->> 3, value ->> 4, ? FROM json_each(?) "
        "WHERE value ->> 1 IS NOT NULL ORDER BY key "
        "ON CONFLICT (guild_id, user_id) DO UPDATE SET display_name = excluded.display_name, "
        "updated_at = excluded.updated_at",
        (received_at, payload),
    )
    con.execute(
        "INSERT INTO channels (guild_id, channel_id, updated_at) "
        "SELECT DISTINCT value ->> 1, value ->> 2, ? FROM json_each(?) "
        "WHERE value ->> 1 IS NOT NULL "
        "ON CONFLICT (guild_id, channel_id) DO NOTHING",
        (received_at, payload),
    )
    con.execute(
        "INSERT INTO guilds (guild_id, updated_at) "
        "SELECT DISTINCT value ->> 1, ? FROM json_each(?) WHERE value ->> 1 IS NOT NULL "
        "ON CONFLICT (guild_id) DO NOTHING",
        (received_at, payload),
    )
    return out


def _insert_rows_pg(con: Connection, rows: list[list[Any]], received_at: str) -> None:
    """``insert_messages``'s writes on PostgreSQL: one multi-row statement per
    table and chunk (a statement per row would be a round trip to the server
    per row). An upsert may touch a row once per statement, so the latest
    name of each author is picked here. Rows go in key order, table after
    table (``GuildOps.set_names`` locks them in the same order)."""
    columns = (
        "id, guild_id, channel_id, author_id, author_name, content, created_at, source, "
        "is_bot, reply_to_id, edited_at, received_at"
    )
    names = {(r[1], r[3]): r[4] for r in rows if r[1] is not None}
    statements: list[tuple[str, str, list[tuple[Any, ...]]]] = [
        (
            f"INSERT OR IGNORE INTO messages ({columns}) VALUES ",
            "",
            [(*r, received_at) for r in rows],
        ),
        (
            "INSERT INTO members (guild_id, user_id, display_name, updated_at) VALUES ",
            " ON CONFLICT (guild_id, user_id) DO UPDATE SET display_name = "
            "excluded.display_name, updated_at = excluded.updated_at",
            [(g, u, name, received_at) for (g, u), name in sorted(names.items())],
        ),
        (
            "INSERT INTO channels (guild_id, channel_id, updated_at) VALUES ",
            " ON CONFLICT (guild_id, channel_id) DO NOTHING",
            [(g, c, received_at) for g, c in sorted({(r[1], r[2]) for r in rows if r[1]})],
        ),
        (
            "INSERT INTO guilds (guild_id, updated_at) VALUES ",
            " ON CONFLICT (guild_id) DO NOTHING",
            [(g, received_at) for g in sorted({r[1] for r in rows if r[1]})],
        ),
    ]
    for head, tail, values in statements:
        for chunk in chunks(values, PG_ROWS_PER_STATEMENT):
            width = len(chunk[0])
            holes = ", ".join("(" + ", ".join("?" * width) + ")" for _ in chunk)
            con.execute(head + holes + tail, [v for row in chunk for v in row])


def upsert_member(con: Connection, guild_id: str, user_id: str, name: str, now: str) -> None:
    con.execute(
        "INSERT INTO members (guild_id, user_id, display_name, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (guild_id, user_id) DO UPDATE SET display_name = excluded.display_name, "
        "updated_at = excluded.updated_at",
        (guild_id, user_id, name, now),
    )


def set_guild_name(con: Connection, guild_id: str, name: str | None, now: str) -> None:
    con.execute(
        "INSERT INTO guilds (guild_id, name, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (guild_id) DO UPDATE SET name = coalesce(excluded.name, guilds.name), "
        "updated_at = excluded.updated_at",
        (guild_id, name, now),
    )


def set_channel_name(
    con: Connection, guild_id: str, channel_id: str, name: str | None, now: str
) -> None:
    con.execute(
        "INSERT INTO channels (guild_id, channel_id, name, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (guild_id, channel_id) DO UPDATE SET "
        "name = coalesce(excluded.name, channels.name), updated_at = excluded.updated_at",
        (guild_id, channel_id, name, now),
    )


def message_states(con: Connection, ids: Sequence[str]) -> dict[str, tuple[str, bool]]:
    """id → (state, journaled) for the ids that exist."""
    sql = "SELECT id, state, journaled FROM messages WHERE id IN ({in})"
    return {r["id"]: (r["state"], bool(r["journaled"])) for r in rows_in(con, sql, list(ids))}


def mark_messages(
    con: Connection, ids: Sequence[str], state: str, processed_at: str, reason: str | None = None
) -> None:
    con.executemany(
        "UPDATE messages SET state = ?, state_reason = ?, processed_at = ?, "
        "attempts = attempts + 1 WHERE id = ?",
        [(state, reason, processed_at, i) for i in ids],
    )


def finish_message(
    con: Connection,
    message_id: str,
    state: str,
    processed_at: str,
    reason: str | None = None,
    *,
    journaled: bool = False,
) -> None:
    """Record the outcome of processing one message (and that its journal line
    is written), in the transaction that wrote its facts."""
    con.execute(
        "UPDATE messages SET state = ?, state_reason = ?, processed_at = ?, retry_at = NULL, "
        "attempts = attempts + 1, journaled = max(journaled, ?) WHERE id = ?",
        (state, reason, processed_at, int(journaled), message_id),
    )


# -- failures: waiting for a retry ('retry') or given up ('failed') --------------------


def failed_attempts(con: Connection, message_id: str) -> int:
    row = con.execute("SELECT failed_attempts FROM messages WHERE id = ?", (message_id,)).fetchone()
    return int(row[0]) if row else 0


def record_failure(
    con: Connection,
    message_id: str,
    state: str,
    reason: str,
    processed_at: str,
    retry_at: str | None,
    *,
    journaled: bool = False,
) -> None:
    """A failed processing attempt: ``state`` is 'retry' (due at ``retry_at``) or 'failed'."""
    con.execute(
        "UPDATE messages SET state = ?, state_reason = ?, processed_at = ?, retry_at = ?, "
        "attempts = attempts + 1, failed_attempts = failed_attempts + 1, "
        "journaled = max(journaled, ?) WHERE id = ?",
        (state, reason[:500], processed_at, retry_at, int(journaled), message_id),
    )
    if state == "failed":
        row = con.execute("SELECT guild_id FROM messages WHERE id = ?", (message_id,)).fetchone()
        count(con, row[0] if row else None, processed_at, "messages_failed")


def due_retries(
    con: Connection, now: str, limit: int, after_seq: int = 0
) -> list[tuple[int, StoredMessage]]:
    # The retry loop asks often; through the partial index, the answer costs
    # what is due, not a scan of the table.
    rows = con.execute(
        f"SELECT seq, {MESSAGE_COLUMNS} FROM messages INDEXED BY messages_retry_due "
        "WHERE state = 'retry' AND retry_at <= ? AND seq > ? ORDER BY seq LIMIT ?",
        (now, after_seq, limit),
    ).fetchall()
    return [(int(r["seq"]), row_to_message(r)) for r in rows]


def next_retry_after(con: Connection, now: str) -> str | None:
    """When the next retry not yet due is due (None: none waits)."""
    row = con.execute(
        "SELECT min(retry_at) FROM messages WHERE state = 'retry' AND retry_at > ?", (now,)
    ).fetchone()
    return row[0] if row else None


def failed_messages(
    con: Connection, guild_id: str | None, states: Sequence[str], limit: int
) -> list[FailedMessage]:
    marks = ",".join("?" * len(states))
    args: list[Any] = [*states]
    where = ""
    if guild_id is not None:
        where = " AND guild_id = ?"
        args.append(guild_id)
    rows = con.execute(
        "SELECT id, guild_id, channel_id, author_name, created_at, content, state, "
        "state_reason, failed_attempts, retry_at FROM messages INDEXED BY messages_unfinished "
        f"WHERE state IN ({marks}) AND state != 'done'{where} ORDER BY seq LIMIT ?",
        (*args, limit),
    ).fetchall()
    return [
        FailedMessage(
            id=r["id"],
            guild_id=r["guild_id"],
            channel_id=r["channel_id"],
            author_name=r["author_name"],
            created_at=r["created_at"],
            content=r["content"],
            state=r["state"],
            reason=r["state_reason"],
            attempts=int(r["failed_attempts"]),
            retry_at=r["retry_at"],
        )
        for r in rows
    ]


def requeue_failed(con: Connection, now: str, guild_id: str | None = None) -> int:
    """Give failed messages a fresh set of attempts, due now; how many."""
    where = "" if guild_id is None else " AND guild_id = ?"
    cur = con.execute(
        "UPDATE messages INDEXED BY messages_unfinished SET state = 'retry', retry_at = ?, "
        f"failed_attempts = 0 WHERE state = 'failed' AND state != 'done'{where}",
        (now,) if guild_id is None else (now, guild_id),
    )
    return int(cur.rowcount)


def unfinished_counts(con: Connection, guild_ids: Sequence[str] | None = None) -> dict[str, int]:
    """Messages per state other than done and skipped (of ``guild_ids``, or
    all): pending, dropped, retry, failed. Through the partial index of
    unfinished rows, so it costs what is unfinished, not the table."""
    where = ""
    args: list[Any] = []
    if guild_ids is not None:
        where = f" AND guild_id IN ({','.join('?' * len(guild_ids))})"
        args = list(guild_ids)
    rows = con.execute(
        "SELECT state, count(*) FROM messages INDEXED BY messages_unfinished "
        "WHERE state IN ('pending', 'dropped', 'retry', 'failed') AND state != 'done'"
        f"{where} GROUP BY state",
        args,
    )
    return {r[0]: int(r[1]) for r in rows}


def mark_journaled(con: Connection, ids: Sequence[str]) -> None:
    con.executemany("UPDATE messages SET journaled = 1 WHERE id = ?", [(i,) for i in ids])


def unfinished_messages(
    con: Connection, limit: int, after_seq: int = 0, states: Sequence[str] = ("pending", "dropped")
) -> list[tuple[int, StoredMessage]]:
    marks = ",".join("?" * len(states))
    # Through the partial index of unfinished rows: a scan in seq order
    # would read the whole table when (as usual) nothing is unfinished.
    rows = con.execute(
        f"SELECT seq, {MESSAGE_COLUMNS} FROM messages INDEXED BY messages_unfinished "
        f"WHERE state IN ({marks}) AND state != 'done' AND seq > ? ORDER BY seq LIMIT ?",
        (*states, after_seq, limit),
    ).fetchall()
    return [(int(r["seq"]), row_to_message(r)) for r in rows]


def get_message(con: Connection, guild_id: str, message_id: str) -> StoredMessage | None:
    row = con.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE guild_id = ? AND id = ?",
        (guild_id, message_id),
    ).fetchone()
    return row_to_message(row) if row else None


def messages_by_seq(
    con: Connection, guild_id: str, seqs: Sequence[int]
) -> dict[int, StoredMessage]:
    """This guild's messages among ``seqs``, by primary key. Without ``+`` SQLite
    (no ANALYZE statistics) answers a long ``IN`` list by walking the guild's
    whole ``messages_guild_author`` index: a cost that grows with the guild
    rather than with the seqs asked for."""
    sql = f"SELECT seq, {MESSAGE_COLUMNS} FROM messages WHERE +guild_id = ? AND seq IN ({{in}})"
    # By position (the columns are StoredMessage's fields in order): search
    # reads hundreds of rows per query, and a lookup by name costs more.
    return {
        int(r[0]): StoredMessage(
            r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], bool(r[9]), r[10], r[11], r[12]
        )
        for r in rows_in(con, sql, list(seqs), before=[guild_id])
    }


def trace_ref_sql(con: Connection) -> str:
    """The message id a message trace's ``score_parts`` JSON names (``$.ref``),
    NULL when it names none or is not JSON."""
    if dialect_of(con) == "postgresql":
        # A pattern, not a cast: a cast of text that is not JSON is an error.
        return 'substring(score_parts from \'"ref": *"?([^",}]*)\')'
    return "CASE WHEN json_valid(score_parts) THEN json_extract(score_parts, '$.ref') END"


def erase_messages(con: Connection, guild_id: str, ids: Sequence[str], seqs: Sequence[int]) -> int:
    """Erase messages of one guild (ids, with their inbox ``seqs``): their vectors,
    the traces of replies to them or by them and the traces that quote them
    (another reply retrieved them), their links in the fact history, and the
    rows (FTS follows by trigger). Returns the traces deleted."""
    for part in chunks(list(seqs)):
        delete_message_vectors_index(con, part)
        con.execute(f"DELETE FROM message_vectors WHERE message_seq IN ({marks(len(part))})", part)
    traces = 0
    for chunk in chunks(list(ids)):
        held = marks(len(chunk))
        traces += con.execute(
            f"DELETE FROM memory_traces WHERE guild_id = ? AND (message_id IN ({held}) "
            f"OR reply_id IN ({held}) OR (fact_id IS NULL AND {trace_ref_sql(con)} IN ({held})))",
            [guild_id, *chunk, *chunk, *chunk],
        ).rowcount
        con.execute(
            f"UPDATE fact_history SET source_message_id = NULL WHERE guild_id = ? "
            f"AND source_message_id IN ({held})",
            [guild_id, *chunk],
        )
        mark_dirty_where(con, f"guild_id = ? AND id IN ({held})", [guild_id, *chunk])
        # A text withheld for its author's consent goes with its message.
        con.execute(
            f"DELETE FROM held_messages WHERE guild_id = ? AND message_id IN ({held})",
            [guild_id, *chunk],
        )
        con.execute(
            f"DELETE FROM messages WHERE guild_id = ? AND id IN ({held})", [guild_id, *chunk]
        )
        erase_refs(con, guild_id, message_refs(chunk))
    return traces


# -- catch-up: where each channel's stored history ends, and what it holds there -------------


def newest_in_channels(
    con: Connection, guild_id: str, channel_ids: Sequence[str]
) -> dict[str, tuple[str, str]]:
    """channel id → (id, created_at) of the newest message stored from
    Discord in each of ``channel_ids`` (channels with none are left out).
    Voice transcripts do not count: their ids are made here, Discord has no
    such message. One seek per channel down (guild, channel, time), not a
    scan of the guild's messages."""
    out: dict[str, tuple[str, str]] = {}
    for channel_id in dict.fromkeys(channel_ids):
        row = con.execute(
            "SELECT id, created_at FROM messages WHERE guild_id = ? AND channel_id = ? "
            "AND source != 'voice' ORDER BY created_at DESC LIMIT 1",
            (guild_id, channel_id),
        ).fetchone()
        if row is not None:
            out[channel_id] = (str(row[0]), str(row[1]))
    return out


def stored_in_channel(
    con: Connection, guild_id: str, channel_id: str, since: str, limit: int
) -> dict[str, str]:
    """id → content of the messages from Discord stored in a channel with
    ``created_at`` at ``since`` or later: the oldest ``limit`` of them."""
    rows = con.execute(
        "SELECT id, content FROM messages WHERE guild_id = ? AND channel_id = ? "
        "AND created_at >= ? AND source != 'voice' ORDER BY created_at LIMIT ?",
        (guild_id, channel_id, since, limit),
    ).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}
