"""Engine dataclasses → the JSON-able dicts that API responses and templates share.

Discord ids stay strings (they do not fit a JavaScript number); fact ids are
integers; non-finite floats become ``null`` so every response is valid JSON.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from memory import (
    EPISODE_SUBJECT,
    LORE_SUBJECT,
    ActionLogEntry,
    Fact,
    HistoryEntry,
    Hit,
    Procedure,
    StoredMessage,
    Trace,
)


def num(value: Any, digits: int = 6) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return round(f, digits) if math.isfinite(f) else None


def subject_name(subject: str, names: Mapping[str, str]) -> str:
    if subject == LORE_SUBJECT:
        return "Guild lore"
    if subject == EPISODE_SUBJECT:
        return "Channel episodes"
    return names.get(subject) or subject


def fact_json(f: Fact, names: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "id": f.id,
        "guild_id": f.guild_id,
        "channel_id": f.channel_id,
        "subject": f.subject,
        "subject_name": subject_name(f.subject, names or {}),
        "fact": f.fact,
        "fact_type": f.fact_type,
        "evidence_text": f.evidence_text,
        "source_message_id": f.source_message_id,
        "confidence": num(f.confidence),
        "is_active": f.is_active,
        "created_at": f.created_at,
        "updated_at": f.updated_at,
        "observed_at": f.observed_at,
        "last_observed_at": f.last_observed_at,
        "said_at": f.said_at,
        "valid_from": f.valid_from,
        "valid_to": f.valid_to,
    }


def hit_json(h: Hit, names: Mapping[str, str] | None = None) -> dict[str, Any]:
    p = h.parts
    ident: int | str = int(h.id) if h.kind == "fact" and h.id.isdigit() else h.id
    return {
        "kind": h.kind,
        "id": ident,
        "created_at": h.created_at,
        "guild_id": h.guild_id,
        "channel_id": h.channel_id,
        "subject": h.subject,
        "subject_name": h.author_name or subject_name(h.subject, names or {}),
        "fact": h.text,
        "fact_type": h.fact_type,
        "evidence_text": h.evidence_text,
        "source_message_id": h.source_message_id,
        "confidence": num(h.confidence),
        "score": num(h.score),
        "semanticScore": num(p.semantic),
        "lexicalScore": num(p.lexical),
        "bm25Score": num(p.bm25),
        "confidenceScore": num(p.confidence),
        "recencyScore": num(p.recency),
        "channelScore": num(p.channel),
        # 1 when the message's author is the member the query names.
        "speakerScore": num(p.speaker),
        # How much the message speaks of its author (first-person words), 0..1.
        "firstPersonScore": num(p.first_person),
        # Signed: what "same topic, newer first" moved into or out of combined.
        "newerFirstScore": num(p.newer_first),
        # What a related fact among the candidates added.
        "relatedScore": num(p.related),
        # Signed: what fusing the rankings of the query's parts moved into
        # combined, and the part whose ranking found the hit ("" = whole query).
        "decomposedScore": num(p.decomposed),
        "queryPart": p.query_part,
        # For a query naming members: why the hit is or is not about them.
        "aboutNamed": p.about,
        "combinedScore": num(p.combined),
        "passed": bool(p.passed),
    }


def history_json(e: HistoryEntry) -> dict[str, Any]:
    return {
        "id": e.id,
        "fact_id": e.fact_id,
        "event": e.event,
        "old_text": e.old_text,
        "new_text": e.new_text,
        "actor": e.actor,
        "source_message_id": e.source_message_id,
        "reason": e.reason,
        "created_at": e.created_at,
        "linked_fact_id": e.linked_fact_id,
    }


def trace_json(t: Trace) -> dict[str, Any]:
    parts = t.score_parts or {}
    return {
        "id": t.id,
        "guild_id": t.guild_id,
        "channel_id": t.channel_id,
        "message_id": t.message_id,
        "fact_id": t.fact_id,
        "action": t.action,
        "content": t.content,
        "score": num(t.score),
        "score_parts": {
            k: (num(v) if isinstance(v, int | float) and not isinstance(v, bool) else v)
            for k, v in parts.items()
        }
        if t.score_parts is not None
        else None,
        "memory_type": t.memory_type,
        "source": t.source,
        "created_at": t.created_at,
    }


def action_json(a: ActionLogEntry) -> dict[str, Any]:
    return {
        "id": a.id,
        "guild_id": a.guild_id,
        "kind": a.kind,
        "message": a.message,
        "detail": a.detail,
        "created_at": a.created_at,
    }


def procedure_json(p: Procedure, channels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``scope`` is "guild" or "channel"; ``channel_name`` is None when unknown."""
    return {
        "id": p.id,
        "guild_id": p.guild_id,
        "scope": "guild" if p.channel_id is None else "channel",
        "channel_id": p.channel_id,
        "channel_name": (channels or {}).get(p.channel_id or ""),
        "text": p.text,
        "author": p.author,
        "created_at": p.created_at,
    }


def message_json(m: StoredMessage) -> dict[str, Any]:
    return {
        "id": m.id,
        "guild_id": m.guild_id,
        "channel_id": m.channel_id,
        "author_id": m.author_id,
        "author_name": m.author_name,
        "content": m.content,
        "created_at": m.created_at,
        "source": m.source,
        "is_bot": m.is_bot,
        "state": m.state,
        "reply_to_id": m.reply_to_id,
    }
