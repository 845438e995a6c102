"""What the moderators' review queue holds and why: its value types and the
pure rules that flag a new memory (``memory.ingest.review_gate`` applies
them in the write; ``memory.roles.review`` decides the items).

A memory waits for a moderator (guild setting ``review_policy``):

- ``off`` (the default): never;
- ``flagged``: when a flag below says it is doubtful;
- ``all``: every new memory a member's words would write (a fact added,
  refined or superseding another; a lore line; a correction of someone
  else's fact). A re-observation of a known fact adds nothing and never waits.

An item is not a fact until it is approved: it lives in ``review_queue``,
not ``memory_facts``, so no read path of the facts can show it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, NamedTuple

from memory.clock import parse_iso

ReviewKind = Literal["fact", "lore", "correction"]
# How a decided item ended; ``withdrawn``: its message was deleted or edited,
# or its member forgotten, before anyone decided.
OUTCOMES = ("approved", "edited", "merged", "rejected", "expired", "withdrawn")
ACTIONS = ("approve", "reject", "edit", "merge")

# Flag codes (stored) → what a moderator reads.
LOW_CONFIDENCE = "low_confidence"
NEAR_MISS = "near_miss"
PINNED = "pinned"
SENSITIVE = "sensitive"
CORRECTION = "correction"
LORE_ROLE = "lore_role"
LORE_ACCOUNT_AGE = "lore_account_age"
POLICY_ALL = "all"
FLAG_TITLES = {
    LOW_CONFIDENCE: "Low confidence",
    NEAR_MISS: "Near-miss of the safety checks",
    PINNED: "Contradicts a pinned fact or canon",
    SENSITIVE: "Sensitive",
    CORRECTION: "Correction of someone else's fact",
    LORE_ROLE: "Lore from a member without a trusted role",
    LORE_ACCOUNT_AGE: "Lore from a new account",
    POLICY_ALL: "Every new memory is reviewed here",
}
# Write decisions that put something new into memory.
NEW_INFORMATION = ("add", "update", "supersede")


class Flag(NamedTuple):
    code: str
    why: str  # the particulars, in words ("confidence 42 % < 50 %")

    @property
    def title(self) -> str:
        return FLAG_TITLES.get(self.code, self.code)


@dataclass(frozen=True)
class Standing:
    """What the guild knows of a member writing lore, from Discord: their
    role ids and when their account was made (ISO-8601 UTC)."""

    role_ids: frozenset[str] = frozenset()
    account_created_at: str | None = None


@dataclass(frozen=True)
class ReviewItem:
    id: int
    guild_id: str
    kind: str  # ReviewKind
    subject: str  # a member id, or LORE_SUBJECT
    author_id: str | None  # whose words (a fact, lore) or who proposed it (a correction)
    channel_id: str | None
    source_message_id: str | None
    fact: str  # the proposed text ("" once a rejected item's text is deleted)
    fact_type: str
    evidence_text: str | None
    confidence: float
    observed_at: str | None
    target_fact_id: int | None  # the fact it contradicts, corrects or may merge with
    flags: tuple[Flag, ...]
    state: str  # "pending" | "decided"
    created_at: str
    expires_at: str
    outcome: str | None = None
    decided_by: str | None = None
    decided_at: str | None = None
    note: str | None = None
    result_fact_id: int | None = None
    post_channel_id: str | None = None
    post_message_id: str | None = None

    @property
    def pending(self) -> bool:
        return self.state == "pending"


class Queued(NamedTuple):
    """A memory sent to the review queue instead of being stored."""

    item_id: int
    fact: str
    flags: tuple[Flag, ...]


def confidence_flag(confidence: float, min_percent: int) -> Flag | None:
    if min_percent <= 0 or confidence * 100 >= min_percent:
        return None
    return Flag(LOW_CONFIDENCE, f"confidence {confidence * 100:.0f} % < {min_percent} %")


def standing_flags(
    standing: Standing | None,
    *,
    roles: frozenset[str],
    min_account_days: int,
    now: datetime,
) -> list[Flag]:
    """Lore from a member without one of ``roles`` (when any are set) or with
    an account younger than ``min_account_days`` (when above 0). Unknown
    standing (lore a reply's model wrote for no known member) is not flagged
    by these two; the other flags still apply."""
    if standing is None:
        return []
    out: list[Flag] = []
    if roles and not roles & standing.role_ids:
        out.append(Flag(LORE_ROLE, "has none of the roles review_lore_roles names"))
    if min_account_days > 0 and standing.account_created_at:
        try:
            made = parse_iso(standing.account_created_at)
        except ValueError:
            made = None
        if made is not None and now - made < timedelta(days=min_account_days):
            days = max(0, (now - made).days)
            out.append(Flag(LORE_ACCOUNT_AGE, f"account {days} days old < {min_account_days}"))
    return out


def holds(policy: str, decision_kind: str, flags: list[Flag]) -> bool:
    """Whether a candidate with this write decision and these flags waits."""
    if policy not in ("flagged", "all") or decision_kind not in NEW_INFORMATION:
        return False
    return policy == "all" or bool(flags)


def may_decide(
    manage_guild: bool, role_ids: Iterable[str], moderator_roles: frozenset[str]
) -> bool:
    """Who decides review items: Manage Server, or a role the guild's
    ``review_moderator_roles`` names."""
    return manage_guild or bool(moderator_roles & set(role_ids))
