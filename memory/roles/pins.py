"""``Memory.pins``: pinned messages are canon lore.

A pinned message becomes a guild lore fact of type ``canon`` (confidence
0.9, the message kept as its source) that retrieval ranks above
chat-extracted facts (``ScoringWeights.canon_boost``); unpinning archives it
(history ``archive``). The guild's settings apply as to any message: nothing
from an excluded channel, nothing while memory is off. The text passes the
instruction and secret checks, like any stored fact.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from memory.clock import Clock, iso
from memory.db.core import Connection, Database
from memory.embed.service import EmbeddingService
from memory.extract.guards import normalise_fact, operator_text_refusal
from memory.guild_settings import GuildSettingsCache
from memory.models import Fact
from memory.snapshot import SnapshotRefresher
from memory.store import pins as store_pins

log = logging.getLogger(__name__)

PIN_PREFIX = "Pinned: "
ACTOR = "discord:pin"


@dataclass
class PinStats:
    pinned: int = 0
    unpinned: int = 0
    refused: int = 0  # pins whose text the safety checks refused, or empty ones


def canon_text(content: str) -> str | None:
    """The fact text of a pinned message, or None when it cannot be one."""
    text = normalise_fact(PIN_PREFIX + " ".join((content or "").split()))
    if text is None or len(text) <= len(PIN_PREFIX) + 1:
        return None
    if operator_text_refusal(text) is not None:
        return None
    return text


class PinOps:
    def __init__(
        self,
        db: Database,
        embeddings: EmbeddingService,
        snapshot: SnapshotRefresher,
        settings: GuildSettingsCache,
        clock: Clock,
    ) -> None:
        self._db = db
        self._embeddings = embeddings
        self._snapshot = snapshot
        self._settings = settings
        self._clock = clock
        self.stats = PinStats()

    async def pin(
        self,
        guild_id: str,
        channel_id: str,
        message_id: str,
        content: str,
        *,
        created_at: str | None = None,
        actor: str = ACTOR,
    ) -> Fact | None:
        """Make the pinned message canon lore; None when the guild's settings
        leave it out or its text cannot be stored."""
        gs = await self._settings.get(guild_id)
        if not gs.memory_enabled or channel_id in gs.excluded_channels:
            return None
        text = canon_text(content)
        if text is None:
            self.stats.refused += 1
            log.info("pinned message %s not made canon: empty or refused text", message_id)
            return None
        now = iso(self._clock())

        def work(con: Connection) -> tuple[Fact, bool]:
            return store_pins.pin(
                con,
                guild_id=guild_id,
                channel_id=channel_id,
                message_id=message_id,
                text=text,
                observed_at=created_at or now,
                actor=actor,
                now=now,
            )

        fact, changed = await self._db.write(work)
        if changed:
            self.stats.pinned += 1
            self._embeddings.schedule_facts([fact])
            self._snapshot.request()
        return fact

    async def unpin(self, guild_id: str, message_id: str, *, actor: str = ACTOR) -> bool:
        """Archive the canon fact of an unpinned message; False if it had none."""
        now = iso(self._clock())
        fact = await self._db.write(store_pins.unpin, guild_id, message_id, actor, now)
        if fact is None:
            return False
        self.stats.unpinned += 1
        self._snapshot.request()
        return True

    async def canon_fact(self, guild_id: str, message_id: str) -> int | None:
        """The id of the canon fact a pinned message became, if any."""
        result: int | None = await self._db.read(store_pins.pinned_fact_id, guild_id, message_id)
        return result
