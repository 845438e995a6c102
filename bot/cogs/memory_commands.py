"""``/memory …`` for members and ``/memory-admin …`` for moderators (Manage Server).

The command bodies are plain async functions of (memory, guild, channel,
member, …) returning an ``Answer``; the slash-command handlers only adapt
interactions to them. That keeps them testable with real discord.py objects
(dpytest does not dispatch app commands) and keeps the cog thin.

Privacy: answers show memory only from channels the asking member can
read, and answers about people are ephemeral.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands
from discord.ext import commands

from bot.client import GuildloreBot
from bot.cogs.answers import (
    Answer,
    ConfirmView,
    answer_command_error,
    fit_lines,
    guild_member,
    is_operator,
    send_answer,
)
from bot.cogs.procedures import add_procedure, list_procedures, remove_procedure
from bot.cogs.provenance import why_last_card
from bot.cogs.trust_commands import forget_me_prompt, forget_user
from bot.convert import standing_of, visible_channel_ids
from memory import (
    DEFAULT_SEARCH_SCOPE,
    GUILD_SETTINGS,
    LORE_SUBJECT,
    CapReached,
    Hit,
    InvalidInput,
    Memory,
    Queued,
    parse_iso,
)

if TYPE_CHECKING:
    from bot.voice.service import VoiceManager


ABOUT_LIMIT = 15


async def _names(memory: Memory, guild: discord.Guild) -> dict[str, str]:
    names = {
        str(m["user_id"]): str(m["display_name"])
        for m in await memory.guilds.members(str(guild.id))
    }
    for m in guild.members:
        names[str(m.id)] = m.display_name
    names[LORE_SUBJECT] = "server lore"
    return names


def _fact_line(text: str, confidence: float, date: str, evidence: str | None) -> str:
    line = f"• {text} — conf {confidence:.2f}, {date[:10]}"
    if evidence:
        ev = " ".join(evidence.split())
        line += f', evidence: "{ev[:120]}"'
    return line


# -- command bodies ----------------------------------------------------------------------------


async def search_memory(
    memory: Memory,
    guild: discord.Guild,
    channel: Any,
    member: discord.Member,
    query: str,
    scope: str = DEFAULT_SEARCH_SCOPE,
    as_of: str | None = None,
) -> Answer:
    """``as_of``: an ISO date or time; the facts that were true then."""
    query = " ".join(query.split())[:300]
    if len(query) < 2:
        return Answer("Give me something to search for.")
    when = None
    if as_of and as_of.strip():
        try:
            when = parse_iso(as_of.strip()[:40])
        except ValueError:
            return Answer(f"“{as_of[:40]}” is not a date; try 2024-05-01 or 2024-05-01T18:00Z.")
    visible = visible_channel_ids(guild, member)
    hits: list[Hit] = await memory.search(
        str(guild.id),
        query,
        channel_id=str(channel.id),
        limit=10,
        scope=scope,  # type: ignore[arg-type]
        visible_channels=visible,
        as_of=when,
    )
    if not hits:
        return Answer(f"Nothing in memory matches “{query}”.")
    names = await _names(memory, guild)
    lines = []
    for h in hits:
        who = names.get(h.subject, "someone")
        if h.kind == "fact":
            lines.append(
                f"{_fact_line(h.text, h.confidence, h.created_at, h.evidence_text)} ({who})"
            )
        else:
            where = f"<#{h.channel_id}>" if h.channel_id else ""
            lines.append(f"• {h.created_at[:10]} {where} {h.author_name or who}: {h.text[:200]}")
    return Answer(fit_lines(f"**Memory matching “{query}”:**", lines))


async def about_member(
    memory: Memory, guild: discord.Guild, asker: discord.Member, target: discord.abc.User
) -> Answer:
    visible = visible_channel_ids(guild, asker)
    facts = await memory.facts.find(str(guild.id), subject=str(target.id), limit=200)
    shown = [f for f in facts if f.channel_id is None or f.channel_id in visible]
    name = getattr(target, "display_name", None) or target.name
    if not shown:
        return Answer(f"I don't remember anything about {name} that you can see.")
    shown = shown[:ABOUT_LIMIT]
    lines = [_fact_line(f.fact, f.confidence, f.said_at, f.evidence_text) for f in shown]
    return Answer(fit_lines(f"**What I remember about {name}:**", lines))


async def remember_lore(
    memory: Memory, guild: discord.Guild, channel: Any, member: discord.Member, text: str
) -> Answer:
    try:
        remembered = await memory.lore.remember(
            str(guild.id),
            text,
            source_text=text,
            channel_id=str(channel.id),
            actor=f"user:{member.id}",
            author_id=str(member.id),
            standing=standing_of(member),
        )
    except CapReached as exc:
        return Answer(
            f"Not stored: you have added {exc.limit} lore lines today, this server's daily "
            "limit. I kept this one for the moderators to look at."
        )
    if remembered is None:
        return Answer(
            "I can't store that as server lore: it must be at least 4 characters and "
            "can't look like an instruction or contain secrets."
        )
    if isinstance(remembered, Queued):
        return Answer(
            f"Sent to the moderators for review: {remembered.fact} "
            "It becomes server lore once one of them approves it."
        )
    return Answer(f"Noted as server lore: {remembered.fact.fact}", ephemeral=False)


# ``/memory why``'s body: the why card of the channel's last reply (bot.cogs.provenance).
why_last_reply = why_last_card


async def change_setting(
    memory: Memory,
    guild: discord.Guild,
    member: discord.Member,
    key: str | None,
    value: str | None,
) -> Answer:
    if not is_operator(member):
        return Answer("Only members with the Manage Server permission can change settings.")
    gid = str(guild.id)
    if key is not None and value is not None:
        # "default" clears the guild's value (Discord cannot send an empty option).
        stored = None if value.strip().lower() in ("default", "reset") else value
        try:
            await memory.guilds.set_setting(gid, key, stored, actor=f"user:{member.id}")
        except InvalidInput as exc:
            return Answer(f"Not changed: {exc}")
    current = await memory.guilds.settings(gid)
    lines = []
    # One key: its value and what it does; all of them: values only, so the
    # list fits one Discord message.
    shown = [s for s in GUILD_SETTINGS if s.key == key] if key and value is None else []
    for spec in shown or GUILD_SETTINGS:
        v = getattr(current, spec.key, None)
        if isinstance(v, frozenset):
            v = ", ".join(sorted(v)) or "(none)"
        elif isinstance(v, tuple):
            v = ", ".join(v) or None
        line = f"• `{spec.key}` = {v if v is not None else '(default)'}"
        lines.append(f"{line} — {spec.help}" if shown else line)
    head = "**Memory settings for this server:**"
    if key is not None and value is not None:
        head = f"Set `{key}`. " + head
    return Answer(fit_lines(head, lines))


async def voice_consent(
    memory: Memory, voice: VoiceManager | None, guild_id: int, user_id: int, opt_out: bool
) -> Answer:
    """``voice-opt-out`` / ``voice-opt-in``: stored, and in effect at once if the bot listens."""
    if voice is not None:
        await (voice.opt_out if opt_out else voice.opt_in)(guild_id, user_id)
    else:
        await memory.guilds.set_voice_opt_out(str(guild_id), str(user_id), opt_out)
    if opt_out:
        return Answer(
            "Done: from now on I ignore your voice in this server before it is transcribed, "
            "including anything you are saying right now. What is already stored stays until "
            "you use `/memory forget-me`. Undo with `/memory voice-opt-in`."
        )
    return Answer("Done: your voice is transcribed again while I am in a voice channel here.")


def forget_member_prompt(
    memory: Memory, guild: discord.Guild, operator: discord.Member, target: discord.abc.User
) -> Answer:
    if not is_operator(operator):
        return Answer("Only members with the Manage Server permission can do that.")

    async def action() -> str:
        return await forget_user(memory, guild, target.id, actor=f"operator:{operator.id}")

    view = ConfirmView(operator.id, action, confirm_label=f"Forget {target.name}")
    return Answer(
        f"This erases everything this server's memory holds about **{target.name}**. "
        "It cannot be undone. Continue?",
        view=view,
    )


# -- the cog ---------------------------------------------------------------------------------


SCOPES = [app_commands.Choice(name=n, value=n) for n in ("facts", "messages", "all")]
# Discord allows at most 25 fixed choices per option; the guild settings
# outgrew that, so the key is offered by autocomplete (also at most 25 at once).
SETTING_KEYS = tuple(s.key for s in GUILD_SETTINGS)
AUTOCOMPLETE_MAX = 25


def setting_keys_matching(typed: str) -> list[str]:
    """The setting keys containing what the operator typed so far, at most 25."""
    needle = typed.strip().lower()
    return [k for k in SETTING_KEYS if needle in k][:AUTOCOMPLETE_MAX]


# Where a procedure may apply: any channel members write in.
ScopeChannel = discord.TextChannel | discord.VoiceChannel | discord.ForumChannel | discord.Thread


class MemoryCommands(commands.Cog):
    memory_group = app_commands.Group(
        name="memory",
        description="What guildlore remembers about this server",
        guild_only=True,
    )
    admin_group = app_commands.Group(
        name="memory-admin",
        description="Moderate guildlore's memory (Manage Server)",
        guild_only=True,
        default_permissions=discord.Permissions(manage_guild=True),
    )
    procedure_group = app_commands.Group(
        name="procedure",
        description="How I should behave in this server or one channel",
        parent=admin_group,
    )

    def __init__(self, bot: GuildloreBot) -> None:
        self.bot = bot

    @property
    def memory(self) -> Memory:
        return self.bot.memory

    @staticmethod
    def _where(interaction: discord.Interaction) -> tuple[discord.Guild, Any, discord.Member]:
        guild, member = guild_member(interaction)
        return guild, interaction.channel, member

    @memory_group.command(name="search", description="Search this server's memory")
    @app_commands.describe(
        query="What to look for",
        scope="Facts, past messages, or both (the default)",
        as_of="A past date (e.g. 2024-05-01): what was true then",
    )
    @app_commands.choices(scope=SCOPES)
    async def search(
        self,
        interaction: discord.Interaction,
        query: str,
        scope: app_commands.Choice[str] | None = None,
        as_of: str | None = None,
    ) -> None:
        guild, channel, member = self._where(interaction)
        await interaction.response.defer(ephemeral=True, thinking=True)
        answer = await search_memory(
            self.memory,
            guild,
            channel,
            member,
            query,
            scope.value if scope else DEFAULT_SEARCH_SCOPE,
            as_of,
        )
        await send_answer(interaction, answer)

    @memory_group.command(name="about", description="What I remember about a member")
    async def about(self, interaction: discord.Interaction, member: discord.Member) -> None:
        guild, _, asker = self._where(interaction)
        await send_answer(interaction, await about_member(self.memory, guild, asker, member))

    @memory_group.command(name="remember", description="Add a line of server lore")
    @app_commands.describe(text="Something about this server worth remembering")
    async def remember(self, interaction: discord.Interaction, text: str) -> None:
        guild, channel, member = self._where(interaction)
        await send_answer(
            interaction, await remember_lore(self.memory, guild, channel, member, text)
        )

    @memory_group.command(name="forget-me", description="Erase everything remembered about you")
    async def forget_me(self, interaction: discord.Interaction) -> None:
        guild, _, member = self._where(interaction)
        await send_answer(interaction, forget_me_prompt(self.memory, guild, member))

    @memory_group.command(name="voice-opt-out", description="Never transcribe my voice here")
    async def voice_opt_out(self, interaction: discord.Interaction) -> None:
        guild, _, member = self._where(interaction)
        answer = await voice_consent(self.memory, self.bot.voice, guild.id, member.id, True)
        await send_answer(interaction, answer)

    @memory_group.command(name="voice-opt-in", description="Allow transcribing my voice again")
    async def voice_opt_in(self, interaction: discord.Interaction) -> None:
        guild, _, member = self._where(interaction)
        answer = await voice_consent(self.memory, self.bot.voice, guild.id, member.id, False)
        await send_answer(interaction, answer)

    @memory_group.command(name="why", description="The memory behind my last reply here")
    async def why(self, interaction: discord.Interaction) -> None:
        guild, channel, member = self._where(interaction)
        await send_answer(interaction, await why_last_card(self.memory, guild, channel, member))

    @admin_group.command(name="forget-member", description="Erase everything about a member")
    async def forget_member(self, interaction: discord.Interaction, member: discord.Member) -> None:
        guild, _, operator = self._where(interaction)
        await send_answer(interaction, forget_member_prompt(self.memory, guild, operator, member))

    @admin_group.command(name="setting", description="Show or change a memory setting")
    @app_commands.describe(key="Setting to change", value="New value (blank: show settings)")
    async def setting(
        self,
        interaction: discord.Interaction,
        key: str | None = None,
        value: str | None = None,
    ) -> None:
        guild, _, member = self._where(interaction)
        answer = await change_setting(self.memory, guild, member, key, value)
        await send_answer(interaction, answer)

    @setting.autocomplete("key")
    async def setting_key_autocomplete(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        return [app_commands.Choice(name=k, value=k) for k in setting_keys_matching(current)]

    @procedure_group.command(name="add", description="Add an instruction my replies follow")
    @app_commands.describe(
        text="e.g. “Answer in Spanish” or “No spoilers for the current season”",
        channel="Only in this channel (default: the whole server)",
    )
    async def procedure_add(
        self, interaction: discord.Interaction, text: str, channel: ScopeChannel | None = None
    ) -> None:
        guild, _, member = self._where(interaction)
        answer = await add_procedure(self.memory, guild, member, text, channel)
        await send_answer(interaction, answer)

    @procedure_group.command(name="list", description="The instructions my replies follow")
    @app_commands.describe(channel="Those in force in this channel (default: all of them)")
    async def procedure_list(
        self, interaction: discord.Interaction, channel: ScopeChannel | None = None
    ) -> None:
        guild, _, member = self._where(interaction)
        await send_answer(interaction, await list_procedures(self.memory, guild, member, channel))

    @procedure_group.command(name="remove", description="Remove an instruction")
    @app_commands.describe(procedure="Its number, as `/memory-admin procedure list` shows it")
    async def procedure_remove(
        self, interaction: discord.Interaction, procedure: app_commands.Range[int, 1, 2**53]
    ) -> None:
        guild, _, member = self._where(interaction)
        answer = await remove_procedure(self.memory, guild, member, procedure)
        await send_answer(interaction, answer)

    async def cog_app_command_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        await answer_command_error(interaction, error)


async def setup(bot: commands.Bot) -> None:
    assert isinstance(bot, GuildloreBot)
    await bot.add_cog(MemoryCommands(bot))
