"""The durable inbox and its workers.

``submit`` persists a message to ``messages`` and only then enqueues a job.
A live message is written at once on the database's fast path (no loop turn
between the call and the acknowledgement); bulk submissions (``backpressure``)
and anything arriving while a write is in progress share one transaction
(group commit). The queue is bounded and de-duplicating; on overflow the
oldest queued job is dropped, resolved ``False``, logged, and its row stays
``dropped`` for replay.

A dispatcher takes batches of jobs from one channel (one extraction call per
batch) — the channel of the oldest queued job, once the batch is full or that
job has waited ``batch_wait_s`` — and runs each batch as a task. Two bounds:
a batch holds one of ``workers`` slots while it extracts (the concurrent
extraction calls), and at most ``2 × workers`` batches are active — not
waiting on another batch — at a time, which bounds the jobs in flight; beyond
them the bounded queue is the buffer.

Per-author order of writes is kept by a chain: each job knows the previous
job of the same author (``prev``) and writes only after it has written
(``written``). A batch waiting for that is not active (``wait_written``), so
active batches only ever wait on the extractor or the database; every wait
points at an earlier message; and the earliest unwritten message can always
proceed: no deadlock, whatever the channels and authors.

Queued jobs sit in one FIFO (for drop-oldest) and in a FIFO per channel (for
batching); taken jobs are removed lazily, so taking a batch costs about the
batch, not the queue.

A job's future resolves True once its message is processed (``done`` or
``skipped``), False when it was dropped, failed, or waits for a retry (see
``memory.ingest.inbox``). A batch that fails as a whole is handed to the
inbox, which logs it and lets its messages wait for a retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory.config import IngestConfig
from memory.disk import TroubleLog
from memory.ingest.in_order import InOrder
from memory.ingest.inbox import Inbox
from memory.ingest.jobs import Batch as Batch
from memory.ingest.jobs import Job as Job
from memory.ingest.jobs import release_in_order
from memory.models import IncomingMessage, IngestOutcome

log = logging.getLogger(__name__)

# States a message does not leave by itself: submitting it again is a no-op.
FINAL = ("done", "skipped", "failed")


# process(batch) does the real work: it calls ``extraction_done`` after the
# extraction call, writes each job only after ``job.prev`` has written
# (``wait_written``), then sets ``job.written``. The queue resolves futures.
ProcessBatch = Callable[[Sequence[Job]], Awaitable[None]]


@dataclass
class IngestStats:
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    dropped: int = 0
    processed: int = 0
    failed_batches: int = 0
    batches: int = 0
    replayed: int = 0
    rejected_reasons: dict[str, int] = field(default_factory=dict)
    last_drop_id: str | None = None
    processing_ms_total: float = 0.0


class IngestQueue:
    def __init__(
        self,
        cfg: IngestConfig,
        *,
        inbox: Inbox,
        process: ProcessBatch,
    ) -> None:
        self.cfg = cfg
        self._inbox = inbox
        self._process = process
        self._queue: deque[Job] = deque()  # FIFO of queued jobs; taken ones removed lazily
        self._by_channel: dict[tuple[str | None, str], deque[Job]] = {}
        self._depth = 0  # queued, not taken
        self._known: dict[str, Job] = {}  # queued or in flight
        self._done_recent: OrderedDict[str, bool] = OrderedDict()  # small memory of finished ids
        self._author_tail: dict[tuple[str | None, str], Job] = {}
        self._dropped_fresh: set[str] = set()  # dropped before any journal line, this run
        self._pending_persist: list[
            tuple[IncomingMessage, asyncio.Future[tuple[bool, str | None]]]
        ] = []
        self._persist_wakeup = asyncio.Event()
        self._persisting = False  # a persist transaction is in progress
        # Single-threaded asyncio: check-then-clear on an Event loses no wakeups.
        self._work = asyncio.Event()
        self._room = asyncio.Event()
        self._changed = asyncio.Event()  # any progress: a batch taken or finished, a persist
        self._in_flight = 0
        self._slots = asyncio.Semaphore(max(1, cfg.workers))  # extraction calls
        self._line = InOrder()  # submits reach the queue in the order they came
        self._max_active = 2 * max(1, cfg.workers)
        self._active = 0  # batches in flight not waiting on another batch
        self._activity = asyncio.Event()
        self._dispatcher: asyncio.Task[None] | None = None
        self._batches: set[asyncio.Task[None]] = set()
        self._persister: asyncio.Task[None] | None = None
        self._closing = False
        self.accepting = True
        self.stats = IngestStats()
        self._trouble = TroubleLog(log)

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> None:
        if self._dispatcher is not None:
            return
        self._persister = asyncio.create_task(self._persist_loop(), name="ingest-persist")
        self._dispatcher = asyncio.create_task(self._dispatch(), name="ingest-dispatch")

    async def stop(self) -> None:
        self._closing = True
        self.accepting = False
        tasks = [*self._batches]
        for t in (self._dispatcher, self._persister):
            if t is not None:
                tasks.append(t)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._batches.clear()
        self._dispatcher = None
        self._persister = None
        # Jobs still queued stay 'pending' in the database and are replayed on
        # the next start; resolve their futures so no caller hangs.
        for job in list(self._queue):
            if job.taken:
                continue
            job.taken = True
            if not job.done.done():
                job.done.set_result(False)
            job.release()
        self._queue.clear()
        self._by_channel.clear()
        self._depth = 0

    @property
    def depth(self) -> int:
        return self._depth

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def idle(self) -> bool:
        return (
            self._depth == 0
            and self._in_flight == 0
            and not self._pending_persist
            and not self._persisting
        )

    async def drain(self, timeout: float = 5.0) -> bool:
        """Wait until the queue is empty and workers idle; False on timeout."""
        try:
            async with asyncio.timeout(max(0.1, timeout)):
                while not self.idle():
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            return False
        return True

    async def wait_depth_at_most(self, n: int) -> None:
        while self._depth > n:
            self._room.clear()
            await self._room.wait()

    def holds(self, message_id: str) -> bool:
        """Whether the message is queued or being processed."""
        return message_id in self._known

    # -- submission -------------------------------------------------------------------
    def known_future(self, message_id: str) -> asyncio.Future[bool] | None:
        job = self._known.get(message_id)
        if job is not None:
            return job.done
        if message_id in self._done_recent:
            fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            fut.set_result(self._done_recent[message_id])
            return fut
        return None

    async def submit(self, msg: IncomingMessage, *, backpressure: bool = False) -> IngestOutcome:
        existing = self.known_future(msg.id)
        if existing is not None:
            self.stats.duplicates += 1
            return IngestOutcome(msg.id, "duplicate", None, existing)
        loop = asyncio.get_running_loop()
        job = Job(msg=msg, done=loop.create_future())
        # Registered before the await so a second submit of the same id while
        # this one is being persisted is a duplicate too.
        self._known[msg.id] = job
        # Queued in the order submitted, whichever persist or wait for room
        # ends first: an author's jobs are chained in this order (Job.prev).
        place = self._line.enter()
        try:
            try:
                # Bulk callers (import, replay of a history) ask for backpressure:
                # they go through group commit; a live message is written at once.
                is_new, state = await self._persist_one(msg, direct=not backpressure)
            except BaseException:
                self._known.pop(msg.id, None)
                raise
            # "skipped" (too short to keep) is as final as "done": re-importing must not redo it.
            # So is "failed" until an operator asks for a retry; "retry" is queued again.
            if not is_new and state in FINAL:
                ok = state != "failed"
                self._known.pop(msg.id, None)
                self._remember_done(msg.id, ok)
                job.done.set_result(ok)
                self.stats.duplicates += 1
                reason = "already processed" if ok else "failed earlier (guildlore retry)"
                return IngestOutcome(msg.id, "duplicate", reason, job.done)
            job.resumed = not is_new
            await place.turn()
            if backpressure:
                await self._wait_for_room()
            elif self._depth >= self.cfg.queue_capacity:
                # Persisting took no loop turn; before this drops the oldest job,
                # let an idle worker take it.
                await asyncio.sleep(0)
            self._enqueue(job)
        finally:
            place.leave()
        self.stats.accepted += 1
        return IngestOutcome(msg.id, "queued", None if is_new else "resumed", job.done)

    def forget_done(self, message_id: str) -> None:
        """The message changed after it was processed (an edit): queueing it
        again must process it again."""
        self._done_recent.pop(message_id, None)

    async def enqueue_replay(self, msg: IncomingMessage) -> asyncio.Future[bool] | None:
        """Queue an already-persisted, unfinished message (start-up replay)."""
        if msg.id in self._known:
            return self._known[msg.id].done
        place = self._line.enter()  # in line with live submits (see ``submit``)
        try:
            await place.turn()
            await self._wait_for_room()
            if msg.id in self._known:  # submitted again meanwhile
                return self._known[msg.id].done
            if self._done_recent.get(msg.id):  # or finished meanwhile (two replays read it)
                return self.known_future(msg.id)
            # A message this run dropped before taking it cannot have a journal
            # line from this run; only one accepted by an earlier run may have one.
            fresh = msg.id in self._dropped_fresh
            self._dropped_fresh.discard(msg.id)
            job = Job(msg=msg, done=asyncio.get_running_loop().create_future(), resumed=not fresh)
            self._known[msg.id] = job
            self._enqueue(job)
        finally:
            place.leave()
        self.stats.replayed += 1
        return job.done

    async def _wait_for_room(self) -> None:
        while self._depth >= self.cfg.queue_capacity:
            self._room.clear()
            await self._room.wait()

    def _enqueue(self, job: Job) -> None:
        job.prev = self._author_tail.get(job.author_key)
        if job.prev is not None and job.prev.written.is_set():
            job.prev = None
        self._author_tail[job.author_key] = job
        self._queue.append(job)
        self._by_channel.setdefault(job.channel_key, deque()).append(job)
        self._depth += 1
        if self._depth > self.cfg.queue_capacity:
            self._drop_oldest()
        self._notify_work()

    def _oldest(self) -> Job | None:
        """The oldest queued job."""
        q = self._queue
        while q and q[0].taken:
            q.popleft()
        return q[0] if q else None

    def _drop_oldest(self) -> None:
        victim = self._oldest()
        if victim is None:
            return
        self._queue.popleft()
        self._depth -= 1
        victim.dropped = True
        if not victim.resumed:
            self._dropped_fresh.add(victim.msg.id)
        self._known.pop(victim.msg.id, None)
        if self._author_tail.get(victim.author_key) is victim:
            del self._author_tail[victim.author_key]
        self.stats.dropped += 1
        self.stats.last_drop_id = victim.msg.id
        # Successors in the author chain must not wait for a job that never runs.
        victim.taken = True
        victim.release()
        if not victim.done.done():
            victim.done.set_result(False)
        log.warning("ingest queue overflow: dropped message %s", victim.msg.id)
        task = asyncio.get_running_loop().create_task(self._inbox.mark_dropped(victim))
        task.add_done_callback(_log_task_error)

    def _notify_work(self) -> None:
        self._work.set()

    # -- persistence (group commit) -----------------------------------------------------
    async def _persist_one(self, msg: IncomingMessage, *, direct: bool) -> tuple[bool, str | None]:
        if direct and not self._persisting and not self._pending_persist:
            # Nothing in progress: write it right here. With the database's
            # fast path for urgent writes this returns without a single loop turn.
            self._persisting = True
            try:
                (result,) = await self._inbox.persist([msg])
            finally:
                self._persisting = False
                if self._pending_persist:
                    self._persist_wakeup.set()
            return result
        # Group commit: everyone arriving in this loop turn, or while a write
        # is in progress, shares the next transaction.
        fut: asyncio.Future[tuple[bool, str | None]] = asyncio.get_running_loop().create_future()
        self._pending_persist.append((msg, fut))
        self._persist_wakeup.set()
        return await fut

    async def _persist_loop(self) -> None:
        while True:
            await self._persist_wakeup.wait()
            self._persist_wakeup.clear()
            while self._pending_persist and not self._persisting:
                batch = self._pending_persist[: self.cfg.persist_batch_max]
                del self._pending_persist[: len(batch)]
                self._persisting = True
                try:
                    results = await self._inbox.persist([m for m, _ in batch])
                except Exception as exc:  # the caller gets the error, the loop lives on
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                finally:
                    self._persisting = False
                for (_, fut), res in zip(batch, results, strict=True):
                    if not fut.done():
                        fut.set_result(res)
            self._changed.set()

    # -- batches -----------------------------------------------------------------------
    def _channel_jobs(self, key: tuple[str | None, str], limit: int) -> list[Job]:
        """Up to ``limit`` queued jobs of one channel, oldest first."""
        chan = self._by_channel.get(key)
        out: list[Job] = []
        if chan is None:
            return out
        while chan and chan[0].taken:
            chan.popleft()
        for job in chan:
            if len(out) >= limit:
                break
            if not job.taken:
                out.append(job)
        if not chan:
            del self._by_channel[key]
        return out

    async def _next_batch(self) -> list[Job]:
        """The jobs of the oldest job's channel, once they fill a batch or the
        oldest has waited ``batch_wait_s``."""
        while True:
            first = self._oldest()
            if first is None:
                self._work.clear()
                await self._work.wait()
                continue
            jobs = self._channel_jobs(first.channel_key, self.cfg.batch_size)
            wait = self.cfg.batch_wait_s - (time.monotonic() - first.enqueued_at)
            if (
                len(jobs) >= self.cfg.batch_size
                or wait <= 0
                or self._closing
                or self._depth >= self.cfg.queue_capacity  # no time to fill: jobs are dropping
            ):
                for job in jobs:
                    job.taken = True
                self._depth -= len(jobs)
                return jobs
            self._work.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._work.wait()

    async def _dispatch(self) -> None:
        while True:
            # A slot first: while all are busy, the queue fills the next batch.
            await self._slots.acquire()
            try:
                while self._active >= self._max_active:
                    self._activity.clear()
                    await self._activity.wait()
                jobs = await self._next_batch()
            except BaseException:
                self._slots.release()
                raise
            self._room.set()
            self._changed.set()
            self._in_flight += len(jobs)
            self._active += 1
            batch = Batch(jobs, self._slots.release, self._set_active)
            task = asyncio.create_task(self._run(batch), name="ingest-batch")
            self._batches.add(task)
            task.add_done_callback(self._batches.discard)

    def _set_active(self, active: bool) -> None:
        self._active += 1 if active else -1
        self._activity.set()

    async def _run(self, batch: Batch) -> None:
        started = time.monotonic()
        error: Exception | None = None
        try:
            await self._process(batch)
            self._trouble.ok("ingest batch")
        except asyncio.CancelledError:
            batch.extraction_done()
            batch.set_active(False)
            for job in batch:
                job.release()
                if not job.done.done():
                    job.done.set_result(False)
            self._in_flight -= len(batch)
            raise
        except Exception as exc:
            self._trouble.error("ingest batch", exc, "its messages stay in the inbox, to retry")
            self.stats.failed_batches += 1
            error = exc
        batch.extraction_done()
        batch.set_active(False)
        if error is not None:
            # Its unwritten messages wait for a retry, logged: no restart needed.
            try:
                await self._inbox.batch_failed(batch, error)
            except Exception as exc:
                self._trouble.error("recording the failed batch", exc, "it stays unfinished")
        # Jobs the processor did not get to write (it failed, or it did not
        # set ``written``) let their authors' successors through only after
        # their own predecessors wrote.
        await release_in_order(batch)
        self.stats.batches += 1
        self.stats.processing_ms_total += (time.monotonic() - started) * 1000
        retrying = error is not None
        for job in batch:
            self._known.pop(job.msg.id, None)
            if self._author_tail.get(job.author_key) is job:
                del self._author_tail[job.author_key]
            ok = job.outcome in ("done", "skipped")
            # A message waiting for a retry is not remembered: submitting it
            # again (a re-import) queues it again.
            if job.outcome in FINAL:
                self._remember_done(job.msg.id, ok)
            retrying = retrying or job.outcome == "retry"
            if not job.done.done():
                job.done.set_result(ok)
            if ok:
                self.stats.processed += 1
        self._in_flight -= len(batch)
        if retrying:
            self._inbox.retry_scheduled()
        self._changed.set()

    def _remember_done(self, message_id: str, ok: bool) -> None:
        self._done_recent[message_id] = ok
        self._done_recent.move_to_end(message_id)
        while len(self._done_recent) > 4096:
            self._done_recent.popitem(last=False)


def _log_task_error(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("background task failed", exc_info=task.exception())
