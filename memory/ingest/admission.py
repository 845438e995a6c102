"""Admitting a message into ingest (``Memory.ingest_message``): the checks
that reject it, each counted by reason, then the queue — in the order of the
calls, even when they overlap (``memory.ingest.in_order`` says why)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from memory.config import IngestConfig
from memory.errors import InvalidInput
from memory.guild_settings import GuildSettings
from memory.ingest.in_order import InOrder
from memory.ingest.queue import IngestQueue
from memory.ingest.validate import validate_message
from memory.models import IncomingMessage, IngestOutcome

__all__ = ["Admission"]

log = logging.getLogger(__name__)


class Admission:
    """What ``Memory.ingest_message`` does before the queue: the checks that
    reject a message (with a counted reason), then the queue, in call order."""

    def __init__(
        self,
        cfg: IngestConfig,
        queue: IngestQueue,
        settings: Callable[[str], Awaitable[GuildSettings]],
        before_ingest: Callable[[IncomingMessage], IncomingMessage | None],
        *,
        ingesting: Callable[[], bool],
        rejected: dict[str, int],
        opted_out: Callable[[str, str], Awaitable[bool]] | None = None,
    ) -> None:
        self._cfg = cfg
        self._queue = queue
        self._settings = settings
        self._before_ingest = before_ingest
        self._ingesting = ingesting  # the engine was started to ingest
        self._line = InOrder()
        # (guild, author) → the author asked not to be remembered here
        # (``Memory.opt_outs``): every way in — live, catch-up, import, voice —
        # passes this check, so nothing of theirs is stored, journaled,
        # extracted or embedded.
        self._opted_out = opted_out
        self.rejected = rejected  # rejections by reason (the admin counters show them)

    async def admit(self, msg: IncomingMessage, *, backpressure: bool = False) -> IngestOutcome:
        """Persist, then enqueue (see ``Memory.ingest_message``)."""
        place = self._line.enter()
        try:
            if not self._ingesting():
                return self._reject(msg, "opened without ingest")
            if not self._queue.accepting:
                return self._reject(msg, "shutting down")
            try:
                clean = validate_message(msg, max_chars=self._cfg.message_max_chars)
            except InvalidInput as exc:
                return self._reject(msg, str(exc))
            if clean.is_bot and not self._cfg.ingest_bot_messages:
                return self._reject(msg, "bot messages are not ingested (setting)")
            gs = await self._settings(clean.guild_id or "")
            if not gs.memory_enabled:
                return self._reject(msg, "memory is off for this guild (setting)")
            if clean.channel_id in gs.excluded_channels:
                return self._reject(msg, "channel excluded from memory (setting)")
            if clean.is_bot and not gs.ingest_bots:
                return self._reject(msg, "bot messages are not ingested (guild setting)")
            if self._opted_out is not None and await self._opted_out(
                clean.guild_id or "", clean.author_id
            ):
                return self._reject(msg, "the author opted out of memory here")
            await place.turn()
            current = self._before_ingest(clean)
            if current is None:
                return self._reject(msg, "deleted on Discord before it was stored")
        finally:
            place.leave()
        # No await between leaving the place and the queue taking its own
        # (the start of ``submit`` runs in this same step): the next caller
        # cannot reach the queue first.
        return await self._queue.submit(current, backpressure=backpressure)

    def _reject(self, msg: IncomingMessage, reason: str) -> IngestOutcome:
        key = reason.split(":")[0][:60]
        self.rejected[key] = self.rejected.get(key, 0) + 1
        self._queue.stats.rejected += 1
        log.info("ingest rejected message %r: %s", str(msg.id)[:40], reason)
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        fut.set_result(False)
        return IngestOutcome(str(msg.id)[:64], "rejected", reason, fut)
