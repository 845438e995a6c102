"""Consent for sensitive facts, on Discord: the one ephemeral prompt with
Accept/Reject buttons at a member's next slash command, and ``/memory pending``.

The engine queued the facts (``Memory.consent``); this cog only shows a
member their own pending facts and passes their answer back. Everything is
ephemeral: nobody else learns that a member has a pending fact, let alone
what it says.

The prompt follows the first slash command a member uses after a fact was
queued (``on_app_command_completion``): an ephemeral message can only answer
an interaction, never a plain chat message. Each pending fact is shown in
one prompt at most; ``/memory pending`` lists them all again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from bot.client import GuildloreBot
from bot.cogs.answers import Answer, guild_member, send_answer
from memory import Memory, PendingFact

log = logging.getLogger(__name__)

# Two buttons per fact, one fact per row: Discord allows five rows.
PROMPT_MAX = 5
VIEW_TIMEOUT_S = 15 * 60


def _line(n: int, item: PendingFact) -> str:
    return f"{n}. {item.fact} ({item.category}; expires {item.expires_at[:10]})"


def _text(items: Sequence[PendingFact], more: int, decided: dict[int, str]) -> str:
    head = (
        "I noticed something personal about you and did not store it. "
        "Shall I remember it? Only you can see this."
    )
    lines = [head]
    for n, item in enumerate(items, start=1):
        done = decided.get(item.id)
        lines.append(f"~~{_line(n, item)}~~ — {done}" if done else _line(n, item))
    if more:
        lines.append(f"…and {more} more: use `/memory pending`.")
    lines.append("Unanswered facts are dropped after 7 days, and nothing is kept of them.")
    return "\n".join(lines)


class ConsentView(discord.ui.View):
    """Accept/Reject per pending fact, for their owner only; each is decided once."""

    def __init__(
        self, memory: Memory, guild_id: str, owner_id: int, items: Sequence[PendingFact], more: int
    ) -> None:
        super().__init__(timeout=VIEW_TIMEOUT_S)
        self.memory = memory
        self.guild_id = guild_id
        self.owner_id = owner_id
        self.items = list(items[:PROMPT_MAX])
        self.more = more
        self.decided: dict[int, str] = {}
        for row, item in enumerate(self.items):
            for accept in (True, False):
                button: discord.ui.Button[ConsentView] = discord.ui.Button(
                    label=f"{'Accept' if accept else 'Reject'} {row + 1}",
                    style=discord.ButtonStyle.success if accept else discord.ButtonStyle.secondary,
                    row=row,
                    custom_id=f"consent:{item.id}:{'accept' if accept else 'reject'}",
                )
                button.callback = self._callback(item.id, accept)  # type: ignore[method-assign]
                self.add_item(button)

    @property
    def text(self) -> str:
        return _text(self.items, self.more, self.decided)

    async def decide(self, item_id: int, accept: bool) -> str:
        """Apply the owner's answer; the word shown beside the fact."""
        if item_id in self.decided:
            return self.decided[item_id]
        uid = str(self.owner_id)
        if accept:
            fact = await self.memory.consent.accept(self.guild_id, uid, item_id)
            outcome = "remembered" if fact is not None else "no longer pending"
        else:
            done = await self.memory.consent.reject(self.guild_id, uid, item_id)
            outcome = "not kept" if done else "no longer pending"
        self.decided[item_id] = outcome
        for child in self.children:
            if isinstance(child, discord.ui.Button) and child.custom_id is not None:
                if child.custom_id.startswith(f"consent:{item_id}:"):
                    child.disabled = True
        return outcome

    def _callback(self, item_id: int, accept: bool) -> Any:
        async def clicked(interaction: discord.Interaction) -> None:
            try:
                await self.decide(item_id, accept)
            except Exception:
                log.exception("consent decision failed")
                await interaction.response.send_message(
                    "Sorry, that failed; nothing changed. Try `/memory pending` again.",
                    ephemeral=True,
                )
                return
            if len(self.decided) == len(self.items):
                self.stop()
            await interaction.response.edit_message(content=self.text, view=self)

        return clicked

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        if interaction.user.id != self.owner_id:
            await interaction.response.send_message("This isn't your button.", ephemeral=True)
            return False
        return True


# -- command bodies ----------------------------------------------------------------------------


async def consent_prompt(
    memory: Memory, guild: discord.Guild, member: discord.Member
) -> Answer | None:
    """The prompt for facts queued since the member was last asked; None when
    there is nothing new (each fact is asked about once)."""
    fresh = await memory.consent.take_prompt(str(guild.id), str(member.id))
    if not fresh:
        return None
    view = ConsentView(memory, str(guild.id), member.id, fresh, max(0, len(fresh) - PROMPT_MAX))
    return Answer(view.text, ephemeral=True, view=view)


async def pending_answer(memory: Memory, guild: discord.Guild, member: discord.Member) -> Answer:
    """``/memory pending``: the member's own pending facts with the buttons."""
    gid, uid = str(guild.id), str(member.id)
    await memory.consent.take_prompt(gid, uid)  # shown now: no prompt for them later
    items = await memory.consent.pending(gid, uid)
    if not items:
        return Answer("Nothing is waiting for your consent.")
    view = ConsentView(memory, gid, member.id, items, max(0, len(items) - PROMPT_MAX))
    return Answer(view.text, ephemeral=True, view=view)


# -- the cog ---------------------------------------------------------------------------------


class Consent(commands.Cog):
    def __init__(self, bot: GuildloreBot) -> None:
        self.bot = bot
        self._group: app_commands.Group | None = None

    async def cog_load(self) -> None:
        # ``/memory pending`` joins the /memory group that memory_commands owns.
        group = self.bot.tree.get_command("memory")
        if not isinstance(group, app_commands.Group):
            log.warning("no /memory group loaded; /memory pending is not available")
            return

        async def pending(interaction: discord.Interaction) -> None:
            guild, member = guild_member(interaction)
            await send_answer(interaction, await pending_answer(self.bot.memory, guild, member))

        group.add_command(
            app_commands.Command(
                name="pending",
                description="Personal facts waiting for your consent",
                callback=pending,
            )
        )
        self._group = group

    async def cog_unload(self) -> None:
        if self._group is not None:
            self._group.remove_command("pending")

    @commands.Cog.listener()
    async def on_app_command_completion(
        self, interaction: discord.Interaction, command: Any
    ) -> None:
        if interaction.guild is None or not isinstance(interaction.user, discord.Member):
            return
        if getattr(command, "qualified_name", "") == "memory pending":
            return
        try:
            answer = await consent_prompt(self.bot.memory, interaction.guild, interaction.user)
            if answer is not None:
                await send_answer(interaction, answer)
        except Exception:
            log.exception("could not show the consent prompt")


async def setup(bot: commands.Bot) -> None:
    assert isinstance(bot, GuildloreBot)
    await bot.add_cog(Consent(bot))
