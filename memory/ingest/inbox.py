"""The durable inbox: the ``messages`` rows behind the ingest queue.

A message is written here before it is queued, so a crash never loses an
accepted message. What the queue could not finish stays unfinished in the
table and comes back through ``replay``:

* at start-up, everything an earlier run left ``pending`` or ``dropped``;
* after an overflow, once the burst has passed (``mark_dropped`` schedules a
  catch-up): overflow sheds load now, not memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memory.clock import Clock, iso
from memory.config import IngestConfig
from memory.ingest.jobs import Job
from memory.models import IncomingMessage
from memory.store import messages as store_messages
from memory.store import ops as store_ops
from memory.store.db import Database

if TYPE_CHECKING:
    from memory.ingest.queue import IngestQueue

log = logging.getLogger(__name__)

REPLAY_PAGE = 200  # unfinished rows read at a time
# States the replay picks up: never finished (a crash, a shutdown that did not
# drain) or shed by an overflow.
UNFINISHED = ("pending", "dropped")


class Inbox:
    def __init__(self, db: Database, cfg: IngestConfig, clock: Clock) -> None:
        self.db = db
        self.cfg = cfg
        self.clock = clock
        self._queue: IngestQueue | None = None
        self._replay_task: asyncio.Task[int] | None = None
        # Overflow catch-up has its own task and a "more drops" flag: a drop
        # marked while the start-up replay or an earlier catch-up is reading
        # must still be picked up.
        self._catch_up_task: asyncio.Task[None] | None = None
        self._drops_pending = False

    # -- lifecycle -------------------------------------------------------------------
    def start(self, queue: IngestQueue) -> None:
        """Serve ``queue`` and replay what an earlier run left unfinished."""
        self._queue = queue
        self._replay_task = asyncio.create_task(self.replay(), name="ingest-replay")

    async def stop(self) -> None:
        tasks: list[asyncio.Task[Any]] = [
            t for t in (self._replay_task, self._catch_up_task) if t is not None
        ]
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._replay_task = self._catch_up_task = None

    # -- rows --------------------------------------------------------------------------
    async def persist(self, msgs: Sequence[IncomingMessage]) -> list[tuple[bool, str | None]]:
        """Write the messages (once per id); per message (new?, state of an old row)."""
        now = iso(self.clock())

        def work(con: Any) -> list[tuple[bool, str | None]]:
            new = store_messages.insert_messages(con, msgs, now)
            old_ids = [m.id for m, n in zip(msgs, new, strict=True) if not n]
            states = store_messages.message_states(con, old_ids) if old_ids else {}
            return [
                (True, "pending") if n else (False, states.get(m.id, ("done", True))[0])
                for m, n in zip(msgs, new, strict=True)
            ]

        return await self.db.write(work)

    async def mark_dropped(self, job: Job) -> None:
        """Record an overflow drop (row and log) and schedule the catch-up."""
        now = iso(self.clock())

        def work(con: Any) -> None:
            store_messages.mark_messages(con, [job.msg.id], "dropped", now, "ingest queue overflow")
            store_ops.log_action(
                con,
                "bot_error",
                f"memory_ingest_queue_overflow: dropped message {job.msg.id}",
                now,
                guild_id=job.msg.guild_id,
                detail={"message_id": job.msg.id, "error": "memory_ingest_queue_overflow"},
            )

        await self.db.write(work)
        self._drops_pending = True
        if self._catch_up_task is None or self._catch_up_task.done():
            self._catch_up_task = asyncio.create_task(self._catch_up(), name="ingest-catch-up")

    async def unfinished(
        self, after_seq: int = 0, limit: int = REPLAY_PAGE, states: Sequence[str] = UNFINISHED
    ) -> list[tuple[int, IncomingMessage]]:
        """(seq, message) of rows in ``states``, in arrival order after ``after_seq``."""
        rows = await self.db.read(store_messages.unfinished_messages, limit, after_seq, states)
        return [(seq, m.to_incoming()) for seq, m in rows]

    # -- replay ------------------------------------------------------------------------
    async def replay(self, states: Sequence[str] = UNFINISHED) -> int:
        """Queue every row in ``states`` that is not queued already; how many."""
        queue = self._queue
        if queue is None:
            return 0
        after = 0
        total = 0
        while queue.accepting:
            rows = await self.unfinished(after, REPLAY_PAGE, states)
            if not rows:
                break
            for seq, m in rows:
                after = seq
                if queue.known_future(m.id) is not None:
                    continue
                await queue.enqueue_replay(m)
                total += 1
        if total:
            log.info("replayed %d unfinished messages", total)
        return total

    async def _catch_up(self) -> None:
        # The flag is cleared before each pass reads, so a drop marked during
        # the pass (after its read went by that row) forces one more pass.
        queue = self._queue
        while queue is not None and self._drops_pending and queue.accepting:
            await queue.wait_depth_at_most(self.cfg.queue_capacity // 2)
            self._drops_pending = False
            await self.replay()
