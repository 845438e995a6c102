"""The durable inbox: the ``messages`` rows behind the ingest queue.

A message is written here before it is queued, so a crash never loses an
accepted message. What the queue could not finish stays unfinished in the
table and comes back through ``replay``:

* at start-up, everything an earlier run left ``pending`` or ``dropped``, and
  what waits for a retry (a restart is a natural "try again");
* after an overflow, once the burst has passed (``mark_dropped`` schedules a
  catch-up): overflow sheds load now, not memory;
* a message whose processing failed waits in state ``retry`` until its due
  time (``memory.ingest.retry``); the retry loop queues it again then.
  ``failed`` messages wait for an operator (``retry_failed``).

Replays and retries take only the rows of the guilds this process owns
(``GuildOwnership``: its Discord shards); the rows of other guilds belong
to the process holding their shards, which replays them when it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memory.clock import Clock, iso, parse_iso
from memory.config import IngestConfig
from memory.ingest.jobs import Job
from memory.ingest.retry import RetryPolicy
from memory.models import FailedMessage, IncomingMessage
from memory.ownership import GuildOwnership
from memory.store import messages as store_messages
from memory.store import ops as store_ops
from memory.store.db import Database
from memory.store.message_texts import highest_seq

if TYPE_CHECKING:
    from memory.ingest.queue import IngestQueue

log = logging.getLogger(__name__)

REPLAY_PAGE = 200  # unfinished rows read at a time
# States the replay picks up: never finished (a crash, a shutdown that did not
# drain) or shed by an overflow.
UNFINISHED = ("pending", "dropped")
AT_START = (*UNFINISHED, "retry")
# The retry loop sleeps at least this long between passes, so rows that are
# due but still queued do not make it spin.
RETRY_MIN_SLEEP_S = 0.01


class Inbox:
    def __init__(
        self,
        db: Database,
        cfg: IngestConfig,
        clock: Clock,
        ownership: GuildOwnership | None = None,
    ) -> None:
        self.db = db
        self.cfg = cfg
        self.clock = clock
        self.ownership = ownership or GuildOwnership()
        self.retry = RetryPolicy.from_config(cfg)
        self._queue: IngestQueue | None = None
        self._replay_task: asyncio.Task[int] | None = None
        # Overflow catch-up has its own task and a "more drops" flag: a drop
        # marked while the start-up replay or an earlier catch-up is reading
        # must still be picked up.
        self._catch_up_task: asyncio.Task[None] | None = None
        self._drops_pending = False
        self._retry_task: asyncio.Task[None] | None = None
        self._retry_wake = asyncio.Event()

    # -- lifecycle -------------------------------------------------------------------
    async def start(self, queue: IngestQueue) -> None:
        """Serve ``queue``: replay what an earlier run left unfinished, retry when due.

        "Earlier" is the rows stored before now (seq at most the highest now):
        the replay reads in the background, and a message of this run that
        has just failed is in state "retry" too — it waits for its back-off."""
        earlier = int(await self.db.read(highest_seq))
        self._queue = queue
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

        # An acknowledgement waits on this write: the database's fast path.
        return await self.db.write(work, urgent=True)

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

    async def batch_failed(self, jobs: Sequence[Job], error: BaseException) -> None:
        """A batch failed outside its messages' own steps: log it, and let the
        messages it did not write wait for a retry."""
        now = iso(self.clock())
        reason = f"batch failed: {type(error).__name__}: {error}"[:300]
        ids = [j.msg.id for j in jobs if j.outcome is None]

        def work(con: Any) -> None:
            states = store_messages.message_states(con, ids)
            for mid in ids:
                state = states.get(mid, ("done", False))[0]
                if state in UNFINISHED or state == "retry":
                    self.retry.record(con, mid, reason, now)
            store_ops.log_action(
                con,
                "bot_error",
                f"memory_ingest_batch_failed: {len(jobs)} messages: {reason}"[:500],
                now,
                guild_id=jobs[0].msg.guild_id if jobs else None,
                detail={
                    "messages": [j.msg.id for j in jobs],
                    "error": "memory_ingest_batch_failed",
                },
            )

        await self.db.write(work)

    async def unfinished(
        self, after_seq: int = 0, limit: int = REPLAY_PAGE, states: Sequence[str] = UNFINISHED
    ) -> list[tuple[int, IncomingMessage]]:
        """(seq, message) of rows in ``states``, in arrival order after ``after_seq``
        (of every guild: ``replay`` keeps the owned ones)."""
        rows = await self.db.read(store_messages.unfinished_messages, limit, after_seq, states)
        return [(seq, m.to_incoming()) for seq, m in rows]

    async def failures(
        self,
        guild_id: str | None = None,
        *,
        limit: int = 100,
        states: Sequence[str] = ("retry", "failed"),
    ) -> list[FailedMessage]:
        """Messages waiting for a retry or given up, oldest first, with the reason."""
        return list(await self.db.read(store_messages.failed_messages, guild_id, states, limit))

    async def unfinished_counts(self, guild_ids: Sequence[str] | None = None) -> dict[str, int]:
        """Messages (of ``guild_ids``, or all) per state that is not final-and-fine:
        pending, dropped, retry, failed."""
        return dict(await self.db.read(store_messages.unfinished_counts, guild_ids))

    # -- replay ------------------------------------------------------------------------
    async def replay(self, states: Sequence[str] = UNFINISHED, *, up_to: int | None = None) -> int:
        """Queue every row in ``states`` (with seq at most ``up_to``) that is
        not queued already; how many."""
        queue = self._queue
        if queue is None:
            return 0
        after = 0
        total = 0
        while queue.accepting:
            rows = await self.unfinished(after, REPLAY_PAGE, states)
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

    async def _catch_up(self) -> None:
        # The flag is cleared before each pass reads, so a drop marked during
        # the pass (after its read went by that row) forces one more pass.
        queue = self._queue
        while queue is not None and self._drops_pending and queue.accepting:
            await queue.wait_depth_at_most(self.cfg.queue_capacity // 2)
            self._drops_pending = False
            await self.replay()

    # -- retries -----------------------------------------------------------------------
    def retry_scheduled(self) -> None:
        """A failure was recorded in this process: look at the due times again."""
        self._retry_wake.set()

    async def retry_failed(self, guild_id: str | None = None) -> int:
        """Give every failed message (of ``guild_id``) a fresh set of attempts, now."""
        n = int(await self.db.write(store_messages.requeue_failed, iso(self.clock()), guild_id))
        if n:
            log.info("%d failed messages queued for a retry", n)
            self._retry_wake.set()
        return n

    async def retry_now(self) -> int:
        """Queue every message waiting for a retry without waiting for its due
        time (an operator's "try again"); how many."""
        return await self.replay(("retry",))

    async def _retry_loop(self) -> None:
        queue = self._queue
        while queue is not None and queue.accepting:
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
        now = self.clock()
        stamp = iso(now)
        after = 0
        while queue.accepting:
            rows = await self.db.read(store_messages.due_retries, stamp, REPLAY_PAGE, after)
            if not rows:
                break
            for seq, m in rows:
                after = seq
                if not queue.holds(m.id) and self.ownership.owns(m.guild_id):
                    await queue.enqueue_replay(m.to_incoming())
        wait = self.cfg.retry_poll_s
        upcoming = await self.db.read(store_messages.next_retry_after, stamp)
        if upcoming is not None:
            wait = min(wait, (parse_iso(upcoming) - now).total_seconds())
        return max(RETRY_MIN_SLEEP_S, wait)
