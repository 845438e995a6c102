"""``Memory.opt_outs``: members who asked not to be remembered in a guild
(``/memory opt-out``) and the check every way in honours.

While a member is opted out, nothing of theirs is admitted to ingest — live
messages, catch-up, imports and voice utterances all pass
``Memory.ingest_message`` (``memory.ingest.admission`` asks ``is_out``) —
their display name is not recorded, an edit of an older message of theirs
removes the stored copy instead of storing the new text, and a reply to them
keeps nothing of their words (``memory.reply``). ``opt_in`` resumes from that
moment; nothing sent while opted out is fetched back.

Every guild's opted-out members are cached together (one small read,
``warm`` at start-up) and dropped when a commit changes them — this
process's, or another process's on the same database (they travel as a
settings change of the guild). The voice receiver asks from its own thread:
``known_out`` reads the cache only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from memory.clock import Clock, iso
from memory.db.changes import Change, ExternalCommit, SettingsChanged
from memory.db.core import Connection, Database
from memory.store import opt_outs as store

log = logging.getLogger(__name__)


class OptOuts:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock
        self._cached: dict[str, frozenset[str]] = {}
        self._complete = False  # the cache holds every guild (absent: nobody)
        self._loading: asyncio.Future[None] | None = None
        # Bumped by every drop: a read that started before one must not store.
        self._generation = 0
        db.subscribe(self._changed)

    async def warm(self) -> None:
        """Load the cache now (at start-up), so the first burst waits for nothing."""
        await self.members("")

    async def members(self, guild_id: str) -> frozenset[str]:
        """The user ids of the guild's opted-out members."""
        found = self._cached.get(guild_id)
        if found is not None:
            return found
        if self._complete:
            return frozenset()
        # The table is small and changes rarely: one read loads every guild,
        # and a burst of admissions (thousands at once) waits for that one
        # read instead of queueing a read each.
        loading = self._loading
        if loading is None:
            loading = self._loading = asyncio.ensure_future(self._load())
        await asyncio.shield(loading)
        return self._cached.get(guild_id, frozenset())

    async def _load(self) -> None:
        generation = self._generation
        try:
            found = await self._db.read(store.all_opted_out)
        finally:
            if generation == self._generation:
                self._loading = None
        if generation == self._generation:
            self._cached, self._complete = dict(found), True

    async def is_out(self, guild_id: str, user_id: str) -> bool:
        return user_id in await self.members(guild_id)

    def known_out(self, guild_id: str, user_id: str) -> bool:
        """From the cache alone (no I/O, any thread): until ``members`` fills
        it again after a change, nobody counts as opted out here (the
        engine's admission still refuses their words)."""
        return user_id in self._cached.get(guild_id, frozenset())

    async def since(self, guild_id: str, user_id: str) -> str | None:
        """When the member opted out (ISO), or None."""
        result: str | None = await self._db.read(store.opted_out_since, guild_id, user_id)
        return result

    async def change(self, guild_id: str, user_id: str, out: bool) -> bool:
        """Opt the member out (``out``) or back in; whether that changed anything."""
        now = iso(self._clock())

        def work(con: Connection) -> bool:
            return store.set_opt_out(con, guild_id, user_id, out, now)

        changed = bool(await self._db.write(work))
        self._drop()
        await self.members(guild_id)  # the voice receiver reads the cache
        log.info("memory opt-%s: guild %s user %s", "out" if out else "in", guild_id, user_id)
        return changed

    async def count(self, guild_id: str | None = None) -> int:
        return int(await self._db.read(store.count, guild_id))

    def _drop(self) -> None:
        """Forget the cache (a full read is one small query); a read in flight
        may predate the change, so callers from now on start a new one."""
        self._generation += 1
        self._cached, self._complete, self._loading = {}, False, None

    def _changed(self, changes: Sequence[Change]) -> None:
        """A database subscriber: drop the cache when a commit changed a
        guild's settings or opt-outs (another process's too)."""
        for change in changes:
            if isinstance(change, SettingsChanged) or (
                isinstance(change, ExternalCommit) and change.settings_guilds != ()
            ):
                self._drop()
                return
