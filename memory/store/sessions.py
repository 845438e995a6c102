"""SQL for operator sessions (dashboard logins): open, check, revoke.

Times are Unix seconds. ``key`` is what ``memory.sessions`` derives from a
session's cookie nonce; this module never sees the nonce itself.
"""

from __future__ import annotations

from memory.db.core import Connection


def open_session(con: Connection, key: str, created_at: int, expires_at: int) -> None:
    # Expired rows go whenever a session opens: the table stays as small as
    # the number of live logins.
    con.execute("DELETE FROM operator_sessions WHERE expires_at <= ?", (created_at,))
    con.execute(
        "INSERT INTO operator_sessions (id, created_at, expires_at) VALUES (?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at, "
        "expires_at = excluded.expires_at",
        (key, created_at, expires_at),
    )


def session_active(con: Connection, key: str, now: int) -> bool:
    row = con.execute(
        "SELECT 1 FROM operator_sessions WHERE id = ? AND expires_at > ?", (key, now)
    ).fetchone()
    return row is not None


def revoke_session(con: Connection, key: str) -> bool:
    return bool(con.execute("DELETE FROM operator_sessions WHERE id = ?", (key,)).rowcount)


def revoke_all_sessions(con: Connection, now: int) -> int:
    """Delete every session; returns how many were still live."""
    live = con.execute(
        "SELECT count(*) FROM operator_sessions WHERE expires_at > ?", (now,)
    ).fetchone()[0]
    con.execute("DELETE FROM operator_sessions")
    return int(live)
