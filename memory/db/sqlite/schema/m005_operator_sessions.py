"""Migration m005: operator sessions. Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # Dashboard logins, so logging out (or out everywhere) revokes a session
    # for good. ``id`` is a hash of the session's cookie nonce, never the nonce.
    con.executescript(
        """
        CREATE TABLE operator_sessions (
            id TEXT PRIMARY KEY,
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL
        );
        CREATE INDEX operator_sessions_expiry ON operator_sessions (expires_at);
        """
    )
