"""A member's own data under ``/memory``: ``about-me``, ``export-me``,
``correct`` and ``forget-fact``. Every answer is ephemeral; changes are in
the history as ``user:<id>``.

The commands join the ``/memory`` group that ``bot.cogs.memory_commands``
declares (``bot.cogs.groups``). As there, the bodies are plain async
functions returning an ``Answer`` (dpytest does not dispatch app commands);
the engine decides what a member may see and change (``Memory.members``).
"""

from __future__ import annotations

import asyncio
import io

import discord
from discord import app_commands
from discord.ext import commands

from bot.client import GuildloreBot
from bot.cogs.answers import (
    Answer,
    answer_command_error,
    fact_id_of,
    fit_lines,
    guild_member,
    send_answer,
)
from bot.cogs.groups import JoinedCog
from bot.cogs.why_card import forgotten_text, jump_link, missing_or_refused, said_on
from bot.convert import visible_channel_ids
from memory import (
    FactHidden,
    InvalidInput,
    MemberFact,
    MemberRecord,
    Memory,
    NotYours,
    export_json,
    export_markdown,
)

GROUP = "memory"
CHOICE_MAX = 100  # Discord's limit for a choice's name


# How a history event reads to the member (FactEvent.event → words).
EVENT_WORDS = {
    "add": "noted",
    "update": "made more precise",
    "supersede": "replaced",
    "noop": "said again",
    "archive": "archived",
    "restore": "restored",
    "expire": "expired (not mentioned for a long time)",
    "reopen": "true again",
    "historical": "noted as past",
    "consent_accept": "kept with your consent",
    "pin": "pinned",
    "unpin": "unpinned",
}
HISTORY_SHOWN = 3  # the latest events per fact in about-me (export-me has them all)


def _history_line(f: MemberFact) -> str:
    steps = [
        f"{said_on(e.at)}: {EVENT_WORDS.get(e.event, e.event)}"
        + ("" if e.by == "automatically" else f" by {e.by}")
        for e in f.history[-HISTORY_SHOWN:]
    ]
    more = len(f.history) - HISTORY_SHOWN
    return "↳ " + " · ".join(steps) + (f" (+{more} earlier)" if more > 0 else "")


def _fact_line(f: MemberFact, guild_id: str, visible: set[str]) -> str:
    line = f"• {f.fact} — {said_on(f.said_at or f.updated_at)}"
    if not f.active:
        line += " (archived)"
    elif f.valid_to is not None:
        line += f" (no longer true since {said_on(f.valid_to)})"
    if f.channel_id:
        line += f", in <#{f.channel_id}>"
    if f.evidence:
        quote = " ".join(f.evidence.split())[:100]
        if f.corrected:
            line += f', from your correction: "{quote}"'
        elif f.source_message_id and f.channel_id in visible:
            link = jump_link(guild_id, f.channel_id, f.source_message_id)
            line += f', from [your message](<{link}>): "{quote}"'
        else:
            line += f', from your message: "{quote}"'
    return line


def about_me_text(record: MemberRecord, visible: set[str] | None = None) -> str:
    counts = ", ".join(f"<#{c}>: {n}" for c, n in record.message_counts.items())
    head = (
        f"**What I keep about you here:** {len(record.facts)} facts; "
        f"your stored messages: {record.messages_total}" + (f" ({counts})" if counts else "")
    )
    lines: list[str] = []
    for f in record.facts:
        lines.append(_fact_line(f, record.guild_id, visible or set()))
        if f.history:
            lines.append(_history_line(f))
    tail = ""
    if record.hidden_facts:
        tail = f"({record.hidden_facts} more facts from channels you can't read)\n"
    tail += (
        "`/memory export-me` sends you a copy with every fact's full history; "
        "`/memory correct` and `/memory forget-fact` change one fact; `/memory forget-me` "
        "erases everything."
    )
    return fit_lines(head, lines, tail)


async def about_me_answer(memory: Memory, guild: discord.Guild, member: discord.Member) -> Answer:
    visible = visible_channel_ids(guild, member)
    record = await memory.members.about(str(guild.id), str(member.id), visible)
    return Answer(about_me_text(record, visible))


async def export_me_answer(memory: Memory, guild: discord.Guild, member: discord.Member) -> Answer:
    export = await memory.members.export(
        str(guild.id), str(member.id), visible_channel_ids(guild, member)
    )
    as_json = await asyncio.to_thread(export_json, export)
    as_markdown = await asyncio.to_thread(export_markdown, export)
    stem = f"guildlore-{guild.id}-{member.id}"
    files = [
        discord.File(io.BytesIO(as_json.encode("utf-8")), filename=f"{stem}.json"),
        discord.File(io.BytesIO(as_markdown.encode("utf-8")), filename=f"{stem}.md"),
    ]
    record = export.record
    return Answer(
        f"Everything I keep about you here: {len(record.facts)} facts (each with its "
        f"history) and {len(export.messages)} of your messages, as JSON and as Markdown.",
        files=files,
    )


async def correct_answer(
    memory: Memory, guild: discord.Guild, member: discord.Member, fact: str, text: str
) -> Answer:
    fact_id = fact_id_of(fact)
    if fact_id is None:
        return Answer("Pick one of your facts from the list.")
    try:
        changed = await memory.corrections.correct(
            str(guild.id),
            str(member.id),
            fact_id,
            text,
            visible_channel_ids(guild, member),
            name=member.display_name,
        )
    except NotYours as exc:
        if isinstance(exc, FactHidden):
            return Answer(missing_or_refused(exc, "correct"))
        return await propose_correction(memory, guild, member, fact_id, text)
    except InvalidInput as exc:
        return Answer(missing_or_refused(exc, "correct"))
    return Answer(f"Corrected. I now remember: {changed.fact}")


async def propose_correction(
    memory: Memory, guild: discord.Guild, member: discord.Member, fact_id: int, text: str
) -> Answer:
    """Someone else's fact (or lore): with the review queue on, the member's
    text waits for a moderator; without it, members correct only their own."""
    gid = str(guild.id)
    if (await memory.guilds.settings(gid)).review_policy == "off":
        return Answer("You can only correct facts about yourself.")
    try:
        queued = await memory.review.propose_correction(
            gid, str(member.id), fact_id, text, visible_channel_ids(guild, member)
        )
    except InvalidInput as exc:
        return Answer(f"Not sent to the moderators: {exc}")
    return Answer(
        "That fact is not about you, so the moderators decide: I sent them your "
        f"correction ({queued.fact}). Until one of them approves it, I keep what I had."
    )


async def forget_fact_answer(
    memory: Memory, guild: discord.Guild, member: discord.Member, fact: str
) -> Answer:
    fact_id = fact_id_of(fact)
    if fact_id is None:
        return Answer("Pick one of your facts from the list.")
    try:
        gone = await memory.corrections.forget_fact(
            str(guild.id), str(member.id), fact_id, visible_channel_ids(guild, member)
        )
    except InvalidInput as exc:
        return Answer(missing_or_refused(exc, "forget"))
    return Answer(forgotten_text(gone.fact.fact, gone.receipt.id, gone.receipt.counts))


async def fact_choices(
    memory: Memory, guild: discord.Guild, member: discord.Member, current: str
) -> list[app_commands.Choice[str]]:
    """Autocomplete: the member's own current facts they can see, nothing else."""
    facts = await memory.members.own_facts(
        str(guild.id), str(member.id), visible_channel_ids(guild, member), current[:100]
    )
    return [app_commands.Choice(name=f.fact[:CHOICE_MAX], value=str(f.id)) for f in facts]


class MemberCommands(JoinedCog):
    group_name = GROUP

    @app_commands.command(name="about-me", description="What I keep about you, with sources")
    async def about_me(self, interaction: discord.Interaction) -> None:
        guild, member = guild_member(interaction)
        await send_answer(interaction, await about_me_answer(self.memory, guild, member))

    @app_commands.command(name="export-me", description="A copy of what I keep about you")
    async def export_me(self, interaction: discord.Interaction) -> None:
        guild, member = guild_member(interaction)
        await interaction.response.defer(ephemeral=True, thinking=True)
        await send_answer(interaction, await export_me_answer(self.memory, guild, member))

    @app_commands.command(name="correct", description="Correct a fact about you")
    @app_commands.describe(fact="One of your facts", text="What is true instead")
    async def correct(self, interaction: discord.Interaction, fact: str, text: str) -> None:
        guild, member = guild_member(interaction)
        await send_answer(interaction, await correct_answer(self.memory, guild, member, fact, text))

    @app_commands.command(name="forget-fact", description="Forget one fact about you")
    @app_commands.describe(fact="One of your facts")
    async def forget_fact(self, interaction: discord.Interaction, fact: str) -> None:
        guild, member = guild_member(interaction)
        await send_answer(interaction, await forget_fact_answer(self.memory, guild, member, fact))

    @correct.autocomplete("fact")
    @forget_fact.autocomplete("fact")
    async def _own_facts(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        guild, member = guild_member(interaction)
        return await fact_choices(self.memory, guild, member, current)

    async def cog_app_command_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        await answer_command_error(interaction, error)


async def setup(bot: commands.Bot) -> None:
    assert isinstance(bot, GuildloreBot)
    await bot.add_cog(MemberCommands(bot))
