"""Members in control, under ``/memory``: ``opt-out`` and ``opt-in`` (stop or
resume remembering their messages here), ``privacy`` (the privacy notice of
this server, generated from the live settings), and the erase answers
``forget-me`` and ``/memory-admin forget-member`` share — with a deletion
receipt, and for forget-me the choice to stay forgotten.

The commands join the ``/memory`` group ``bot.cogs.memory_commands``
declares (``bot.cogs.groups``); as there, the bodies are plain async
functions returning an ``Answer`` (or embeds), testable with dpytest's real
guild objects. Every answer is ephemeral.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from bot.client import GuildloreBot
from bot.cogs.answers import (
    Answer,
    ConfirmView,
    answer_command_error,
    guild_member,
    send_answer,
)
from bot.cogs.groups import JoinedCog
from memory import Deployment, Memory, deployment_of, privacy_notice

GROUP = "memory"
EMBED_TOTAL_MAX = 6000  # Discord's limit for the embeds of one message
EMBED_FIELD_MAX = 4096  # an embed's description


# -- erasing a member ----------------------------------------------------------------------


async def forget_user(
    memory: Memory, guild: discord.Guild, user_id: int, actor: str, *, opt_out: bool = False
) -> str:
    """Erase a member from this guild's memory; the answer with its receipt."""
    report = await memory.forget(str(guild.id), str(user_id), actor=actor, opt_out=opt_out)
    counts = (
        f"{report.facts} facts, {report.messages} messages, {report.vectors} search vectors, "
        f"{report.traces} traces and {report.journal_lines} journal lines"
    )
    after = (
        "From now on nothing they write here is remembered (`/memory opt-in` undoes it)."
        if report.opted_out
        else "Messages sent from now on will be remembered again; `/memory opt-out` stops that."
    )
    return (
        f"Done. Erased {counts} from this server's memory.\n"
        f"Deletion receipt `{report.receipt_id}`: it lists these counts (no text) so the "
        f"bot's operator can confirm the erase later.\n{after}"
    )


class ForgetMeView(ConfirmView):
    """Forget-me's buttons: forget, forget and stay forgotten, cancel."""

    def __init__(
        self,
        owner_id: int,
        action: Callable[[], Awaitable[str]],
        stay_forgotten: Callable[[], Awaitable[str]],
    ) -> None:
        super().__init__(owner_id, action, confirm_label="Forget everything about me")
        self.stay_forgotten = stay_forgotten

    @discord.ui.button(label="…and stop remembering me", style=discord.ButtonStyle.danger)
    async def forget_and_opt_out(
        self, interaction: discord.Interaction, button: discord.ui.Button[Any]
    ) -> None:
        if self.done:
            return
        self.done = True
        self.stop()
        await interaction.response.edit_message(content="Working on it…", view=None)
        try:
            text = await self.stay_forgotten()
        except Exception:
            text = "Sorry, that failed. Nothing was changed that I know of; please try again."
        await interaction.edit_original_response(content=text)


def forget_me_prompt(memory: Memory, guild: discord.Guild, member: discord.Member) -> Answer:
    actor = f"user:{member.id}"

    async def forget() -> str:
        return await forget_user(memory, guild, member.id, actor)

    async def forget_for_good() -> str:
        return await forget_user(memory, guild, member.id, actor, opt_out=True)

    return Answer(
        "This erases everything this server's memory holds about you: facts, your messages, "
        "traces and journal lines. It cannot be undone. You can also have me stop remembering "
        "anything you write here from now on. Continue?",
        view=ForgetMeView(member.id, forget, forget_for_good),
    )


# -- opting out ----------------------------------------------------------------------------


async def opt_out_answer(memory: Memory, guild: discord.Guild, member: discord.Member) -> Answer:
    gid, uid = str(guild.id), str(member.id)
    if not await memory.opt_outs.change(gid, uid, True):
        since = await memory.opt_outs.since(gid, uid)
        return Answer(
            f"You're already opted out here{f' (since {since[:10]})' if since else ''}. "
            "`/memory opt-in` undoes it."
        )
    return Answer(
        "Done: from now on I don't remember anything you write in this server — your messages "
        "are not stored, journaled, read for facts or embedded, and my replies to you keep "
        "nothing of your words. This includes voice, if I transcribe a channel you speak in. "
        "What I kept before stays until you use `/memory forget-me`. "
        "Undo with `/memory opt-in`."
    )


async def opt_in_answer(memory: Memory, guild: discord.Guild, member: discord.Member) -> Answer:
    if not await memory.opt_outs.change(str(guild.id), str(member.id), False):
        return Answer("You weren't opted out here: I remember what you write in this server.")
    return Answer(
        "Done: I remember what you write in this server again, from now on. Nothing you "
        "wrote while opted out was kept, so it cannot come back."
    )


# -- the privacy notice ----------------------------------------------------------------------


def bot_deployment(bot: GuildloreBot) -> Deployment:
    """What this process is made of: as the runtime described it, else as
    far as the engine's configuration tells (tests, the demo)."""
    if bot.deployment is not None:
        return bot.deployment
    return deployment_of(
        bot.memory.config,
        chat=bot.chat is not None,
        llm_extraction=False,
        voice=bot.voice is not None,
    )


def _markdown(item: str) -> str:
    return f"• {item}"


async def privacy_embeds(
    memory: Memory, guild: discord.Guild, deployment: Deployment
) -> list[list[discord.Embed]]:
    """``/memory privacy``: one embed per section, in as few messages as Discord allows."""
    settings = await memory.guilds.settings(str(guild.id))
    notice = privacy_notice(settings, deployment, guild_name=guild.name)
    messages: list[list[discord.Embed]] = [[]]
    size = 0
    for n, section in enumerate(notice.sections):
        body = "\n".join(_markdown(i) for i in section.items)[:EMBED_FIELD_MAX]
        title = f"Privacy in {guild.name}: {section.title}" if n == 0 else section.title
        embed = discord.Embed(title=title[:256], description=body)
        cost = len(embed.title or "") + len(body)
        if messages[-1] and (size + cost > EMBED_TOTAL_MAX or len(messages[-1]) == 10):
            messages.append([])
            size = 0
        messages[-1].append(embed)
        size += cost
    return messages


# -- the cog ---------------------------------------------------------------------------------


class TrustCommands(JoinedCog):
    group_name = GROUP

    @app_commands.command(name="opt-out", description="Stop remembering what I write here")
    async def opt_out(self, interaction: discord.Interaction) -> None:
        guild, member = guild_member(interaction)
        await send_answer(interaction, await opt_out_answer(self.memory, guild, member))

    @app_commands.command(name="opt-in", description="Remember what I write here again")
    async def opt_in(self, interaction: discord.Interaction) -> None:
        guild, member = guild_member(interaction)
        await send_answer(interaction, await opt_in_answer(self.memory, guild, member))

    @app_commands.command(
        name="privacy", description="What is kept about members, and for how long"
    )
    async def privacy(self, interaction: discord.Interaction) -> None:
        guild, _ = guild_member(interaction)
        pages = await privacy_embeds(self.memory, guild, bot_deployment(self.bot))
        await interaction.response.send_message(embeds=pages[0], ephemeral=True)
        for page in pages[1:]:
            await interaction.followup.send(embeds=page, ephemeral=True)

    async def cog_app_command_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        await answer_command_error(interaction, error)


async def setup(bot: commands.Bot) -> None:
    assert isinstance(bot, GuildloreBot)
    await bot.add_cog(TrustCommands(bot))
