"""Slash commands of one cog placed in a group another cog declares.

``/memory`` is declared by ``bot.cogs.memory_commands``; other cogs add their
member commands to it rather than declaring a second ``memory`` group, which
Discord would refuse (one name, one top-level command). Their extension must
load after that one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from discord import app_commands
from discord.ext import commands

if TYPE_CHECKING:
    from bot.client import GuildloreBot
    from memory import Memory


def join_group(bot: commands.Bot, cog: commands.Cog, group_name: str) -> list[str]:
    """Call from ``cog_load``: move the cog's own app commands (bound to it,
    so its error handler applies) into the top-level group ``group_name``.
    The names added, for ``leave_group``."""
    group = bot.tree.get_command(group_name)
    if not isinstance(group, app_commands.Group):
        raise RuntimeError(f"/{group_name} is not registered yet: load its cog first")
    added = []
    for command in cog.__cog_app_commands__:
        group.add_command(command)
        added.append(command.name)
    # Not added at the top level as well when the cog is injected.
    cog.__cog_app_commands__ = []
    return added


def leave_group(bot: commands.Bot, group_name: str, names: list[str]) -> None:
    """Call from ``cog_unload``: take the commands ``join_group`` added back out."""
    group = bot.tree.get_command(group_name)
    if isinstance(group, app_commands.Group):
        for name in names:
            group.remove_command(name)


class JoinedCog(commands.Cog):
    """A cog whose app commands join the top-level group ``group_name`` that
    another cog declares (its subclasses say which)."""

    group_name: ClassVar[str]

    def __init__(self, bot: GuildloreBot) -> None:
        self.bot = bot
        self._joined: list[str] = []

    async def cog_load(self) -> None:
        self._joined = join_group(self.bot, self, self.group_name)

    async def cog_unload(self) -> None:
        leave_group(self.bot, self.group_name, self._joined)

    @property
    def memory(self) -> Memory:
        return self.bot.memory
