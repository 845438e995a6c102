"""A fact's timeline for its page: every message it was observed in (when,
by whom, a link to the message) and every decision about it (add, noop,
update, supersede, …) with its reason, actor and the other fact of the
change, in time order."""

from __future__ import annotations

from typing import Any

from memory import Fact, HistoryEntry, Memory

# Observations listed on one page; a fact seen more often shows the latest ones.
MAX_OBSERVATIONS = 100


def message_url(guild_id: str, channel_id: str | None, message_id: str) -> str | None:
    """Discord's link to a message, when its channel is known."""
    if not channel_id:
        return None
    return f"https://discord.com/channels/{guild_id}/{channel_id}/{message_id}"


def _direction(fact: Fact, h: HistoryEntry) -> str:
    """A supersede row seen from this fact: it was superseded, or it superseded."""
    if "superseded by" in (h.reason or "") or (h.old_text is not None and h.old_text == fact.fact):
        return "superseded by"
    return "supersedes"


async def fact_timeline(
    mem: Memory, guild: str, fact: Fact, history: list[HistoryEntry]
) -> list[dict[str, Any]]:
    """Observations and decisions, oldest first (an observation before a
    decision recorded at the same time)."""
    entries: list[tuple[str, int, dict[str, Any]]] = []
    sources = (await mem.facts.sources(guild, fact.id))[-MAX_OBSERVATIONS:]
    for s in sources:
        found = await mem.get_message(guild, s.message_id)
        channel = found.channel_id if found is not None else fact.channel_id
        entries.append(
            (
                s.observed_at,
                0,
                {
                    "kind": "observed",
                    "at": s.observed_at,
                    "message_id": s.message_id,
                    "author_name": found.author_name if found is not None else None,
                    "content": found.content[:300] if found is not None else None,
                    "url": message_url(guild, channel, s.message_id),
                },
            )
        )
    linked_text: dict[int, str | None] = {}
    for h in history:
        other = h.linked_fact_id
        if other is not None and other not in linked_text:
            found_fact = await mem.facts.get(guild, other)
            linked_text[other] = found_fact.fact if found_fact is not None else None
        entry: dict[str, Any] = {
            "kind": h.event,
            "at": h.created_at,
            "actor": h.actor,
            "reason": h.reason,
            "old_text": h.old_text,
            "new_text": h.new_text,
            "source_message_id": h.source_message_id,
            "linked_fact_id": other,
            "linked_fact_text": linked_text.get(other) if other is not None else None,
            "direction": _direction(fact, h) if h.event == "supersede" else None,
        }
        entries.append((h.created_at, 1, entry))
    entries.sort(key=lambda e: (e[0], e[1]))
    return [e for _, _, e in entries]
