"""All SQL for memory opt-outs: the members of a guild who asked not to be
remembered from a moment on (``/memory opt-out``). Consent, not memory: an
erase of the member and a purge of the guild keep these rows, so a member who
is forgotten stays forgotten."""

from __future__ import annotations

from memory.db.changes import SettingsChanged, record
from memory.db.core import Connection


def set_opt_out(con: Connection, guild_id: str, user_id: str, out: bool, now: str) -> bool:
    """Record (``out``) or lift the opt-out; whether anything changed."""
    if out:
        changed = con.execute(
            "INSERT OR IGNORE INTO member_opt_outs (guild_id, user_id, since) VALUES (?, ?, ?)",
            (guild_id, user_id, now),
        ).rowcount
    else:
        changed = con.execute(
            "DELETE FROM member_opt_outs WHERE guild_id = ? AND user_id = ?", (guild_id, user_id)
        ).rowcount
    if changed:
        # Other processes on the database drop their cached opt-outs of the
        # guild with its settings (PostgreSQL's notifications carry this).
        record(con, SettingsChanged(guild_id))
    return bool(changed)


def opted_out(con: Connection, guild_id: str) -> frozenset[str]:
    """The user ids of the guild's members who opted out."""
    return frozenset(
        str(r[0])
        for r in con.execute("SELECT user_id FROM member_opt_outs WHERE guild_id = ?", (guild_id,))
    )


def all_opted_out(con: Connection) -> dict[str, frozenset[str]]:
    """Every guild's opted-out members (guilds with none are absent)."""
    found: dict[str, set[str]] = {}
    for r in con.execute("SELECT guild_id, user_id FROM member_opt_outs"):
        found.setdefault(str(r[0]), set()).add(str(r[1]))
    return {g: frozenset(u) for g, u in found.items()}


def opted_out_since(con: Connection, guild_id: str, user_id: str) -> str | None:
    row = con.execute(
        "SELECT since FROM member_opt_outs WHERE guild_id = ? AND user_id = ?",
        (guild_id, user_id),
    ).fetchone()
    return None if row is None else str(row[0])


def count(con: Connection, guild_id: str | None = None) -> int:
    if guild_id is None:
        return int(con.execute("SELECT count(*) FROM member_opt_outs").fetchone()[0])
    return int(
        con.execute(
            "SELECT count(*) FROM member_opt_outs WHERE guild_id = ?", (guild_id,)
        ).fetchone()[0]
    )
