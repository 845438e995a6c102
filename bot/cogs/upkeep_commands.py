"""Memory pins and the admin purge in Discord.

- ``/memory pin`` and ``/memory unpin``: a member pins one of their own facts
  (autocomplete lists only theirs) so budgets, expiry and the purge leave it;
- ``/memory-admin purge-facts [member]`` (Manage Server): every fact of the
  server, or of one member (their messages stay), deleted for good after a
  confirmation button.

The commands join the groups ``bot.cogs.memory_commands`` declares
(``bot.cogs.groups``); as there, the bodies are plain async functions
returning an ``Answer``. Every answer is ephemeral.
"""

from __future__ import annotations

import discord
from discord import app_commands
from discord.ext import commands

from bot.client import GuildloreBot
from bot.cogs.answers import (
    Answer,
    ConfirmView,
    answer_command_error,
    fact_id_of,
    guild_member,
    is_operator,
    send_answer,
)
from bot.cogs.groups import JoinedCog
from bot.cogs.member_commands import fact_choices
from memory import Memory


async def pin_answer(
    memory: Memory, guild: discord.Guild, member: discord.Member, fact: str, pinned: bool
) -> Answer:
    fact_id = fact_id_of(fact)
    if fact_id is None:
        return Answer("Pick one of your facts from the list.")
    done = await memory.upkeep.member_pin(str(guild.id), str(member.id), fact_id, pinned)
    if not done:
        state = "pinned" if pinned else "unpinned"
        return Answer(f"Nothing changed: pick one of your own facts (it may already be {state}).")
    if pinned:
        return Answer("Pinned: I keep that fact whatever the memory budgets and expiry say.")
    return Answer("Unpinned: that fact follows the memory budgets and expiry again.")


def purge_prompt(
    memory: Memory,
    guild: discord.Guild,
    operator: discord.Member,
    target: discord.abc.User | None,
) -> Answer:
    if not is_operator(operator):
        return Answer("Only members with the Manage Server permission can do that.")
    who = "this server" if target is None else f"**{target.name}**"

    async def action() -> str:
        n = await memory.upkeep.purge_facts(
            str(guild.id),
            None if target is None else str(target.id),
            actor=f"operator:{operator.id}",
        )
        return f"Deleted {n} facts about {who} for good."

    label = "Delete every fact" if target is None else f"Delete {target.name}'s facts"
    view = ConfirmView(operator.id, action, confirm_label=label[:80])
    kept = "" if target is None else " Their messages stay."
    return Answer(
        f"This deletes every fact I remember about {who}, archived ones included, "
        f"for good.{kept} It cannot be undone. Continue?",
        view=view,
    )


class MemberPins(JoinedCog):
    group_name = "memory"

    @app_commands.command(name="pin", description="Keep one fact about you whatever the budgets")
    @app_commands.describe(fact="One of your facts")
    async def pin(self, interaction: discord.Interaction, fact: str) -> None:
        guild, member = guild_member(interaction)
        answer = await pin_answer(self.bot.memory, guild, member, fact, True)
        await send_answer(interaction, answer)

    @app_commands.command(name="unpin", description="Let a pinned fact about you go again")
    @app_commands.describe(fact="One of your facts")
    async def unpin(self, interaction: discord.Interaction, fact: str) -> None:
        guild, member = guild_member(interaction)
        answer = await pin_answer(self.bot.memory, guild, member, fact, False)
        await send_answer(interaction, answer)

    @pin.autocomplete("fact")
    @unpin.autocomplete("fact")
    async def _own_facts(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        guild, member = guild_member(interaction)
        return await fact_choices(self.bot.memory, guild, member, current)

    async def cog_app_command_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        await answer_command_error(interaction, error)


class AdminPurge(JoinedCog):
    group_name = "memory-admin"

    @app_commands.command(
        name="purge-facts", description="Delete every fact of this server or of one member"
    )
    @app_commands.describe(member="Only this member's facts (their messages stay)")
    async def purge_facts(
        self, interaction: discord.Interaction, member: discord.User | None = None
    ) -> None:
        guild, operator = guild_member(interaction)
        await send_answer(interaction, purge_prompt(self.bot.memory, guild, operator, member))

    async def cog_app_command_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        await answer_command_error(interaction, error)


async def setup(bot: commands.Bot) -> None:
    assert isinstance(bot, GuildloreBot)
    await bot.add_cog(MemberPins(bot))
    await bot.add_cog(AdminPurge(bot))
