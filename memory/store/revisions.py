"""A guild's memory revision, its change log, and the revision each channel's
last reply saw.

The revision and the log are written by a trigger on ``fact_history`` (see
migration m016): every change to memory writes a history row, so they move
in the same transaction as the change, whatever the write path."""

from __future__ import annotations

from dataclasses import dataclass

from memory.db.core import Connection


@dataclass(frozen=True)
class ChangeRow:
    rev: int
    fact_id: int | None
    event: str
    created_at: str
    # The fact as it is now (None: it was deleted since).
    fact: str | None
    channel_id: str | None
    is_current: bool


def current_rev(con: Connection, guild_id: str) -> int:
    row = con.execute("SELECT rev FROM guild_revisions WHERE guild_id = ?", (guild_id,)).fetchone()
    return int(row[0]) if row else 0


def changes_since(con: Connection, guild_id: str, rev: int, limit: int = 200) -> list[ChangeRow]:
    """The guild's changes after ``rev``, newest first, at most ``limit``."""
    rows = con.execute(
        "SELECT c.rev, c.fact_id, c.event, c.created_at, f.fact, f.channel_id, "
        "f.is_active, f.valid_to FROM memory_changes c "
        "LEFT JOIN memory_facts f ON f.id = c.fact_id AND f.guild_id = c.guild_id "
        "WHERE c.guild_id = ? AND c.rev > ? ORDER BY c.rev DESC LIMIT ?",
        (guild_id, rev, limit),
    ).fetchall()
    return [
        ChangeRow(
            int(r["rev"]),
            r["fact_id"],
            r["event"],
            r["created_at"],
            r["fact"],
            r["channel_id"],
            bool(r["is_active"]) and r["valid_to"] is None,
        )
        for r in rows
    ]


def see_rev(con: Connection, guild_id: str, channel_id: str, now: str) -> tuple[int | None, int]:
    """Note that a reply in ``channel_id`` sees the guild's current revision;
    returns (the revision the channel's previous reply saw or None, the current one)."""
    row = con.execute(
        "SELECT rev FROM channel_revisions WHERE guild_id = ? AND channel_id = ?",
        (guild_id, channel_id),
    ).fetchone()
    rev = current_rev(con, guild_id)
    con.execute(
        "INSERT INTO channel_revisions (guild_id, channel_id, rev, seen_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (guild_id, channel_id) DO UPDATE SET rev = excluded.rev, "
        "seen_at = excluded.seen_at",
        (guild_id, channel_id, rev, now),
    )
    return (int(row[0]) if row else None), rev
