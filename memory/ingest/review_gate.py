"""The write path's gate to the moderators' review queue: inside the write
transaction, after the write decision, a candidate the guild's
``review_policy`` holds goes to ``review_queue`` instead of the facts
(``memory.review_policy`` says which and why).

Used by the pipeline for extracted facts and by ``Memory.lore`` for lore
lines; a member's correction of someone else's fact is queued by
``Memory.review`` itself. A queued item is announced (``announce``) once its
transaction has committed, from the event loop, so the bot posts it at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from memory.clock import iso, parse_iso
from memory.db.core import Connection
from memory.decision import Decision
from memory.extract.near_miss import near_miss
from memory.guild_settings import GuildSettings
from memory.models import LORE_SUBJECT
from memory.review_policy import (
    NEAR_MISS,
    PINNED,
    POLICY_ALL,
    SENSITIVE,
    Flag,
    Queued,
    Standing,
    confidence_flag,
    holds,
    standing_flags,
)
from memory.store import review as store_review
from memory.store.fact_decision import NewFact
from memory.store.ops import log_action

log = logging.getLogger(__name__)


@dataclass
class ReviewStats:
    queued: int = 0  # memories sent to the review queue instead of the facts
    by_flag: dict[str, int] = field(default_factory=dict)


class ReviewGate:
    def __init__(self) -> None:
        self.stats = ReviewStats()
        # Called on the event loop when items were queued since the last call.
        self.on_queued: Callable[[], None] | None = None
        self._announced = 0

    def consider(
        self,
        con: Connection,
        settings: GuildSettings,
        new: NewFact,
        decision: Decision,
        *,
        kind: str,
        author_id: str | None,
        now: str,
        message: str | None = None,
        author_name: str | None = None,
        sensitive: str | None = None,
        standing: Standing | None = None,
    ) -> Queued | None:
        """Queue ``new`` when the guild's policy holds it (its item, with why);
        None: write it as decided. ``message`` and ``author_name``: the
        cleaned message it was extracted from, for the near-miss check;
        ``sensitive``: its category when ``sensitive_facts = review`` sent it
        here; ``standing``: the member writing lore."""
        policy = settings.review_policy
        if policy == "off":
            return None
        flags: list[Flag] = []
        # The extractor's certainty; a lore line's confidence is a constant.
        low = confidence_flag(new.confidence, settings.review_min_confidence)
        if low is not None and kind == "fact":
            flags.append(low)
        if message is not None:
            why = near_miss(new.fact, message, author_name)
            if why is not None:
                flags.append(Flag(NEAR_MISS, why))
        if sensitive is not None:
            flags.append(Flag(SENSITIVE, f"{sensitive} (sensitive_facts = review)"))
        if decision.kind in ("update", "supersede"):
            pinned = store_review.pinned_or_canon(con, new.guild_id, decision.targets)
            if pinned:
                verb = "supersedes" if decision.kind == "supersede" else "rewrites"
                flags.append(Flag(PINNED, f"{verb} fact {', '.join(map(str, pinned))}"))
        if kind == "lore":
            flags += standing_flags(
                standing,
                roles=settings.review_lore_roles,
                min_account_days=settings.review_lore_min_account_days,
                now=parse_iso(now),
            )
        if not holds(policy, decision.kind, flags):
            return None
        if not flags:
            flags.append(Flag(POLICY_ALL, "review_policy = all"))
        target = decision.targets[0] if decision.targets else decision.closed_by
        if target is None:
            target = store_review.closest_fact(con, new.guild_id, new.subject, new.fact)
        expires = iso(parse_iso(now) + timedelta(days=settings.review_expire_days))
        item_id = store_review.enqueue(
            con,
            guild_id=new.guild_id,
            kind=kind,
            subject=new.subject,
            author_id=author_id,
            channel_id=new.channel_id,
            source_message_id=new.source_message_id,
            fact=new.fact,
            fact_type=new.fact_type,
            evidence=new.evidence,
            confidence=new.confidence,
            observed_at=new.observed_at,
            target_fact_id=target,
            flags=flags,
            now=now,
            expires_at=expires,
        )
        codes = [f.code for f in flags]
        # Content-free: the text waits in the queue, not in the log.
        log_action(
            con,
            "memory_review",
            f"{kind} held for review as item {item_id}: {', '.join(codes)}",
            now,
            guild_id=new.guild_id,
            subject=author_id if new.subject == LORE_SUBJECT else new.subject,
            detail={
                "item_id": item_id,
                "event": "queued",
                "flags": codes,
                "decision": decision.kind,
                "message_id": new.source_message_id,
            },
        )
        self.stats.queued += 1
        for code in codes:
            self.stats.by_flag[code] = self.stats.by_flag.get(code, 0) + 1
        return Queued(item_id, new.fact, tuple(flags))

    def announce(self) -> None:
        """On the event loop, after the writes: tell the listener when
        something was queued since the last call."""
        if self.stats.queued != self._announced:
            self._announced = self.stats.queued
            if self.on_queued is not None:
                self.on_queued()
