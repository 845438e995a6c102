"""``Memory.members``: a member's own view of what memory keeps about them
(``/memory about-me``, ``export-me``, the choices of ``correct`` and
``forget-fact``); their changes are ``Memory.corrections``
(``memory.roles.corrections``).

A member sees the facts whose subject is them, except those learned in
channels they cannot read (counted, not shown), each with its history in
plain events, and their own stored messages. A fact's evidence quote is
shown only when it quotes the member's own message or correction: a fact
about them drawn from someone else's words must not hand them that person's
words.

Changes act only on a visible fact about the member; anything else is
refused with the reason that is true for them: ``FactMissing`` (no such fact,
or one already forgotten — when it was theirs, since when), ``FactHidden``
(theirs, from a channel they cannot read), ``NotYours`` (about someone else).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memory.clock import Clock, iso
from memory.db.core import Database
from memory.errors import InvalidInput
from memory.models import Fact, HistoryEntry, StoredMessage
from memory.store import members as store_members

FACTS_MAX = 2000  # facts about one member an answer or an export holds
EXPORT_MESSAGES_MAX = 20_000
CHOICES_MAX = 25  # Discord's limit for autocomplete choices


class NotYours(InvalidInput):
    """The fact is not one the member may change: about someone else, or server lore."""


class FactHidden(NotYours):
    """A fact about the member from a channel they cannot read."""


class FactMissing(InvalidInput):
    """No fact with that id: it never existed, or it was erased. ``forgotten_at``
    (ISO) when it was the member's own fact and was erased."""

    def __init__(self, fact_id: int, forgotten_at: str | None = None) -> None:
        super().__init__(f"there is no fact #{fact_id}")
        self.fact_id = fact_id
        self.forgotten_at = forgotten_at


@dataclass(frozen=True)
class FactEvent:
    """One step of a fact's history, for the member."""

    event: str  # add, update, supersede, noop, archive, restore, expire, reopen, …
    at: str
    by: str  # "you", "another member", "a moderator", "a pinned message", "automatically"
    old_text: str | None = None
    new_text: str | None = None


@dataclass(frozen=True)
class MemberFact:
    id: int
    fact: str
    fact_type: str
    confidence: float
    active: bool
    channel_id: str | None
    # The member's own message the fact was drawn from, and its quote; None
    # when it came from someone else's message (theirs to keep). For a fact
    # the member wrote by a correction, the correction is the quote.
    source_message_id: str | None
    evidence: str | None
    observed_at: str | None
    updated_at: str
    # When it was said (``Fact.said_at``): the date about-me and exports show.
    said_at: str = ""
    valid_to: str | None = None  # superseded: no longer true since then
    corrected: bool = False  # written by the member's own correction
    history: tuple[FactEvent, ...] = field(default=())


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


def who(actor: str, user_id: str) -> str:
    """An actor of the history in words a member understands."""
    if actor == f"user:{user_id}":
        return "you"
    if actor.startswith("user:"):
        return "another member"
    if actor.startswith("operator"):
        return "a moderator"
    if actor == "discord:pin":
        return "a pinned message"
    return "automatically"


class MemberData:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    async def known(self, guild_id: str, user_id: str) -> bool:
        """Whether the guild holds anything of the member (a forget would erase something)."""
        return bool(await self._db.read(store_members.is_known, guild_id, user_id))

    # -- what they see --------------------------------------------------------------------
    async def about(
        self, guild_id: str, user_id: str, visible_channels: set[str] | None
    ) -> MemberRecord:
        """``visible_channels``: the channels the member can read (None: all)."""
        facts = await self._db.read(store_members.facts_about, guild_id, user_id, FACTS_MAX)
        shown = [f for f in facts if visible(f, visible_channels)]
        sources = [f.source_message_id for f in shown if f.source_message_id]
        authors = await self._db.read(store_members.authors_of, guild_id, sources)
        counts = await self._db.read(store_members.message_counts, guild_id, user_id)
        histories = await self._db.read(store_members.histories, guild_id, [f.id for f in shown])
        return MemberRecord(
            guild_id,
            user_id,
            [
                _member_fact(
                    f,
                    authors.get(f.source_message_id or "") == user_id,
                    histories.get(f.id, []),
                    user_id,
                )
                for f in shown
            ],
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
        found = [
            f
            for f in record.facts
            if f.active and f.valid_to is None and all(w in f.fact.casefold() for w in words)
        ]
        return found[:limit]


def visible(fact: Fact, channels: set[str] | None) -> bool:
    """Whether a member who reads ``channels`` (None: all) may see ``fact``."""
    return channels is None or fact.channel_id is None or fact.channel_id in channels


def _events(history: list[HistoryEntry], user_id: str) -> tuple[FactEvent, ...]:
    return tuple(
        FactEvent(h.event, h.created_at, who(h.actor, user_id), h.old_text, h.new_text)
        for h in history
        if h.event not in ("consent_asked",)
    )


def _member_fact(
    f: Fact, own_source: bool, history: list[HistoryEntry], user_id: str
) -> MemberFact:
    # A fact the member wrote by a correction: its first row (add or
    # supersede) is theirs and it has no source message.
    corrected = (
        f.source_message_id is None
        and bool(history)
        and history[0].actor == f"user:{user_id}"
        and history[0].event in ("add", "supersede")
    )
    shown = own_source or corrected
    return MemberFact(
        id=f.id,
        fact=f.fact,
        fact_type=f.fact_type,
        confidence=f.confidence,
        active=f.is_active,
        channel_id=f.channel_id,
        source_message_id=f.source_message_id if own_source else None,
        evidence=f.evidence_text if shown else None,
        observed_at=f.observed_at,
        updated_at=f.updated_at,
        said_at=f.said_at,
        valid_to=f.valid_to,
        corrected=corrected,
        history=_events(history, user_id),
    )
