"""All SQL for the per-author daily write caps: how many facts about other
members and how many lore lines an author wrote on a UTC day."""

from __future__ import annotations

from memory.db.core import Connection

# Days of counts kept: today's and yesterday's (a write near midnight may
# still read yesterday's); older rows are dropped as new ones are written.
KEEP_DAYS = 2


def used(con: Connection, guild_id: str, author_id: str, kind: str, day: str) -> int:
    row = con.execute(
        "SELECT used FROM write_quota WHERE guild_id = ? AND author_id = ? AND kind = ? AND day = ?",
        (guild_id, author_id, kind, day),
    ).fetchone()
    return 0 if row is None else int(row[0])


def take(con: Connection, guild_id: str, author_id: str, kind: str, day: str, oldest: str) -> int:
    """Count one write; the count after it. Days before ``oldest`` are dropped."""
    con.execute("DELETE FROM write_quota WHERE day < ?", (oldest,))
    con.execute(
        "INSERT INTO write_quota (guild_id, author_id, kind, day, used) VALUES (?, ?, ?, ?, 1) "
        "ON CONFLICT (guild_id, author_id, kind, day) DO UPDATE SET used = write_quota.used + 1",
        (guild_id, author_id, kind, day),
    )
    return used(con, guild_id, author_id, kind, day)


def forget_author(con: Connection, guild_id: str | None, author_id: str) -> int:
    if guild_id is None:
        return int(
            con.execute("DELETE FROM write_quota WHERE author_id = ?", (author_id,)).rowcount
        )
    return int(
        con.execute(
            "DELETE FROM write_quota WHERE guild_id = ? AND author_id = ?", (guild_id, author_id)
        ).rowcount
    )
