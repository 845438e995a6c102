"""The durable inbox: the ``messages`` rows behind the ingest queue.

A message is written here before it is queued, so a crash never loses an
accepted message. What the queue could not finish stays unfinished in the
table and comes back through ``memory.ingest.replay``:

* at start-up, everything an earlier run left ``pending`` or ``dropped``, and
  what waits for a retry (a restart is a natural "try again");
* after an overflow, once the burst has passed (``mark_dropped`` schedules a
  catch-up): overflow sheds load now, not memory;
* a message whose processing failed waits in state ``retry`` until its due
  time (``memory.ingest.retry``); the retry loop queues it again then.
  ``failed`` messages wait for an operator (``retry_failed``).

The inbox only keeps the rows; it tells whoever serves the replays (the
``on_dropped`` and ``on_retry_scheduled`` hooks) when there is something to
pick up, so it knows nothing of the queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from memory.clock import Clock, iso
from memory.config import IngestConfig
from memory.db.core import Connection, Database
from memory.ingest.jobs import Job
from memory.ingest.retry import RetryPolicy
from memory.models import FailedMessage, IncomingMessage
from memory.store import messages as store_messages
from memory.store import ops as store_ops

log = logging.getLogger(__name__)

REPLAY_PAGE = 200  # unfinished rows read at a time
# States the replay picks up: never finished (a crash, a shutdown that did not
# drain) or shed by an overflow.
UNFINISHED = ("pending", "dropped")


def _nothing() -> None:
    pass


class Inbox:
    def __init__(self, db: Database, cfg: IngestConfig, clock: Clock) -> None:
        self.db = db
        self.cfg = cfg
        self.clock = clock
        self.retry = RetryPolicy.from_config(cfg)
        # Set by ``memory.ingest.replay.Replay`` while it serves the queue.
        self.on_dropped: Callable[[], None] = _nothing
        self.on_retry_scheduled: Callable[[], None] = _nothing

    # -- rows --------------------------------------------------------------------------
    async def persist(self, msgs: Sequence[IncomingMessage]) -> list[tuple[bool, str | None]]:
        """Write the messages (once per id); per message (new?, state of an old row)."""
        now = iso(self.clock())

        def work(con: Connection) -> list[tuple[bool, str | None]]:
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

        def work(con: Connection) -> None:
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
        self.on_dropped()

    async def batch_failed(self, jobs: Sequence[Job], error: BaseException) -> None:
        """A batch failed outside its messages' own steps: log it, and let the
        messages it did not write wait for a retry."""
        now = iso(self.clock())
        reason = f"batch failed: {type(error).__name__}: {error}"[:300]
        ids = [j.msg.id for j in jobs if j.outcome is None]

        def work(con: Connection) -> None:
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

    # -- retries -----------------------------------------------------------------------
    def retry_scheduled(self) -> None:
        """A failure was recorded in this process: the retry loop looks at the
        due times again."""
        self.on_retry_scheduled()

    async def retry_failed(self, guild_id: str | None = None) -> int:
        """Give every failed message (of ``guild_id``) a fresh set of attempts, now."""
        n = int(await self.db.write(store_messages.requeue_failed, iso(self.clock()), guild_id))
        if n:
            log.info("%d failed messages queued for a retry", n)
            self.on_retry_scheduled()
        return n
