"""Search hits: a ``Hit`` built from a scored fact or message, and the
timestamps of hits read for scoring (age, distance between neighbours)."""

from __future__ import annotations

from datetime import datetime

from memory.clock import parse_iso
from memory.models import Fact, Hit, ScoreParts, StoredMessage

MESSAGE_CONFIDENCE = 0.5  # messages have no extraction confidence; a neutral value


def parse_time(text: str | None) -> datetime | None:
    """A stored timestamp, or None when it is missing or unreadable."""
    if not text:
        return None
    try:
        return parse_iso(text)
    except ValueError:
        return None


def age_days(now: datetime, text: str) -> float:
    dt = parse_time(text)
    return max(0.0, (now - dt).total_seconds() / 86400) if dt else 0.0


def seconds_between(a: str, b: str) -> float:
    da, db = parse_time(a), parse_time(b)
    if da is None or db is None:
        return float("inf")
    return (db - da).total_seconds()


def fact_hit(f: Fact, parts: ScoreParts) -> Hit:
    return Hit(
        kind="fact",
        id=str(f.id),
        guild_id=f.guild_id,
        channel_id=f.channel_id,
        subject=f.subject,
        text=f.fact,
        fact_type=f.fact_type,
        evidence_text=f.evidence_text,
        source_message_id=f.source_message_id,
        confidence=f.confidence,
        # What every reader shows as the fact's date: when it was said.
        created_at=f.said_at,
        score=parts.combined,
        parts=parts,
    )


def message_hit(m: StoredMessage, parts: ScoreParts) -> Hit:
    return Hit(
        kind="message",
        id=m.id,
        guild_id=m.guild_id,
        channel_id=m.channel_id,
        subject=m.author_id,
        text=m.content,
        fact_type=None,
        evidence_text=None,
        source_message_id=m.id,
        confidence=MESSAGE_CONFIDENCE,
        created_at=m.created_at,
        score=parts.combined,
        parts=parts,
        author_name=m.author_name,
    )
