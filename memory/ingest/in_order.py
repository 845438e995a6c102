"""Keeping callers in the order they called.

The pipeline writes each member's facts in the order their messages reached
the queue (``Job.prev``), and the offline write decision reads the facts
already written: "I'm passionate about dancing" then "I've been into dancing
since I was a kid" keeps the first and notes the second as the same opinion;
the other way round keeps the second. So the queue's order must be the order
in which messages were handed to ``Memory.ingest_message``, whatever happens
to each call on the way: a bulk import hands over a chunk of messages at once
(``asyncio.gather``), a call that reads the guild's settings from the
database (a cold cache, or one another process's commit dropped) resumes after
calls that found them cached, and calls waiting for room in the queue wake
together. Before this, 4 of about 30 imports of LoCoMo's development
conversations wrote one member's messages out of order, and the facts kept
differed from run to run.

``InOrder`` hands out places in call order (synchronously, before the caller's
first await); a place's turn comes once every earlier place has been left.
A caller that gives up early (a rejected message, an error, a cancellation)
leaves its place without holding the ones behind it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

__all__ = ["InOrder", "Place"]


@dataclass(eq=False)
class Place:
    """One caller's place in line."""

    _before: asyncio.Future[None] | None
    _mine: asyncio.Future[None]
    _left: bool = False

    async def turn(self) -> None:
        """Wait until every earlier place has been left."""
        before = self._before
        if before is not None and not before.done():
            # Shielded: a waiter that is cancelled must not cancel the line.
            await asyncio.shield(before)

    def leave(self) -> None:
        """Done with the place (again is harmless). The
        next place's turn comes when this one and every earlier one are left."""
        if self._left:
            return
        self._left = True
        mine, before = self._mine, self._before
        if before is None or before.done():
            mine.set_result(None)
        else:
            before.add_done_callback(lambda _: _settle(mine))
        self._before = None  # the line behind no longer keeps it alive


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class InOrder:
    """Places handed out in the order ``enter`` is called."""

    def __init__(self) -> None:
        self._tail: asyncio.Future[None] | None = None

    def enter(self) -> Place:
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        place = Place(self._tail, mine)
        self._tail = mine
        return place
