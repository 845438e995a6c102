"""The durable inbox and its workers.

``submit`` persists a message to ``messages`` (group commit: many concurrent
submissions share one transaction) and only then enqueues a job. The queue is
bounded and de-duplicating; on overflow the oldest queued job is dropped,
resolved ``False``, logged, and its row stays ``dropped`` for replay.

Workers take a batch of jobs from one channel (one extraction call for the
batch), with bounded concurrency. Per-author write order is kept by a chain:
each job knows the previous job of the same author, is only taken once that
one has been taken, and writes only after that one has written. Batches
therefore only ever wait on batches taken before them — no cycles.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from .config import IngestConfig
from .models import IncomingMessage, IngestOutcome

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Job:
    msg: IncomingMessage
    done: asyncio.Future[bool]
    prev: Job | None = None
    taken: bool = False
    written: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: bool = False
    resumed: bool = False  # accepted by an earlier run: check the journal before appending
    enqueued_at: float = field(default_factory=time.monotonic)

    @property
    def author_key(self) -> tuple[str | None, str]:
        return (self.msg.guild_id, self.msg.author_id)

    @property
    def channel_key(self) -> tuple[str | None, str]:
        return (self.msg.guild_id, self.msg.channel_id)


# process(batch) does the real work and must set nothing on the jobs: the
# queue resolves futures and events around it.
ProcessBatch = Callable[[Sequence[Job]], Awaitable[None]]
PersistBatch = Callable[[Sequence[IncomingMessage]], Awaitable[list[tuple[bool, str | None]]]]
OnDrop = Callable[[Job], Coroutine[Any, Any, None]]


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
        persist: PersistBatch,
        process: ProcessBatch,
        on_drop: OnDrop,
    ) -> None:
        self.cfg = cfg
        self._persist = persist
        self._process = process
        self._on_drop = on_drop
        self._queue: deque[Job] = deque()
        self._known: dict[str, Job] = {}  # queued or in flight
        self._done_recent: OrderedDict[str, bool] = OrderedDict()  # small memory of finished ids
        self._author_tail: dict[tuple[str | None, str], Job] = {}
        self._pending_persist: list[
            tuple[IncomingMessage, asyncio.Future[tuple[bool, str | None]]]
        ] = []
        self._persist_wakeup = asyncio.Event()
        # Single-threaded asyncio: check-then-clear on an Event loses no wakeups.
        self._work = asyncio.Event()
        self._room = asyncio.Event()
        self._changed = asyncio.Event()  # any progress: a batch taken or finished, a persist
        self._in_flight = 0
        self._workers: list[asyncio.Task[None]] = []
        self._persister: asyncio.Task[None] | None = None
        self._closing = False
        self.accepting = True
        self.stats = IngestStats()

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> None:
        if self._workers:
            return
        self._persister = asyncio.create_task(self._persist_loop(), name="ingest-persist")
        for i in range(max(1, self.cfg.workers)):
            self._workers.append(asyncio.create_task(self._worker(), name=f"ingest-worker-{i}"))

    async def stop(self) -> None:
        self._closing = True
        self.accepting = False
        tasks = [*self._workers]
        if self._persister is not None:
            tasks.append(self._persister)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._workers.clear()
        self._persister = None
        # Jobs still queued stay 'pending' in the database and are replayed on
        # the next start; resolve their futures so no caller hangs.
        for job in list(self._queue):
            if not job.done.done():
                job.done.set_result(False)
            job.written.set()
        self._queue.clear()

    @property
    def depth(self) -> int:
        return len(self._queue)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def idle(self) -> bool:
        return not self._queue and self._in_flight == 0 and not self._pending_persist

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
        while len(self._queue) > n:
            self._room.clear()
            await self._room.wait()

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
        try:
            is_new, state = await self._persist_one(msg)
        except BaseException:
            self._known.pop(msg.id, None)
            raise
        # "skipped" (too short to keep) is as final as "done": re-importing must not redo it.
        if not is_new and state in ("done", "skipped"):
            self._known.pop(msg.id, None)
            self._remember_done(msg.id, True)
            job.done.set_result(True)
            self.stats.duplicates += 1
            return IngestOutcome(msg.id, "duplicate", "already processed", job.done)
        job.resumed = not is_new
        if backpressure:
            await self._wait_for_room()
        self._enqueue(job)
        self.stats.accepted += 1
        return IngestOutcome(msg.id, "queued", None if is_new else "resumed", job.done)

    async def enqueue_replay(self, msg: IncomingMessage) -> asyncio.Future[bool] | None:
        """Queue an already-persisted, unfinished message (start-up replay)."""
        if msg.id in self._known:
            return self._known[msg.id].done
        await self._wait_for_room()
        job = Job(msg=msg, done=asyncio.get_running_loop().create_future(), resumed=True)
        self._known[msg.id] = job
        self._enqueue(job)
        self.stats.replayed += 1
        return job.done

    async def _wait_for_room(self) -> None:
        while len(self._queue) >= self.cfg.queue_capacity:
            self._room.clear()
            await self._room.wait()

    def _enqueue(self, job: Job) -> None:
        job.prev = self._author_tail.get(job.author_key)
        if job.prev is not None and job.prev.written.is_set():
            job.prev = None
        self._author_tail[job.author_key] = job
        self._queue.append(job)
        if len(self._queue) > self.cfg.queue_capacity:
            self._drop_oldest()
        self._notify_work()

    def _drop_oldest(self) -> None:
        victim = self._queue.popleft()
        victim.dropped = True
        self._known.pop(victim.msg.id, None)
        self.stats.dropped += 1
        self.stats.last_drop_id = victim.msg.id
        # Successors in the author chain must not wait for a job that never runs.
        victim.taken = True
        victim.written.set()
        if not victim.done.done():
            victim.done.set_result(False)
        log.warning("ingest queue overflow: dropped message %s", victim.msg.id)
        task = asyncio.get_running_loop().create_task(self._on_drop(victim))
        task.add_done_callback(_log_task_error)

    def _notify_work(self) -> None:
        self._work.set()

    # -- persistence (group commit) -----------------------------------------------------
    async def _persist_one(self, msg: IncomingMessage) -> tuple[bool, str | None]:
        fut: asyncio.Future[tuple[bool, str | None]] = asyncio.get_running_loop().create_future()
        self._pending_persist.append((msg, fut))
        self._persist_wakeup.set()
        return await fut

    async def _persist_loop(self) -> None:
        while True:
            await self._persist_wakeup.wait()
            self._persist_wakeup.clear()
            while self._pending_persist:
                batch = self._pending_persist[: self.cfg.persist_batch_max]
                del self._pending_persist[: len(batch)]
                try:
                    results = await self._persist([m for m, _ in batch])
                except Exception as exc:  # the caller gets the error, the loop lives on
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                for (_, fut), res in zip(batch, results, strict=True):
                    if not fut.done():
                        fut.set_result(res)
            self._changed.set()

    # -- workers -----------------------------------------------------------------------
    def _take_batch(self) -> list[Job]:
        first: Job | None = None
        for job in self._queue:
            if job.prev is None or job.prev.taken:
                first = job
                break
        if first is None:
            return []
        batch = [first]
        first.taken = True
        for job in self._queue:
            if len(batch) >= self.cfg.batch_size:
                break
            if job.taken or job.channel_key != first.channel_key:
                continue
            if job.prev is None or job.prev.taken:
                job.taken = True
                batch.append(job)
        for job in batch:
            self._queue.remove(job)
        return batch

    async def _worker(self) -> None:
        while True:
            batch = self._take_batch()
            if not batch:
                self._work.clear()
                await self._work.wait()
                continue
            self._room.set()
            self._in_flight += len(batch)
            started = time.monotonic()
            try:
                # Per-author order: wait until earlier jobs of these authors wrote.
                for job in batch:
                    if job.prev is not None and job.prev not in batch:
                        await job.prev.written.wait()
                await self._process(batch)
                ok = True
            except asyncio.CancelledError:
                for job in batch:
                    job.written.set()
                    if not job.done.done():
                        job.done.set_result(False)
                self._in_flight -= len(batch)
                raise
            except Exception:
                log.exception("ingest batch of %d failed", len(batch))
                self.stats.failed_batches += 1
                ok = False
            self.stats.batches += 1
            self.stats.processing_ms_total += (time.monotonic() - started) * 1000
            for job in batch:
                job.written.set()
                # Break the author chain: otherwise the newest job keeps every
                # earlier job (and its message) of a busy author reachable.
                job.prev = None
                self._known.pop(job.msg.id, None)
                if self._author_tail.get(job.author_key) is job:
                    del self._author_tail[job.author_key]
                self._remember_done(job.msg.id, ok)
                if not job.done.done():
                    job.done.set_result(ok)
            if ok:
                self.stats.processed += len(batch)
            self._in_flight -= len(batch)
            self._changed.set()
            # A waiting job may have become eligible now.
            self._notify_work()

    def _remember_done(self, message_id: str, ok: bool) -> None:
        self._done_recent[message_id] = ok
        self._done_recent.move_to_end(message_id)
        while len(self._done_recent) > 4096:
            self._done_recent.popitem(last=False)


def _log_task_error(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("background task failed", exc_info=task.exception())
