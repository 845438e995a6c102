"""The why card's words: each memory with why it is there, in plain sentences
("it's about you", "you said this in #general on 3 May", "it matched
“Leiden”"), its sources as Discord jump links, and the true answers when a
fact cannot be changed. Pure functions of the engine's ``Explained``
memories and the viewer; ``bot.cogs.provenance`` shows them.

Privacy: ``shown`` drops every memory learned in a channel the viewer cannot
read (no line, no count), and a source in such a channel gets no link.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import discord

from memory import (
    LORE_SUBJECT,
    Explained,
    FactHidden,
    FactMissing,
    InvalidInput,
    Memory,
    NotYours,
    parse_iso,
)

CARD_MAX = 10  # memories listed on one card
SOURCES_MAX = 3  # jump links per memory


def jump_link(guild_id: str | int, channel_id: str | int, message_id: str | int) -> str:
    return f"https://discord.com/channels/{guild_id}/{channel_id}/{message_id}"


def said_on(when: str | None) -> str:
    """``3 May 2026`` for an ISO time ('' if there is none)."""
    if not when:
        return ""
    try:
        dt: datetime = parse_iso(when)
    except ValueError:
        return when[:10]
    return f"{dt.day} {dt:%B %Y}"


def shown(memories: Sequence[Explained], visible: set[str]) -> list[Explained]:
    """The memories a viewer reading ``visible`` may see: learned server-wide
    or in a channel they can read. The rest are dropped without a trace."""
    return [m for m in memories if m.channel_id is None or m.channel_id in visible]


class Names:
    """Display names of a guild's members, for sentences."""

    def __init__(self, guild: discord.Guild, stored: dict[str, str]) -> None:
        self.guild = guild
        self.stored = stored

    @classmethod
    async def of(cls, memory: Memory, guild: discord.Guild) -> Names:
        stored = {
            str(m["user_id"]): str(m["display_name"])
            for m in await memory.guilds.members(str(guild.id))
        }
        return cls(guild, stored)

    def __call__(self, user_id: str) -> str:
        member = self.guild.get_member(int(user_id)) if user_id.isdigit() else None
        if member is not None:
            return member.display_name
        return self.stored.get(user_id, "someone")


def reasons(m: Explained, viewer: discord.Member, visible: set[str], names: Names) -> list[str]:
    """Why a memory is on the card, in plain words."""
    me = str(viewer.id)
    out: list[str] = []
    if m.kind == "fact":
        if m.subject == me:
            out.append("it's about you")
        elif m.subject == LORE_SUBJECT:
            out.append("it's server lore" + (" from a pinned message" if m.canon else ""))
        elif m.fact_type == "episode":
            out.append("it sums up a past conversation")
        else:
            out.append(f"it's about {names(m.subject)}")
    readable = [s for s in m.sources if s.channel_id in visible]
    if readable:
        first = readable[-1]  # the latest time it was said
        who = "you" if first.author_id == me else names(first.author_id)
        verb = "said" if m.kind == "fact" else "wrote"
        out.append(f"{who} {verb} this in <#{first.channel_id}> on {said_on(first.created_at)}")
        if len(readable) > 1:
            out.append(f"said {len(readable)} times")
    elif m.origin is not None and m.origin.startswith("user:"):
        who = "you" if m.origin == f"user:{me}" else names(m.origin.removeprefix("user:"))
        out.append(f"{who} wrote it as a correction on {said_on(m.observed_at)}")
    elif m.origin is not None and m.origin.startswith("operator"):
        out.append("a moderator wrote it")
    if m.matched:
        out.append("it matched " + ", ".join(f"“{w}”" for w in m.matched))
    if not m.current:
        out.append("no longer current")
    return out


def source_links(m: Explained, guild_id: str, visible: set[str]) -> str:
    """Jump links to the sources the viewer can read, newest first."""
    readable = [s for s in m.sources if s.channel_id in visible][::-1][:SOURCES_MAX]
    return " ".join(
        f"[{said_on(s.created_at) or 'message'}](<{jump_link(guild_id, s.channel_id, s.message_id)}>)"
        for s in readable
    )


def card_lines(
    groups: Sequence[tuple[str, Sequence[Explained]]],
    viewer: discord.Member,
    visible: set[str],
    names: Names,
    guild_id: str,
) -> tuple[list[str], list[Explained]]:
    """The card's lines, and the facts it numbers (for the buttons)."""
    lines: list[str] = []
    numbered: list[Explained] = []
    for title, memories in groups:
        if not memories:
            continue
        lines.append(f"__{title}__")
        for m in memories:
            if len(numbered) >= CARD_MAX:
                break
            numbered.append(m)
            text = " ".join(m.text.split())[:200]
            lines.append(f"**{len(numbered)}.** {text}")
            why = reasons(m, viewer, visible, names)
            if why:
                lines.append("↳ " + " · ".join(why))
            links = source_links(m, guild_id, visible)
            if links:
                lines.append("↳ sources: " + links)
    return lines, numbered


def missing_or_refused(exc: InvalidInput, verb: str) -> str:
    """The true answer for a fact a member cannot change."""
    if isinstance(exc, FactMissing):
        if exc.forgotten_at:
            return f"That fact is already forgotten (since {said_on(exc.forgotten_at)})."
        return (
            f"I have no fact #{exc.fact_id}. `/memory about-me` lists the facts I keep about you."
        )
    if isinstance(exc, FactHidden):
        return (
            "That fact about you comes from a channel you can't read, so I can't show or change "
            "it here. A moderator can, or `/memory forget-me` erases everything."
        )
    if isinstance(exc, NotYours):
        what = "correct" if verb == "correct" else "make me forget"
        return f"You can only {what} facts about yourself."
    return f"Not changed: {exc}"


def forgotten_text(fact: str, receipt_id: str, counts: dict[str, int]) -> str:
    erased = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in counts.items() if n)
    return (
        f"Forgotten: {fact}\nDeletion receipt `{receipt_id}` — erased {erased or 'nothing'}; "
        "no text was kept. Keep the id if you want the operator to confirm it later."
    )
