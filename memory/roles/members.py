"""``Memory.members``: a member's own view of what memory keeps about them, and
their corrections (``/memory about-me``, ``export-me``, ``correct``,
``forget-fact``).

A member sees the facts whose subject is them, except those learned in
channels they cannot read (counted, not shown), and their own stored
messages. A fact's evidence quote is shown only when it quotes the member's
own message: a fact about them drawn from someone else's words must not hand
them that person's words. Corrections and deletes act only on such a visible
fact about the member; anything else is refused here, whatever the caller
sent (``NotYours``).
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.clock import Clock, iso
from memory.db.core import Database
from memory.errors import InvalidInput
from memory.models import Fact, StoredMessage
from memory.roles.facts import FactOps
from memory.store import members as store_members
from memory.store.erase import ErasureCompactor

FACTS_MAX = 2000  # facts about one member an answer or an export holds
EXPORT_MESSAGES_MAX = 20_000
CHOICES_MAX = 25  # Discord's limit for autocomplete choices


class NotYours(InvalidInput):
    """The fact is not one the member may change: about someone else, server
    lore, unknown, or from a channel they cannot read."""


@dataclass(frozen=True)
class MemberFact:
    id: int
    fact: str
    fact_type: str
    confidence: float
    active: bool
    channel_id: str | None
    # The member's own message the fact was drawn from, and its quote; None
    # when it came from someone else's message (theirs to keep).
    source_message_id: str | None
    evidence: str | None
    observed_at: str | None
    updated_at: str


@dataclass(frozen=True)
class MemberRecord:
    """What ``/memory about-me`` shows."""

    guild_id: str
    user_id: str
    facts: list[MemberFact]
    hidden_facts: int  # facts about them from channels they cannot read
    message_counts: dict[str, int]  # their stored messages per channel

    @property
    def messages_total(self) -> int:
        return sum(self.message_counts.values())


@dataclass(frozen=True)
class MemberExport:
    """``/memory export-me``: the record, the member's own messages, and when."""

    record: MemberRecord
    messages: list[StoredMessage]
    messages_truncated: bool
    exported_at: str


class MemberData:
    def __init__(
        self, db: Database, facts: FactOps, compactor: ErasureCompactor, clock: Clock
    ) -> None:
        self._db = db
        self._facts = facts
        self._compactor = compactor
        self._clock = clock

    async def known(self, guild_id: str, user_id: str) -> bool:
        """Whether the guild holds anything of the member (a forget would erase something)."""
        return bool(await self._db.read(store_members.is_known, guild_id, user_id))

    async def about(
        self, guild_id: str, user_id: str, visible_channels: set[str] | None
    ) -> MemberRecord:
        """``visible_channels``: the channels the member can read (None: all)."""
        facts = await self._db.read(store_members.facts_about, guild_id, user_id, FACTS_MAX)
        shown = [f for f in facts if _visible(f, visible_channels)]
        sources = [f.source_message_id for f in shown if f.source_message_id]
        authors = await self._db.read(store_members.authors_of, guild_id, sources)
        counts = await self._db.read(store_members.message_counts, guild_id, user_id)
        return MemberRecord(
            guild_id,
            user_id,
            [_member_fact(f, authors.get(f.source_message_id or "") == user_id) for f in shown],
            len(facts) - len(shown),
            dict(counts),
        )

    async def export(
        self, guild_id: str, user_id: str, visible_channels: set[str] | None
    ) -> MemberExport:
        record = await self.about(guild_id, user_id, visible_channels)
        messages = await self._db.read(
            store_members.messages_of, guild_id, user_id, EXPORT_MESSAGES_MAX + 1
        )
        return MemberExport(
            record,
            messages[:EXPORT_MESSAGES_MAX],
            len(messages) > EXPORT_MESSAGES_MAX,
            iso(self._clock()),
        )

    async def own_facts(
        self,
        guild_id: str,
        user_id: str,
        visible_channels: set[str] | None,
        query: str = "",
        limit: int = CHOICES_MAX,
    ) -> list[MemberFact]:
        """Current facts about the member that they can see, matching ``query``
        (words anywhere, any case): the choices of ``correct`` and ``forget-fact``."""
        record = await self.about(guild_id, user_id, visible_channels)
        words = query.casefold().split()
        found = [f for f in record.facts if f.active and all(w in f.fact.casefold() for w in words)]
        return found[:limit]

    async def correct(
        self,
        guild_id: str,
        user_id: str,
        fact_id: int,
        text: str,
        visible_channels: set[str] | None,
    ) -> Fact:
        """Replace the text of a fact about the member with their own (the
        facts edit path: guards, history ``update`` by ``user:<id>``,
        re-embedding). ``NotYours`` or ``InvalidInput`` when refused."""
        await self._mine(guild_id, user_id, fact_id, visible_channels)
        fact = await self._facts.edit(guild_id, fact_id, text=text, actor=f"user:{user_id}")
        if fact is None:  # deleted meanwhile
            raise NotYours("that fact is gone")
        return fact

    async def forget_fact(
        self, guild_id: str, user_id: str, fact_id: int, visible_channels: set[str] | None
    ) -> Fact:
        """Delete one fact about the member (history ``delete`` by
        ``user:<id>``, no content kept); its bytes go with the next rewrite
        of the database file. The fact as it was."""
        fact = await self._mine(guild_id, user_id, fact_id, visible_channels)
        if not await self._facts.delete(guild_id, fact_id, actor=f"user:{user_id}"):
            raise NotYours("that fact is gone")
        self._compactor.request()
        return fact

    async def _mine(
        self, guild_id: str, user_id: str, fact_id: int, visible_channels: set[str] | None
    ) -> Fact:
        fact = await self._facts.get(guild_id, fact_id)
        if fact is None or fact.subject != user_id or not _visible(fact, visible_channels):
            raise NotYours("you can only change facts about yourself")
        return fact


def _visible(fact: Fact, channels: set[str] | None) -> bool:
    return channels is None or fact.channel_id is None or fact.channel_id in channels


def _member_fact(f: Fact, own_source: bool) -> MemberFact:
    return MemberFact(
        id=f.id,
        fact=f.fact,
        fact_type=f.fact_type,
        confidence=f.confidence,
        active=f.is_active,
        channel_id=f.channel_id,
        source_message_id=f.source_message_id if own_source else None,
        evidence=f.evidence_text if own_source else None,
        observed_at=f.observed_at,
        updated_at=f.updated_at,
    )
