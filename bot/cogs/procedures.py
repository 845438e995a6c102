"""The bodies of ``/memory-admin procedure add|list|remove`` (Manage Server).

Procedures are how the server wants the bot to behave ("answer in Spanish in
#es"): guild-wide or for one channel, always in the system prompt of replies
there. The handlers live in ``memory_commands`` beside the rest of
``/memory-admin``; like those, these bodies are plain async functions returning
an ``Answer``, so tests call them with real discord.py objects.
"""

from __future__ import annotations

from typing import Any

import discord

from bot.cogs.answers import Answer, fit_lines, is_operator
from memory import InvalidInput, Memory, Procedure

MODERATORS_ONLY = "Only members with the Manage Server permission can manage procedures."


def _author(actor: str) -> str:
    kind, _, who = actor.partition(":")
    if kind == "user" and who.isdigit():
        return f"<@{who}>"
    return "the dashboard" if kind == "operator" else actor


def _line(p: Procedure) -> str:
    return f"• `#{p.id}` {p.text} — by {_author(p.author)}, {p.created_at[:10]}"


def _where(channel_id: str | None) -> str:
    return f"<#{channel_id}>" if channel_id is not None else "the whole server"


async def add_procedure(
    memory: Memory, guild: discord.Guild, member: discord.Member, text: str, channel: Any = None
) -> Answer:
    if not is_operator(member):
        return Answer(MODERATORS_ONLY)
    channel_id = str(channel.id) if channel is not None else None
    try:
        added = await memory.procedures.add(
            str(guild.id), text, channel_id=channel_id, actor=f"user:{member.id}"
        )
    except InvalidInput as exc:
        return Answer(f"Not added: {exc}.")
    return Answer(
        f"Added procedure `#{added.id}` for {_where(channel_id)}: {added.text}\n"
        "I follow it in every reply there from now on."
    )


async def list_procedures(
    memory: Memory, guild: discord.Guild, member: discord.Member, channel: Any = None
) -> Answer:
    """All of the server's procedures, or with ``channel`` those a reply there follows."""
    if not is_operator(member):
        return Answer(MODERATORS_ONLY)
    gid = str(guild.id)
    if channel is not None:
        parent = getattr(channel, "parent_id", None)
        found = await memory.procedures.for_channel(
            gid, str(channel.id), parent_id=str(parent) if parent else None
        )
        head = f"**Procedures my replies in {channel.mention} follow:**"
    else:
        found = await memory.procedures.list(gid)
        head = "**Procedures of this server:**"
    if not found:
        return Answer(
            "No procedures here yet. Add one with `/memory-admin procedure add`, e.g. "
            "“Answer in Spanish” for one channel, or “No spoilers” for the whole server."
        )
    lines: list[str] = []
    shown: str | None = "-"
    for p in found:
        if p.channel_id != shown:
            shown = p.channel_id
            lines.append(f"__In {_where(p.channel_id)}:__")
        lines.append(_line(p))
    return Answer(fit_lines(head, lines, "Remove one with `/memory-admin procedure remove`."))


async def remove_procedure(
    memory: Memory, guild: discord.Guild, member: discord.Member, procedure_id: int
) -> Answer:
    if not is_operator(member):
        return Answer(MODERATORS_ONLY)
    gone = await memory.procedures.remove(str(guild.id), procedure_id, actor=f"user:{member.id}")
    if gone is None:
        return Answer(f"This server has no procedure `#{procedure_id}`.")
    return Answer(f"Removed procedure `#{gone.id}` ({_where(gone.channel_id)}): {gone.text}")
