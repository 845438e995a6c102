"""A queued message (``Job``), the batch a worker processes, and the waits
that keep each author's writes in order (see ``memory.ingest.queue``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memory.models import IncomingMessage


@dataclass(eq=False)
class Job:
    msg: IncomingMessage
    done: asyncio.Future[bool]
    prev: Job | None = None
    taken: bool = False
    written: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: bool = False
    resumed: bool = False  # accepted by an earlier run: check the journal before appending
    # The state processing left the message in: done, skipped, retry or
    # failed (None: not written, e.g. its batch failed).
    outcome: str | None = None
    enqueued_at: float = field(default_factory=time.monotonic)

    @property
    def author_key(self) -> tuple[str | None, str]:
        return (self.msg.guild_id, self.msg.author_id)

    @property
    def channel_key(self) -> tuple[str | None, str]:
        return (self.msg.guild_id, self.msg.channel_id)

    def release(self) -> None:
        """Let successors of this job's author through (done, dropped or failed)."""
        self.written.set()
        # Break the author chain, or the newest job of a busy author keeps every
        # earlier job (and its message) reachable: unbounded memory on imports.
        self.prev = None


class Batch(list[Job]):
    """The jobs handed to one ``process`` call, in queue order, with the
    extraction slot the batch holds and its share of the active bound (the
    queue's callbacks)."""

    def __init__(
        self,
        jobs: Sequence[Job],
        on_extracted: Callable[[], None],
        on_active: Callable[[bool], None],
    ) -> None:
        super().__init__(jobs)
        self._on_extracted: Callable[[], None] | None = on_extracted
        self._on_active = on_active
        self.active = True

    def extraction_done(self) -> None:
        """Give the extraction slot back (idempotent)."""
        cb, self._on_extracted = self._on_extracted, None
        if cb is not None:
            cb()

    def set_active(self, active: bool) -> None:
        if active != self.active:
            self.active = active
            self._on_active(active)


def extraction_done(jobs: Sequence[Job]) -> None:
    """``Batch.extraction_done`` for whatever sequence ``process`` was given."""
    if isinstance(jobs, Batch):
        jobs.extraction_done()


async def wait_written(jobs: Sequence[Job], prev: Job) -> None:
    """Wait until ``prev`` (an earlier message of an author in ``jobs``) has
    written; meanwhile the batch does not count as active."""
    if prev.written.is_set():
        return
    if isinstance(jobs, Batch):
        jobs.set_active(False)
        try:
            await prev.written.wait()
        finally:
            jobs.set_active(True)
    else:
        await prev.written.wait()


async def release_in_order(jobs: Sequence[Job]) -> None:
    """Set ``written`` on each job once its predecessor has written: what a
    batch does for the jobs it did not write itself (failure), so successors
    of their authors still wait for the earlier messages."""
    for job in jobs:
        prev = job.prev
        if prev is not None and not prev.written.is_set() and prev not in jobs:
            await prev.written.wait()
        job.release()
