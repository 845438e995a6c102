"""Replay: what the durable inbox holds unfinished goes back into the queue.

Three loops serve the queue from the inbox's rows:

* at start-up, everything an earlier run left ``pending`` or ``dropped``, and
  what waits for a retry (a restart is a natural "try again");
* after an overflow, once the burst has passed (the inbox's ``on_dropped``
  hook schedules a catch-up): overflow sheds load now, not memory;
* a message whose processing failed waits in state ``retry`` until its due
  time (``memory.ingest.retry``); the retry loop queues it again then.
  ``failed`` messages wait for an operator (``Inbox.retry_failed``).

Replays and retries take only the rows of the guilds this process owns
(``GuildOwnership``: its Discord shards); the rows of other guilds belong
to the process holding their shards, which replays them when it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from memory.clock import Clock, iso, parse_iso
from memory.config import IngestConfig
from memory.ingest.inbox import REPLAY_PAGE, UNFINISHED, Inbox
from memory.ingest.queue import IngestQueue
from memory.ownership import GuildOwnership
from memory.store import messages as store_messages
from memory.store.message_texts import highest_seq

log = logging.getLogger(__name__)

AT_START = (*UNFINISHED, "retry")
# The retry loop sleeps at least this long between passes, so rows that are
# due but still queued do not make it spin.
RETRY_MIN_SLEEP_S = 0.01


class Replay:
    def __init__(
        self,
        inbox: Inbox,
        queue: IngestQueue,
        cfg: IngestConfig,
        clock: Clock,
        ownership: GuildOwnership | None = None,
    ) -> None:
        self.inbox = inbox
        self.queue = queue
        self.cfg = cfg
        self.clock = clock
        self.ownership = ownership or GuildOwnership()
        self._started = False
        self._replay_task: asyncio.Task[int] | None = None
        # Overflow catch-up has its own task and a "more drops" flag: a drop
        # marked while the start-up replay or an earlier catch-up is reading
        # must still be picked up.
        self._catch_up_task: asyncio.Task[None] | None = None
        self._drops_pending = False
        self._retry_task: asyncio.Task[None] | None = None
        self._retry_wake = asyncio.Event()

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        """Replay what an earlier run left unfinished; retry when due.

        "Earlier" is the rows stored before now (seq at most the highest now):
        the replay reads in the background, and a message of this run that
        has just failed is in state "retry" too — it waits for its back-off."""
        earlier = int(await self.inbox.db.read(highest_seq))
        self._started = True
        self.inbox.on_dropped = self._dropped
        self.inbox.on_retry_scheduled = self._retry_wake.set
        self._replay_task = asyncio.create_task(
            self.replay(AT_START, up_to=earlier), name="ingest-replay"
        )
        self._retry_task = asyncio.create_task(self._retry_loop(), name="ingest-retry")

    async def stop(self) -> None:
        tasks: list[asyncio.Task[Any]] = [
            t for t in (self._replay_task, self._catch_up_task, self._retry_task) if t is not None
        ]
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._replay_task = self._catch_up_task = self._retry_task = None
        self._started = False

    # -- replay ------------------------------------------------------------------------
    async def replay(self, states: Sequence[str] = UNFINISHED, *, up_to: int | None = None) -> int:
        """Queue every row in ``states`` (with seq at most ``up_to``) that is
        not queued already; how many."""
        if not self._started:
            return 0
        queue = self.queue
        after = 0
        total = 0
        while queue.accepting:
            rows = await self.inbox.unfinished(after, REPLAY_PAGE, states)
            if not rows:
                break
            if up_to is not None:
                rows = [(seq, m) for seq, m in rows if seq <= up_to]
                if not rows:
                    break
            for seq, m in rows:
                after = seq
                if queue.holds(m.id) or not self.ownership.owns(m.guild_id):
                    continue
                await queue.enqueue_replay(m)
                total += 1
        if total:
            log.info("replayed %d unfinished messages", total)
        return total

    def _dropped(self) -> None:
        self._drops_pending = True
        if self._catch_up_task is None or self._catch_up_task.done():
            self._catch_up_task = asyncio.create_task(self._catch_up(), name="ingest-catch-up")

    async def _catch_up(self) -> None:
        # The flag is cleared before each pass reads, so a drop marked during
        # the pass (after its read went by that row) forces one more pass.
        queue = self.queue
        while self._started and self._drops_pending and queue.accepting:
            await queue.wait_depth_at_most(self.cfg.queue_capacity // 2)
            self._drops_pending = False
            await self.replay()

    # -- retries -----------------------------------------------------------------------
    async def retry_now(self) -> int:
        """Queue every message waiting for a retry without waiting for its due
        time (an operator's "try again"); how many."""
        return await self.replay(("retry",))

    async def _retry_loop(self) -> None:
        queue = self.queue
        while queue.accepting:
            self._retry_wake.clear()
            try:
                wait = await self._retry_due(queue)
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop outlives a failed look (e.g. a busy database)
                log.exception("retry pass failed")
                wait = self.cfg.retry_poll_s
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._retry_wake.wait()

    async def _retry_due(self, queue: IngestQueue) -> float:
        """Queue the retries that are due; seconds until the next one (at most
        ``retry_poll_s``: another process may schedule one)."""
        db = self.inbox.db
        now = self.clock()
        stamp = iso(now)
        after = 0
        while queue.accepting:
            rows = await db.read(store_messages.due_retries, stamp, REPLAY_PAGE, after)
            if not rows:
                break
            for seq, m in rows:
                after = seq
                if not queue.holds(m.id) and self.ownership.owns(m.guild_id):
                    await queue.enqueue_replay(m.to_incoming())
        wait = self.cfg.retry_poll_s
        upcoming = await db.read(store_messages.next_retry_after, stamp)
        if upcoming is not None:
            wait = min(wait, (parse_iso(upcoming) - now).total_seconds())
        return max(RETRY_MIN_SLEEP_S, wait)
