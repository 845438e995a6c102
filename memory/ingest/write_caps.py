"""Poisoning limits: a per-author daily cap on what one member may write
that is not about themself — facts about other members (a correction of
someone else's fact) and lore lines (``/memory remember``, or asking the bot
to remember a line). The caps are guild settings
(``daily_cap_facts_about_others``, ``daily_cap_lore_lines``; 0: none) and
count per UTC day.

A write beyond its cap is not stored: it is *held back* — one action-log row
of kind ``memory_cap`` (shown to moderators on the dashboard's activity page)
with the author, what kind of write it was, the cap, and the text they tried
to store, so a moderator can see what was attempted and add it by hand if it
was fine. The row names the author as its subject: erasing the author erases
it. ``take`` runs inside the write's own transaction, so a count and its
write commit together.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from memory.clock import parse_iso
from memory.db.core import Connection
from memory.errors import InvalidInput
from memory.guild_settings import GuildSettings
from memory.store import write_quota as store
from memory.store.ops import log_action

CapKind = Literal["other_member", "lore"]

SETTING_OF: dict[CapKind, str] = {
    "other_member": "daily_cap_facts_about_others",
    "lore": "daily_cap_lore_lines",
}
WHAT: dict[CapKind, str] = {
    "other_member": "fact about another member",
    "lore": "lore line",
}
HELD_KIND = "memory_cap"


class CapReached(InvalidInput):
    """The author used up today's cap of this kind of write; it was held back."""

    def __init__(self, kind: CapKind, limit: int) -> None:
        super().__init__(f"the daily cap of {limit} {WHAT[kind]}s is reached")
        self.kind = kind
        self.limit = limit


def limit_of(settings: GuildSettings, kind: CapKind) -> int:
    return settings.number(SETTING_OF[kind])


def take(
    con: Connection,
    *,
    guild_id: str,
    author_id: str,
    kind: CapKind,
    limit: int,
    text: str,
    now: str,
    detail: dict[str, Any] | None = None,
) -> bool:
    """Count one write of ``kind`` by ``author_id`` today; False (and the
    held-back row written) when the day's ``limit`` is already used up."""
    if limit <= 0:
        return True
    day = now[:10]
    if store.used(con, guild_id, author_id, kind, day) >= limit:
        log_action(
            con,
            HELD_KIND,
            f"held back a {WHAT[kind]} by {author_id}: the daily cap of {limit} is reached",
            now,
            guild_id=guild_id,
            subject=author_id,
            detail={
                "author_id": author_id,
                "kind": kind,
                "cap": limit,
                "text": " ".join(text.split())[:300],
                **(detail or {}),
            },
        )
        return False
    oldest = (parse_iso(now) - timedelta(days=store.KEEP_DAYS - 1)).date().isoformat()
    store.take(con, guild_id, author_id, kind, day, oldest)
    return True


def used_today(con: Connection, guild_id: str, author_id: str, kind: CapKind, now: str) -> int:
    return store.used(con, guild_id, author_id, kind, now[:10])
