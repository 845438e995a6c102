"""``Memory.catch_up``: what Discord holds that the process did not see while
it was away (a restart, a crash, a shard taken over, a gateway session that
could not resume), and what changed there meanwhile.

The adapter reads each channel's history, oldest first (bot/cogs/catch_up.py);
this role says where to start and judges what comes back:

- **Where.** Every channel is read from the guild's newest stored message
  (in the channels the adapter can read) less ``reconcile_s``: roughly the
  last moments the process was there. Anything older was seen live, or left
  out on purpose. A later purge of the guild, or change of a setting that
  decides what is remembered (``memory_enabled``, ``excluded_channels``,
  ``ingest_bots``), moves the start to it: what was purged, or said while
  memory was off, is never read back. A guild with no stored message has no
  start and is not read (``guildlore import`` is the tool for the past).
- **New messages** go through the normal ingest path (``Admission``, as
  ``Memory.ingest_message``), oldest first, so a message stored already
  changes nothing. One whose author was forgotten after it was written is
  not read back.
- **Reconcile.** Within what was actually read, a stored message Discord no
  longer returns is erased as a Discord delete is, and one Discord marks
  edited whose text differs is handled as an edit (``MessageLifecycle``).
  What was read is the range from the start to the last message returned,
  or to the end of the channel when the read got there; the stored messages
  judged are read before the channel is, so each of them existed on Discord
  when it was read. A read that failed judges nothing, and nothing past
  what was read is judged (a limit reached, a shutdown).
- **Bounds**: at most ``channel_limit`` messages read per channel and
  ``guild_limit`` per run over the guild's channels; the channels left when
  the guild's bound is spent are not read, and the report says so.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta

from memory.clock import DISCORD_EPOCH, Clock, iso, parse_iso
from memory.config import IngestConfig
from memory.db.core import Connection, Database
from memory.errors import InvalidInput
from memory.ingest.validate import validate_message
from memory.models import IncomingMessage, IngestOutcome
from memory.roles.lifecycle import MessageLifecycle
from memory.store import facts as store_facts
from memory.store import messages as store_messages
from memory.store import ops as store_ops

log = logging.getLogger(__name__)

# The guild settings that decide what is remembered: a change of one (or a
# purge of the guild) moves the start of a catch-up to it.
REMEMBERING_KEYS = ("memory_enabled", "excluded_channels", "ingest_bots")
# Messages handed to ingest (or judged) together.
BATCH = 100
# The counts a run writes to the action log.
DETAIL = (
    "start",
    "channels",
    "read",
    "ingested",
    "deleted",
    "edited",
    "forgotten",
    "limited",
    "failed",
    "not_read",
)

Admit = Callable[..., Awaitable[IngestOutcome]]


def snowflake_before(when: str) -> int:
    """The largest snowflake id below every message created at ``when`` or
    later (``history(after=…)`` reads from the next one)."""
    ms = (parse_iso(when) - DISCORD_EPOCH) // timedelta(milliseconds=1)
    return max(0, (int(ms) << 22) - 1)


def _number(message_id: str) -> int | None:
    try:
        return int(message_id)
    except ValueError:
        return None  # not a Discord id (a test's, an import's): never judged


@dataclass(frozen=True)
class CatchUpReport:
    """One guild's catch-up, counted."""

    guild_id: str
    start: str  # read from this time on (ISO)
    channels: int = 0  # channels read
    read: int = 0  # messages Discord returned
    ingested: int = 0  # new messages stored and queued
    deleted: int = 0  # stored messages Discord no longer has, erased
    edited: int = 0  # stored messages whose text Discord changed
    forgotten: int = 0  # messages of members forgotten since, not read back
    limited: int = 0  # channels whose read stopped before their end (a limit, a shutdown)
    failed: int = 0  # channels whose read failed (nothing judged there)
    not_read: int = 0  # channels not read: the guild's limit was spent

    @property
    def changed(self) -> bool:
        return bool(self.ingested or self.deleted or self.edited)

    def describe(self) -> str:
        text = (
            f"read {self.read} messages in {self.channels} channels since {self.start}: "
            f"{self.ingested} new, {self.deleted} deleted, {self.edited} edited on Discord"
        )
        if self.forgotten:
            text += f", {self.forgotten} of forgotten members left out"
        if self.limited or self.not_read:
            text += (
                f"; {self.limited} channels read in part, {self.not_read} not read "
                "(discord.catch_up_channel_limit, discord.catch_up_guild_limit, or a shutdown)"
            )
        if self.failed:
            text += f"; {self.failed} channels could not be read"
        return text


@dataclass(frozen=True)
class Parts:
    """What a catch-up works with: the database, the delete and edit path,
    the ingest path."""

    db: Database
    lifecycle: MessageLifecycle
    admit: Admit
    cfg: IngestConfig
    clock: Clock


class CatchUp:
    def __init__(
        self,
        *,
        db: Database,
        lifecycle: MessageLifecycle,
        admit: Admit,
        cfg: IngestConfig,
        clock: Clock,
    ) -> None:
        self._parts = Parts(db, lifecycle, admit, cfg, clock)

    async def newest(self, guild_id: str, channel_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """channel id → (id, created_at) of the newest message stored from
        Discord in each of ``channel_ids`` that has one."""
        found: dict[str, tuple[str, str]] = await self._parts.db.read(
            store_messages.newest_in_channels, guild_id, list(channel_ids)
        )
        return found

    async def plan(
        self,
        guild_id: str,
        channel_ids: Sequence[str],
        *,
        reconcile_s: float,
        channel_limit: int,
        guild_limit: int,
        texts: bool = True,
    ) -> GuildCatchUp | None:
        """Where a catch-up of these channels starts; None when there is
        nothing to catch up with (no stored message in them, or no limit).
        ``texts``: Discord sends message text (without the Message Content
        intent it does not, and no edit can be judged)."""
        if channel_limit <= 0 or guild_limit <= 0:
            return None

        def read(con: Connection) -> tuple[dict[str, tuple[str, str]], str | None, dict[str, str]]:
            return (
                store_messages.newest_in_channels(con, guild_id, list(channel_ids)),
                store_ops.memory_reset_at(con, guild_id, REMEMBERING_KEYS),
                store_facts.forgotten_members(con, guild_id),
            )

        newest, changed, forgotten = await self._parts.db.read(read)
        if not newest:
            return None
        last = max(at for _, at in newest.values())
        start = iso(parse_iso(last) - timedelta(seconds=max(0.0, reconcile_s)))
        if changed is not None and changed > start:
            start = changed
        return GuildCatchUp(
            parts=self._parts,
            guild_id=guild_id,
            start=start,
            after=snowflake_before(start),
            channel_limit=channel_limit,
            left=guild_limit,
            texts=texts,
            forgotten=forgotten,
        )


@dataclass
class GuildCatchUp:
    """One run over a guild's channels: ``channel`` for each, then ``finish``."""

    parts: Parts
    guild_id: str
    start: str
    after: int  # read the ids above this one
    channel_limit: int
    left: int  # messages this run may still read
    texts: bool
    forgotten: dict[str, str]
    report: CatchUpReport = field(init=False)

    def __post_init__(self) -> None:
        self.report = CatchUpReport(self.guild_id, self.start)

    @property
    def spent(self) -> bool:
        return self.left <= 0

    def count(self, **more: int) -> None:
        self.report = replace(
            self.report, **{k: getattr(self.report, k) + v for k, v in more.items()}
        )

    async def channel(self, channel_id: str) -> ChannelCatchUp:
        """The read of one channel, with what is stored there since the start
        (read now, before Discord is asked)."""
        limit = min(self.channel_limit, self.left)
        stored: dict[str, str] = await self.parts.db.read(
            store_messages.stored_in_channel,
            self.guild_id,
            channel_id,
            self.start,
            # Enough to judge every stored message a read of ``limit`` can
            # cover, even when many of them were deleted meanwhile; one past
            # it is left unjudged, never wrongly judged.
            max(limit, 1) * 4,
        )
        return ChannelCatchUp(self, channel_id, limit, stored)

    def skip(self, channels: int) -> None:
        """Channels left unread (the guild's bound was spent)."""
        self.count(not_read=channels)

    async def finish(self) -> CatchUpReport:
        """Log the run, and write it to the action log when it changed memory
        or could not read everything."""
        r = self.report
        level = logging.WARNING if (r.limited or r.not_read or r.failed) else logging.INFO
        if r.changed or level == logging.WARNING:
            log.log(level, "catch-up of guild %s: %s", self.guild_id, r.describe())
            detail = {k: getattr(r, k) for k in DETAIL}
            now = iso(self.parts.clock())
            await self.parts.db.write(
                lambda con: store_ops.log_action(
                    con, "catch_up", r.describe(), now, guild_id=self.guild_id, detail=detail
                )
            )
        else:
            log.info("catch-up of guild %s: nothing new since %s", self.guild_id, self.start)
        return r


@dataclass
class ChannelCatchUp:
    """One channel's read: ``add`` (or ``present``) each message Discord
    returns, oldest first, then ``close`` or ``failed``."""

    run: GuildCatchUp
    channel_id: str
    limit: int  # the most messages to read here
    stored: dict[str, str]  # id → text stored since the start, read before the channel
    seen: set[str] = field(default_factory=set)
    last: int = 0  # the highest id Discord returned
    read: int = 0
    _batch: list[IncomingMessage] = field(default_factory=list)

    def present(self, message_id: str) -> None:
        """A message Discord has that is not for memory (a join, a pin, the
        bot's own): it only counts as still there."""
        self._returned(message_id)

    async def add(self, msg: IncomingMessage) -> None:
        """A member's message as Discord has it now (``edited_at`` set when it
        was edited); handled in batches."""
        self._returned(msg.id)
        self._batch.append(msg)
        if len(self._batch) >= BATCH:
            await self._flush()

    def _returned(self, message_id: str) -> None:
        self.seen.add(message_id)
        self.read += 1
        self.run.left -= 1
        number = _number(message_id)
        if number is not None and number > self.last:
            self.last = number

    async def close(self, *, complete: bool) -> None:
        """The read ended: ``complete`` when it got to the end of the channel,
        otherwise (a limit, a shutdown) only what it returned is judged."""
        await self._flush()
        through = None if complete else self.last
        missing = [
            i
            for i in self.stored
            if i not in self.seen
            and (n := _number(i)) is not None
            and n > self.run.after
            and (through is None or n <= through)
        ]
        deleted = 0
        if missing:
            report = await self.run.parts.lifecycle.delete_messages(self.run.guild_id, missing)
            deleted = report.messages
        self.run.count(channels=1, read=self.read, deleted=deleted, limited=int(not complete))

    async def failed(self, reason: str) -> None:
        """The read failed part-way: what it ingested stays, nothing is erased."""
        log.warning(
            "catch-up of channel %s (guild %s) could not be read: %s",
            self.channel_id,
            self.run.guild_id,
            reason,
        )
        try:
            await self._flush()
        finally:
            self.run.count(read=self.read, failed=1)

    async def _flush(self) -> None:
        batch, self._batch = self._batch, []
        if not batch:
            return
        parts = self.run.parts
        new: list[IncomingMessage] = []
        edited = forgotten = 0
        for msg in batch:
            try:
                clean = validate_message(msg, max_chars=parts.cfg.message_max_chars)
            except InvalidInput as exc:
                log.info("catch-up left out message %r: %s", msg.id[:40], exc)
                continue
            if clean.id in self.stored:
                if await self._edited(clean):
                    edited += 1
                continue
            if not clean.content.strip():
                continue  # nothing to remember (an attachment alone), as live
            gone = self.run.forgotten.get(clean.author_id)
            if gone is not None and clean.created_at <= gone:
                forgotten += 1
                continue
            new.append(clean)
        outcomes = await asyncio.gather(*(parts.admit(m, backpressure=True) for m in new))
        ingested = sum(1 for o in outcomes if o.status == "queued" and o.reason is None)
        self.run.count(ingested=ingested, edited=edited, forgotten=forgotten)

    async def _edited(self, msg: IncomingMessage) -> bool:
        """Handle a stored message whose text Discord changed as an edit; True
        if it was one. Only a message Discord marks edited can have changed
        (a mention's name shown differently is not an edit), and only one
        whose stored text is still what it was before the read (a live edit
        received meanwhile is newer than what the read returned)."""
        if not self.run.texts or msg.edited_at is None:
            return False
        before = self.stored[msg.id]
        if msg.content == before:
            return False
        parts = self.run.parts
        current = await parts.db.read(store_messages.get_message, self.run.guild_id, msg.id)
        if current is None or current.content != before:
            return False
        report = await parts.lifecycle.edit_message(
            self.run.guild_id, msg.id, msg.content, msg.edited_at
        )
        return report.applied
