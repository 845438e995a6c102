"""Frozen value types that cross module boundaries.

Rows become these dataclasses at the store boundary; nothing outside
``memory.store`` reads a database row by key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

LORE_SUBJECT = "__lore__"
# The subject of every channel episode (its channel is the fact's channel_id).
EPISODE_SUBJECT = "__episode__"

# "canon": server lore a pinned message made, ranked above chat-extracted facts.
FactType = Literal["preference", "profile", "relationship", "project", "other", "lore", "canon"]
FACT_TYPES: tuple[str, ...] = (
    "preference",
    "profile",
    "relationship",
    "project",
    "other",
    "lore",
    "canon",
)
# What an id may be: an opaque token (a Discord snowflake, a synthetic voice
# id, a benchmark turn id), checked wherever an adapter hands one in.
ID_RE = re.compile(r"^[0-9A-Za-z_:.\-]{1,64}$")

MessageSource = Literal["text", "voice", "import"]
SearchScope = Literal["facts", "messages", "all"]
# What search looks in when its caller does not say: /memory search, guildlore
# search, the dashboard and its API, the model's memory_query. Facts answer
# "who is X?", past messages "when did we talk about X?"; measured on
# natural questions about a real export (README, "Search that answers").
DEFAULT_SEARCH_SCOPE: SearchScope = "all"
HistoryEvent = Literal["add", "update", "archive", "restore", "supersede", "delete", "forget"]
TraceAction = Literal["retrieved", "stored", "updated"]


@dataclass(frozen=True)
class IncomingMessage:
    """A message or voice utterance as the adapters hand it to the engine."""

    id: str
    guild_id: str | None
    channel_id: str
    author_id: str
    author_name: str
    content: str
    created_at: str  # ISO-8601 UTC, see memory.clock.iso
    source: MessageSource = "text"
    is_bot: bool = False
    reply_to_id: str | None = None
    # When the message was last edited (ISO-8601 UTC), as an export says: its
    # journal line is marked edited.
    edited_at: str | None = None
    # Pinned in its channel when exported (an import makes it canon lore).
    pinned: bool = False


@dataclass(frozen=True)
class StoredMessage:
    id: str
    guild_id: str
    channel_id: str
    author_id: str
    author_name: str
    content: str
    created_at: str
    source: str
    is_bot: bool
    state: str
    reply_to_id: str | None = None
    edited_at: str | None = None

    def to_incoming(self) -> IncomingMessage:
        """The message as an adapter handed it in (for processing it again)."""
        return IncomingMessage(
            id=self.id,
            guild_id=self.guild_id,
            channel_id=self.channel_id,
            author_id=self.author_id,
            author_name=self.author_name,
            content=self.content,
            created_at=self.created_at,
            source=self.source,  # type: ignore[arg-type]  # the table's CHECK keeps it one
            is_bot=self.is_bot,
            reply_to_id=self.reply_to_id,
            edited_at=self.edited_at,
        )


@dataclass(frozen=True)
class FailedMessage:
    """A message whose processing failed: waiting for a retry, or given up."""

    id: str
    guild_id: str
    channel_id: str
    author_name: str
    created_at: str
    content: str
    state: str  # "retry" | "failed"
    reason: str | None
    attempts: int  # failed attempts so far
    retry_at: str | None  # when the next attempt is due ("retry" only)


@dataclass(frozen=True)
class Candidate:
    """A fact proposed by an extractor, before the guards run."""

    fact: str
    type: str = "other"
    confidence: float = 0.6
    evidence: str | None = None
    # What produced it ("rules.identity", "rules.clause.my", "llm"): kept in
    # the fact's history row (the actor), so an operator can see why it exists.
    source: str | None = None


@dataclass(frozen=True)
class Fact:
    id: int
    guild_id: str
    channel_id: str | None
    subject: str
    fact: str
    fact_type: str
    evidence_text: str | None
    source_message_id: str | None
    confidence: float
    is_active: bool
    created_at: str
    updated_at: str
    # The source message's time of the first and the latest observation, and
    # the span the fact was true (valid_to None while current).
    observed_at: str | None = None
    last_observed_at: str | None = None
    valid_from: str | None = None
    valid_to: str | None = None

    @property
    def said_at(self) -> str:
        """When the fact was said: its latest observation's message time, so an
        imported fact shows its message's date, not the import's. A fact no
        message said (an operator's edit) shows when its row last changed."""
        return self.last_observed_at or self.observed_at or self.updated_at


class Remembered(NamedTuple):
    """What ``Memory.lore.remember`` stored: the fact, and the write decision
    ("add": new; "noop": already known; "update": a known fact took the more
    specific text; "supersede": it replaced a fact it contradicts). A (fact,
    event) pair, as ``Memory.traces.record`` takes it."""

    fact: Fact
    event: Literal["add", "noop", "update", "supersede"]


@dataclass(frozen=True)
class Procedure:
    """How a guild wants the bot to behave, set by a moderator.

    ``channel_id`` None: guild-wide; otherwise only in that channel (and its
    threads). ``author`` is the actor who added it (``user:<id>``, ``operator``).
    """

    id: int
    guild_id: str
    channel_id: str | None
    text: str
    author: str
    created_at: str


@dataclass(frozen=True)
class HistoryEntry:
    id: int
    guild_id: str
    fact_id: int | None
    event: str
    old_text: str | None
    new_text: str | None
    actor: str
    source_message_id: str | None
    reason: str | None
    created_at: str
    # The other fact of the change: a supersede row names the old or the new
    # fact, a historical row the newer fact that closed it.
    linked_fact_id: int | None = None


@dataclass(frozen=True)
class ScoreParts:
    lexical: float
    semantic: float | None
    confidence: float
    recency: float
    channel: float
    bm25: float = 0.0
    combined: float = 0.0
    passed: bool = False
    # Message ranking only (memory.scoring.fuse_message); 0 for facts.
    speaker: float = 0.0
    neighbour: float = 0.0
    date: float = 0.0
    statement: float = 0.0
    # How much the message speaks of its author, 0..1 (memory.retrieval.voice).
    first_person: float = 0.0
    # 1 when every fact taken from the message has since been superseded.
    superseded: float = 0.0
    # Facts only: 1 for canon lore (a pinned message), which ranks higher.
    canon: float = 0.0
    # What "same topic, newer first" added to ``combined`` (negative for an
    # older statement that made way for a newer one; memory.retrieval.newer_first).
    newer_first: float = 0.0
    # What a related fact among the candidates added to ``combined``
    # (memory.retrieval.related).
    related: float = 0.0
    # What fusing the rankings of the query's parts added to ``combined``, and
    # the part whose ranking voted most for the hit ("" for the whole query;
    # memory.retrieval.part_fusion).
    decomposed: float = 0.0
    query_part: str = ""
    # For a query naming members, on its first hits: why the hit is or is not
    # about them (memory.retrieval.attribution.ABOUT_REASONS; "" elsewhere).
    about: str = ""
    # 1 when the query asks who has something and the hit says the query's
    # words only under a negation ("not a papyrologist"): it fails the gate
    # (memory.retrieval.negation).
    negated: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "lexical": self.lexical,
            "semantic": self.semantic,
            "confidence": self.confidence,
            "recency": self.recency,
            "channel": self.channel,
            "bm25": self.bm25,
            "speaker": self.speaker,
            "neighbour": self.neighbour,
            "date": self.date,
            "statement": self.statement,
            "first_person": self.first_person,
            "superseded": self.superseded,
            "canon": self.canon,
            "newer_first": self.newer_first,
            "related": self.related,
            "decomposed": self.decomposed,
            "query_part": self.query_part,
            "about": self.about,
            "negated": self.negated,
            "combined": self.combined,
            "passed": self.passed,
        }


@dataclass(frozen=True)
class Hit:
    """One search result: a fact or a message, with its score parts."""

    kind: Literal["fact", "message"]
    id: str  # fact id (as text) or message id
    guild_id: str
    channel_id: str | None
    subject: str  # fact subject, or the message author id
    text: str
    fact_type: str | None
    evidence_text: str | None
    source_message_id: str | None
    confidence: float
    created_at: str
    score: float
    parts: ScoreParts
    author_name: str | None = None


@dataclass(frozen=True)
class PromptSlice:
    user_facts: tuple[Hit, ...]
    relevant_facts: tuple[Hit, ...]
    relevant_messages: tuple[Hit, ...]
    # Summaries of past conversations in channels the asker can see.
    episodes: tuple[Hit, ...] = ()

    @property
    def size(self) -> int:
        """Facts, messages and episodes in the slice."""
        return sum(
            len(p)
            for p in (self.user_facts, self.relevant_facts, self.relevant_messages, self.episodes)
        )


@dataclass(frozen=True)
class Trace:
    id: int
    guild_id: str
    channel_id: str | None
    message_id: str | None
    fact_id: int | None
    action: str
    content: str
    score: float | None
    score_parts: dict[str, Any] | None
    created_at: str
    # facts, lore, episodes, procedures, insights (memory.memory_types), or
    # messages; and where it came from: extractor, lore, operator, member,
    # import, voice. None on traces written before these were recorded.
    memory_type: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class ActionLogEntry:
    id: int
    guild_id: str | None
    kind: str
    message: str
    detail: dict[str, Any] | None
    created_at: str


@dataclass(frozen=True)
class MemberSummary:
    """One member as the guild page lists them: active facts about them,
    their stored messages and the time of the last one."""

    user_id: str
    display_name: str
    facts: int
    messages: int
    last_message: str | None


@dataclass(frozen=True)
class MemberPage:
    """One page of a guild's members; ``total``: all that match the filter,
    ``without_facts``: how many of those have no active fact."""

    members: tuple[MemberSummary, ...]
    total: int
    without_facts: int


@dataclass(frozen=True)
class RequestLogEntry:
    """One reply, search or extraction call in the request log: when, which
    guild, how long, which model, the tokens it reported and how it ended.
    ``detail`` is short and never holds message text or member ids."""

    id: int
    at: str
    guild_id: str
    kind: str  # "reply" | "search" | "extraction"
    outcome: str  # "ok" | "empty" | "error"
    latency_ms: float
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    detail: str | None = None


@dataclass(frozen=True)
class ForgetReport:
    guild_id: str
    user_id: str
    facts: int
    vectors: int
    messages: int
    traces: int
    journal_lines: int
    compaction_s: float = 0.0  # the rewrite of the database file that followed the erase
    receipt_id: str | None = None  # the deletion receipt (``Memory.receipts``)
    opted_out: bool = False  # the member is not remembered here from now on
    guilds: int = 1  # the guilds erased from (``forget_everywhere``: all of theirs)


@dataclass(frozen=True)
class IngestOutcome:
    """What ``ingest_message`` did with one message, right away."""

    message_id: str
    status: Literal["queued", "duplicate", "rejected"]
    reason: str | None = None
    # Resolves True when processed, False when dropped or rejected.
    done: Any = field(default=None, compare=False, repr=False)

    async def wait(self) -> bool:
        if self.done is None:
            return False
        return bool(await self.done)


@dataclass(frozen=True)
class PendingFact:
    """A sensitive fact about a member that waits for their consent (text
    kept only until it is decided or expires)."""

    id: int
    guild_id: str
    user_id: str
    channel_id: str | None
    message_id: str
    fact: str
    fact_type: str
    evidence_text: str | None
    confidence: float
    category: str
    observed_at: str | None
    created_at: str
    expires_at: str
    prompted_at: str | None


@dataclass(frozen=True)
class Episode:
    """A channel's conversation summarised: its text (a fact of type
    ``episode``), the span of its messages and how it was written
    (``llm`` or ``extractive``)."""

    fact_id: int
    guild_id: str
    channel_id: str
    text: str
    started_at: str
    ended_at: str
    message_count: int
    method: str
    created_at: str
    source_ids: tuple[str, ...] = ()
