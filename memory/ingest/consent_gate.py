"""The pipeline's gate for sensitive facts: a candidate fact about a member
in a special category (``memory.extract.sensitivity``) is stored, queued for
the member's consent, dropped, or sent to the moderators' review queue
(``memory.ingest.review_gate``), as the guild's ``sensitive_facts`` says.

With the LLM classifier, labels are computed once per batch, before its
write transactions (the label call is I/O and must not run inside one), only
for the candidates the guards accept, and not at all when the guild stores
sensitive facts anyway. The offline word lists need no I/O: ``route``
applies them to each accepted candidate inside the write.

In ``ask`` mode the message a queued fact came from waits too (``holds``):
its text is withheld from search, reply windows, episodes and the journal,
and is not embedded, until the member accepts (``memory.store.held_messages``).
A member who is asked "may I remember that you were diagnosed with
dyslexia?" and says no should not find the bot quoting the message anyway.
Only a message a sensitive fact about its author was drawn from is held: the
offline word lists, run over whole messages, flag ordinary talk too often
(a link reads as contact details, a papyrology server's "New Testament" as
religion) to ask members about every such message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from memory.clock import iso, parse_iso
from memory.db.core import Connection
from memory.extract.guards import filter_candidates
from memory.extract.sensitivity import KeywordClassifier, SensitivityClassifier, classify_text
from memory.models import Candidate, IncomingMessage
from memory.store import consent as store_consent
from memory.store.ops import log_action
from memory.text import compact

CONSENT_DAYS = 7

Route = Literal["store", "queued", "dropped", "review"]


@dataclass
class ConsentStats:
    queued: int = 0  # waiting for the member's answer
    dropped: int = 0  # refused by ``sensitive_facts = never``
    stored: int = 0  # sensitive, stored by ``sensitive_facts = store``
    label_calls: int = 0


@dataclass(frozen=True)
class BatchLabels:
    """The guild's mode and the category of each accepted candidate (by its
    compact text) for one batch."""

    mode: str = "store"
    labels: dict[str, str | None] = field(default_factory=dict)


def _text(cand: Candidate) -> str:
    return f"{cand.fact} {cand.evidence}" if cand.evidence else cand.fact


class SensitiveGate:
    def __init__(self, classifier: SensitivityClassifier, *, days: int = CONSENT_DAYS) -> None:
        self.classifier = classifier
        self.days = days
        self.stats = ConsentStats()

    async def label(
        self, mode: str, items: Sequence[tuple[Sequence[Candidate], str | None, str]]
    ) -> BatchLabels:
        """``items``: (candidates, cleaned text, author) per message."""
        if mode == "store" or isinstance(self.classifier, KeywordClassifier):
            # The word lists need no I/O: ``route`` applies them per candidate.
            return BatchLabels(mode)
        accepted: dict[str, str] = {}
        for cands, cleaned, author in items:
            if not cands or cleaned is None:
                continue
            for cand in filter_candidates(list(cands), cleaned, author=author).accepted:
                accepted.setdefault(compact(cand.fact), _text(cand))
        if not accepted:
            return BatchLabels(mode)
        self.stats.label_calls += 1
        cats = await self.classifier.classify(list(accepted.values()))
        return BatchLabels(mode, dict(zip(accepted, cats, strict=True)))

    @staticmethod
    def category(batch: BatchLabels, cand: Candidate) -> str | None:
        """The special category of an accepted candidate, None for none."""
        key = compact(cand.fact)
        return batch.labels[key] if key in batch.labels else classify_text(_text(cand))

    def holds(self, batch: BatchLabels, accepted: Sequence[Candidate]) -> bool:
        """Whether the message these candidates came from waits for consent
        with them: the guild asks, and one of them is sensitive."""
        return batch.mode == "ask" and any(self.category(batch, c) for c in accepted)

    def route(
        self, con: Connection, batch: BatchLabels, cand: Candidate, msg: IncomingMessage, now: str
    ) -> Route:
        """Where an accepted candidate goes; a queued one is in the queue now;
        ``review``: to the review gate, with its ``category``."""
        category = self.category(batch, cand)
        if category is None:
            return "store"
        if batch.mode == "review":
            return "review"
        if batch.mode == "store":
            self.stats.stored += 1
            return "store"
        if batch.mode == "never":
            self.stats.dropped += 1
            return "dropped"
        expires = iso(parse_iso(now) + timedelta(days=self.days))
        store_consent.enqueue(
            con,
            guild_id=msg.guild_id or "",
            user_id=msg.author_id,
            channel_id=msg.channel_id,
            message_id=msg.id,
            fact=cand.fact,
            fact_type=cand.type,
            evidence=cand.evidence,
            confidence=max(0.0, min(1.0, float(cand.confidence))),
            category=category,
            observed_at=msg.created_at,
            now=now,
            expires_at=expires,
        )
        self.stats.queued += 1
        return "queued"

    @staticmethod
    def log(con: Connection, msg: IncomingMessage, routes: Sequence[Route], now: str) -> None:
        """One content-free action-log row for a message's withheld facts."""
        queued, dropped = routes.count("queued"), routes.count("dropped")
        if not queued and not dropped:
            return
        log_action(
            con,
            "memory_sensitive",
            f"{queued} sensitive facts wait for consent, {dropped} dropped",
            now,
            guild_id=msg.guild_id,
            subject=msg.author_id,
            detail={"message_id": msg.id, "queued": queued, "dropped": dropped},
        )
