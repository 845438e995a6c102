"""``Memory.opt_outs``: members who asked not to be remembered in a guild
(``/memory opt-out``) and the check every way in honours.

While a member is opted out, nothing of theirs is admitted to ingest — live
messages, catch-up, imports and voice utterances all pass
``Memory.ingest_message`` (``memory.ingest.admission`` asks ``is_out``) —
their display name is not recorded, an edit of an older message of theirs
removes the stored copy instead of storing the new text, and a reply to them
keeps nothing of their words (``memory.reply``). ``opt_in`` resumes from that
moment; nothing sent while opted out is fetched back.

The opted-out members of a guild are cached (one small read per guild) and
dropped when a commit changes them — this process's, or another process's on
the same database (they travel as a settings change of the guild). The voice
receiver asks from its own thread: ``known_out`` reads the cache only.
"""

from __future__ import annotations

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
        # Bumped by every drop: a read that started before one must not store.
        self._generation = 0
        db.subscribe(self._changed)

    async def members(self, guild_id: str) -> frozenset[str]:
        """The user ids of the guild's opted-out members."""
        found = self._cached.get(guild_id)
        if found is None:
            generation = self._generation
            found = await self._db.read(store.opted_out, guild_id)
            if generation == self._generation:
                self._cached[guild_id] = found
        return found

    async def is_out(self, guild_id: str, user_id: str) -> bool:
        return user_id in await self.members(guild_id)

    def known_out(self, guild_id: str, user_id: str) -> bool:
        """From the cache alone (no I/O, any thread): a guild not read yet
        counts as nobody opted out; ``members`` fills it."""
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
        self._drop({guild_id})
        await self.members(guild_id)  # the voice receiver reads the cache
        log.info("memory opt-%s: guild %s user %s", "out" if out else "in", guild_id, user_id)
        return changed

    async def count(self, guild_id: str | None = None) -> int:
        return int(await self._db.read(store.count, guild_id))

    def _drop(self, guilds: set[str] | None) -> None:
        self._generation += 1
        if guilds is None:
            self._cached = {}
        else:
            self._cached = {g: v for g, v in self._cached.items() if g not in guilds}

    def _changed(self, changes: Sequence[Change]) -> None:
        """A database subscriber: drop the guilds a commit changed."""
        drop: set[str] | None = set()
        for change in changes:
            if isinstance(change, SettingsChanged) and drop is not None:
                drop.add(change.guild_id)
            elif isinstance(change, ExternalCommit):
                if change.settings_guilds is None:
                    drop = None
                elif drop is not None:
                    drop.update(change.settings_guilds)
        if drop is None or drop:
            self._drop(drop)
