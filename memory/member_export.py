"""The files of ``/memory export-me``: one JSON document (schema
``guildlore.member-export/1``, described in docs/members.md) and the same content
as Markdown for people. Pure functions of a ``MemberExport``."""

from __future__ import annotations

import json
from typing import Any

from memory.roles.members import MemberExport, MemberFact

SCHEMA = "guildlore.member-export/1"


def _fact(f: MemberFact) -> dict[str, Any]:
    return {
        "id": f.id,
        "fact": f.fact,
        "type": f.fact_type,
        "confidence": round(f.confidence, 3),
        "active": f.active,
        "channel_id": f.channel_id,
        "source_message_id": f.source_message_id,
        "evidence": f.evidence,
        "observed_at": f.observed_at,
        "updated_at": f.updated_at,
        "said_at": f.said_at or f.updated_at,
        "valid_to": f.valid_to,
        "corrected": f.corrected,
        "history": [
            {
                "event": e.event,
                "at": e.at,
                "by": e.by,
                "old_text": e.old_text,
                "new_text": e.new_text,
            }
            for e in f.history
        ],
    }


def export_document(export: MemberExport) -> dict[str, Any]:
    r = export.record
    return {
        "schema": SCHEMA,
        "exported_at": export.exported_at,
        "guild_id": r.guild_id,
        "user_id": r.user_id,
        "facts": [_fact(f) for f in r.facts],
        "hidden_facts": r.hidden_facts,
        "message_counts": r.message_counts,
        "messages": [
            {
                "id": m.id,
                "channel_id": m.channel_id,
                "created_at": m.created_at,
                "source": m.source,
                "content": m.content,
            }
            for m in export.messages
        ],
        "messages_truncated": export.messages_truncated,
    }


def export_json(export: MemberExport) -> str:
    return json.dumps(export_document(export), indent=2, ensure_ascii=False) + "\n"


def _inline(text: str) -> str:
    # One line per item, and nothing a Markdown viewer would take as markup.
    flat = " ".join(text.split())
    return "".join("\\" + c if c in "\\`*_[]<>#|~" else c for c in flat)


def export_markdown(export: MemberExport) -> str:
    r = export.record
    out = [
        f"# What guildlore keeps about you in server {r.guild_id}",
        "",
        f"User {r.user_id}, exported {export.exported_at}.",
        "",
        f"## Facts about you ({len(r.facts)})",
        "",
    ]
    for f in r.facts:
        state = "" if f.active else " (archived)"
        where = f" in channel {f.channel_id}" if f.channel_id else ""
        said = (f.said_at or f.updated_at)[:10]
        line = (
            f"- {_inline(f.fact)}{state} — {f.fact_type}, confidence {f.confidence:.2f}, "
            f"said {said}{where}"
        )
        if f.valid_to is not None:
            line += f"; no longer true since {f.valid_to}"
        if f.evidence and f.corrected:
            line += f"; from your correction: “{_inline(f.evidence)}”"
        elif f.evidence:
            line += f"; from your message {f.source_message_id}: “{_inline(f.evidence)}”"
        out.append(line)
        for e in f.history:
            change = ""
            if e.old_text and e.new_text and e.old_text != e.new_text:
                change = f": “{_inline(e.old_text)}” → “{_inline(e.new_text)}”"
            out.append(f"  - {e.at} {e.event} ({e.by}){change}")
    if not r.facts:
        out.append("_None._")
    if r.hidden_facts:
        out += ["", f"{r.hidden_facts} more from channels you cannot read (not shown)."]
    out += ["", f"## Your stored messages ({r.messages_total})", ""]
    for channel, n in r.message_counts.items():
        out.append(f"- channel {channel}: {n}")
    out.append("")
    for m in export.messages:
        out.append(f"- {m.created_at} channel {m.channel_id}: {_inline(m.content)}")
    if export.messages_truncated:
        out += ["", f"_Only the first {len(export.messages)} messages are included._"]
    return "\n".join(out) + "\n"
