"""A piece of work two threads may run, whichever gets to it first."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from memory.db.core import Connection

log = logging.getLogger(__name__)


class SharedPart:
    """A piece of work that either of two threads may run, whichever gets to
    it first, on its own connection.

    The retriever offers half of a big FTS query to a second reader thread;
    the thread that needs the answer runs it itself if that reader has not
    started yet (all readers busy), and otherwise waits for it. So the work is
    never queued behind the very thread that waits for it (no deadlock), and
    never run twice.
    """

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self._fn = fn
        self._args = args
        self._lock = threading.Lock()
        self._claimed = False
        self._done = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None

    def _claim(self) -> bool:
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            return True

    def _run(self, con: Connection) -> None:
        try:
            self._result = self._fn(con, *self._args)
        except BaseException as exc:  # handed to the thread that waits
            self._error = exc
        finally:
            self._done.set()

    def offer(self, con: Connection) -> None:
        """Run it here unless another thread already has (a reader thread)."""
        if self._claim():
            self._run(con)

    def result(self, con: Connection) -> Any:
        """The answer: computed here on ``con`` if nobody started it yet."""
        if self._claim():
            self._run(con)
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._result


class Offers:
    """The parts a search has offered to a second reader and not seen finish.

    Nobody awaits an offer (the search takes the part over itself if no
    reader is free), so each is kept referenced until done and its outcome is
    retrieved, a failure logged at debug level: the search ran it anyway.
    """

    def __init__(self, what: str) -> None:
        self._what = what
        self._tasks: set[asyncio.Future[None]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def offer(
        self, read: Callable[[Callable[[Any], None]], Awaitable[None]], part: SharedPart
    ) -> None:
        """Hand ``part`` to a reader now through ``read`` (``Database.read``)."""
        task = asyncio.ensure_future(read(part.offer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(self._retrieve)

    def _retrieve(self, task: asyncio.Future[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.debug(
                "%s offer failed (the search ran it itself): %s", self._what, task.exception()
            )
