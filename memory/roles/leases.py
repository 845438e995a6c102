"""``Memory.leases``: named leases in the database, for work that must run
once across the processes sharing it (MEMORY.md and journal rendering,
action-log pruning, re-indexing).

A process is one holder (``host:pid:random``; every engine it opens holds
under that name). A lease lasts ``ttl_s``; its
holder renews it by acquiring it again, and a holder that stops (a crash)
loses it when it expires: whoever asks next takes it over. Work that does
not get its lease skips the round; ``skipped`` counts those per name.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from memory.clock import Clock, iso
from memory.db.core import Database
from memory.errors import InvalidInput
from memory.store import leases as store
from memory.store.leases import Lease, process_holder

log = logging.getLogger(__name__)


class JobLeases:
    def __init__(self, db: Database, clock: Clock, holder: str | None = None) -> None:
        self._db = db
        self._clock = clock
        self.holder = holder or process_holder()
        self.skipped: dict[str, int] = {}
        self.acquired: dict[str, int] = {}

    def _until(self, ttl_s: float) -> tuple[str, str]:
        if ttl_s <= 0:
            raise InvalidInput(f"a lease lasts a positive time (got {ttl_s} s)")
        now = self._clock()
        return iso(now), iso(now + timedelta(seconds=ttl_s))

    async def acquire(self, name: str, ttl_s: float) -> bool:
        """Hold ``name`` for ``ttl_s`` seconds from now (a new lease, our own
        extended, or an expired one taken over); False if another holds it."""
        now, until = self._until(ttl_s)
        got = bool(await self._db.write(store.acquire, name, self.holder, now, until))
        if got:
            self.acquired[name] = self.acquired.get(name, 0) + 1
        return got

    async def renew(self, name: str, ttl_s: float) -> bool:
        """Extend a lease this process holds; False if it was taken over."""
        _, until = self._until(ttl_s)
        return bool(await self._db.write(store.renew, name, self.holder, until))

    async def release(self, name: str) -> bool:
        return bool(await self._db.write(store.release, name, self.holder))

    async def try_round(self, name: str, ttl_s: float) -> bool:
        """Acquire for one round of a job: False (logged at debug, counted in
        ``skipped``) when another process has it."""
        if await self.acquire(name, ttl_s):
            return True
        self.skipped[name] = self.skipped.get(name, 0) + 1
        log.debug("job %s skipped: another process holds its lease", name)
        return False

    async def all(self) -> list[Lease]:
        return list(await self._db.read(store.leases))
