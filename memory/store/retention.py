"""SQL for retention: timers for a member who left or a guild that removed
the bot, and the purge of everything a guild's memory holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory.db.changes import SettingsChanged, record
from memory.db.core import Connection
from memory.db.sql import chunks, dialect_of
from memory.db.sqlite.driver import ordinary_tables
from memory.store.journal_days import mark_dirty_where
from memory.store.vectors import delete_fact_vectors_index, delete_message_vectors_index

GUILD = ""  # the user_id of a guild's own timer

# Kept by a purge: consent, not memory (dropping it would silently turn
# voice transcription of these members back on if the bot is invited again).
KEPT_BY_PURGE = ("voice_opt_outs",)


@dataclass(frozen=True)
class RetentionTimer:
    guild_id: str
    user_id: str  # "" for the guild itself
    action: str  # "forget" | "purge"
    due_at: str


def set_timer(
    con: Connection, guild_id: str, user_id: str, action: str, due_at: str, now: str
) -> None:
    """(Re)start a timer; a later leave replaces an earlier one."""
    con.execute(
        "INSERT INTO retention_timers (guild_id, user_id, action, due_at, created_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (guild_id, user_id) DO UPDATE SET "
        "action = excluded.action, due_at = excluded.due_at, created_at = excluded.created_at",
        (guild_id, user_id, action, due_at, now),
    )


def cancel_timer(con: Connection, guild_id: str, user_id: str) -> RetentionTimer | None:
    """Delete a timer; the one deleted, or None."""
    row = con.execute(
        "DELETE FROM retention_timers WHERE guild_id = ? AND user_id = ? "
        "RETURNING guild_id, user_id, action, due_at",
        (guild_id, user_id),
    ).fetchone()
    return None if row is None else RetentionTimer(*(str(v) for v in row))


def finish_timer(con: Connection, timer: RetentionTimer) -> bool:
    """Delete a timer that ran, unless it was set again meanwhile; whether it was."""
    cur = con.execute(
        "DELETE FROM retention_timers WHERE guild_id = ? AND user_id = ? AND due_at = ?",
        (timer.guild_id, timer.user_id, timer.due_at),
    )
    return bool(cur.rowcount)


def timers(
    con: Connection, guild_id: str | None = None, due_by: str | None = None
) -> list[RetentionTimer]:
    """Timers (of one guild; due by a time), soonest first."""
    sql = "SELECT guild_id, user_id, action, due_at FROM retention_timers WHERE 1 = 1"
    args: list[Any] = []
    if guild_id is not None:
        sql += " AND guild_id = ?"
        args.append(guild_id)
    if due_by is not None:
        sql += " AND due_at <= ?"
        args.append(due_by)
    return [
        RetentionTimer(*(str(v) for v in r)) for r in con.execute(sql + " ORDER BY due_at", args)
    ]


def has_timer(con: Connection, guild_id: str, user_id: str) -> bool:
    row = con.execute(
        "SELECT 1 FROM retention_timers WHERE guild_id = ? AND user_id = ?", (guild_id, user_id)
    ).fetchone()
    return row is not None


def still_due(con: Connection, timer: RetentionTimer) -> bool:
    row = con.execute(
        "SELECT 1 FROM retention_timers WHERE guild_id = ? AND user_id = ? AND due_at = ?",
        (timer.guild_id, timer.user_id, timer.due_at),
    ).fetchone()
    return row is not None


def _guild_tables(con: Connection) -> list[str]:
    """Ordinary tables with a ``guild_id`` column (not virtual tables, whose
    rows go with their base rows, nor their shadow tables)."""
    if dialect_of(con) == "postgresql":
        return _guild_tables_pg(con)
    out = []
    for name in ordinary_tables(con):
        if name in KEPT_BY_PURGE:
            continue
        columns = {str(c[1]) for c in con.execute(f'PRAGMA table_info("{name}")')}
        if "guild_id" in columns:
            out.append(name)
    return out


def _guild_tables_pg(con: Connection) -> list[str]:
    """``_guild_tables`` on PostgreSQL: the schema's tables with a ``guild_id``."""
    rows = con.execute(
        "SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND column_name = 'guild_id' ORDER BY table_name"
    ).fetchall()
    return [str(r[0]) for r in rows if str(r[0]) not in KEPT_BY_PURGE]


def purge_guild(con: Connection, guild_id: str) -> dict[str, int]:
    """Delete every row any table holds for ``guild_id`` (FTS rows follow by
    trigger, vector index rows are deleted first); rows per table."""
    record(con, SettingsChanged(guild_id))
    fact_ids = [
        int(r[0])
        for r in con.execute("SELECT id FROM memory_facts WHERE guild_id = ?", (guild_id,))
    ]
    seqs = [
        int(r[0]) for r in con.execute("SELECT seq FROM messages WHERE guild_id = ?", (guild_id,))
    ]
    mark_dirty_where(con, "guild_id = ?", [guild_id])
    for chunk in chunks(fact_ids):
        delete_fact_vectors_index(con, chunk)
    for part in chunks(seqs):
        delete_message_vectors_index(con, part)
    counts: dict[str, int] = {}
    # Facts and messages first: their triggers clean the tables that hang off them.
    tables = _guild_tables(con)
    ordered: list[str] = [t for t in ("memory_facts", "messages") if t in tables]
    ordered += [t for t in tables if t not in ordered]
    for table in ordered:
        n = con.execute(f'DELETE FROM "{table}" WHERE guild_id = ?', (guild_id,)).rowcount
        if n:
            counts[table] = counts.get(table, 0) + int(n)
    return counts
