"""A process's claim on its Discord shards, held as leases in the database.

Several processes share one database, each holding some of the shards. Two
processes holding the same shard would both replay and process that shard's
guilds' inbox rows, so each shard is claimed (lease ``shard:<id>/<count>``)
before the engine starts ingesting, renewed while the process runs, and given
up at shutdown. A process that crashed stops renewing: its claim expires after
``discord.shard_lease_s`` and the restarted process (or another one) takes it
then; until it expires a newcomer waits. A claim lost while running (another
process took it over after a stall longer than the lease) stops the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from memory import GuildOwnership, Memory

log = logging.getLogger(__name__)

# The newcomer's wait for a held claim: the lease plus this, so a crashed
# holder's claim has surely expired before it gives up.
WAIT_MARGIN_S = 5.0


class ShardsTaken(Exception):
    """Another live process holds one of the shards asked for."""


def lease_names(ownership: GuildOwnership) -> list[str]:
    """One lease per shard held; none when one process holds every shard
    without sharding (nothing to share)."""
    if ownership.shard_ids is None and ownership.shard_count == 1:
        return []
    return [f"shard:{s}/{ownership.shard_count}" for s in ownership.shards]


async def claim(
    memory: Memory,
    ownership: GuildOwnership,
    lease_s: float,
    *,
    poll_s: float | None = None,
    margin_s: float = WAIT_MARGIN_S,
) -> list[str]:
    """Take every shard's lease, waiting up to ``lease_s`` + ``margin_s`` for
    held ones to expire; the names claimed. Raises ``ShardsTaken`` naming the
    holders (the ones it did take are given back)."""
    names = lease_names(ownership)
    poll = poll_s if poll_s is not None else max(0.05, min(2.0, lease_s / 10))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + lease_s + margin_s
    missing = list(names)
    waited = False
    while True:
        missing = [n for n in missing if not await memory.leases.acquire(n, lease_s)]
        if not missing:
            return names
        if loop.time() >= deadline:
            held = {x.name: x.holder for x in await memory.leases.all()}
            for n in names:
                if n not in missing:
                    await memory.leases.release(n)
            taken = ", ".join(f"{n} by {held.get(n, '?')}" for n in missing)
            raise ShardsTaken(f"shards held by another running process: {taken}")
        if not waited:
            waited = True
            log.info("waiting for %s (held by another process, or one that stopped)", missing)
        await asyncio.sleep(poll)


class ShardClaims:
    """Keeps the claimed shard leases renewed; ``lost`` is called once if one
    was taken over."""

    def __init__(
        self, memory: Memory, names: list[str], lease_s: float, lost: Callable[[], None]
    ) -> None:
        self.memory = memory
        self.names = names
        self.lease_s = lease_s
        self.lost = lost
        self.renewals = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.names:
            self._task = asyncio.create_task(self._renew_loop(), name="shard-claims")

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                kept = [await self.memory.leases.renew(n, self.lease_s) for n in self.names]
            except asyncio.CancelledError:
                raise
            except Exception:  # a busy database: the next round tries again before expiry
                log.exception("could not renew the shard claims")
                continue
            self.renewals += 1
            if not all(kept):
                gone = [n for n, k in zip(self.names, kept, strict=True) if not k]
                log.error("another process took over %s: stopping", gone)
                self.lost()
                return

    async def release(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for n in self.names:
            with contextlib.suppress(Exception):
                await self.memory.leases.release(n)
