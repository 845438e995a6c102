"""Operator sessions: the server-side record of who is logged in to the dashboard.

The dashboard's session cookie is signed (it cannot be forged), and this
record makes it revocable: a session counts only while its row exists, so
logging out deletes one row and "log out everywhere" deletes them all. The
rows live in the engine's database, so a restart keeps both the live
sessions and the revocations. Only a hash of each session's nonce is stored:
a copy of the database does not hold usable cookies.
"""

from __future__ import annotations

import hashlib

from memory.db.core import Database
from memory.store import sessions as store_sessions


class OperatorSessions:
    """Open, check and revoke operator sessions (times in Unix seconds)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    @staticmethod
    def _key(nonce: str) -> str:
        return hashlib.sha256(nonce.encode("utf-8", "replace")).hexdigest()

    async def open(self, nonce: str, now: int, max_age_s: int) -> None:
        await self._db.write(store_sessions.open_session, self._key(nonce), now, now + max_age_s)

    async def active(self, nonce: str, now: int) -> bool:
        return await self._db.read(store_sessions.session_active, self._key(nonce), now)

    async def revoke(self, nonce: str) -> bool:
        """End one session; False if it was not open."""
        return await self._db.write(store_sessions.revoke_session, self._key(nonce))

    async def revoke_all(self, now: int) -> int:
        """End every session; returns how many were live."""
        return await self._db.write(store_sessions.revoke_all_sessions, now)
