"""Discord's own lifecycle → memory: message deletes (single and bulk) and
edits, members leaving and joining, the bot removed from and added to a guild.

Raw gateway events, so messages the bot never cached (sent before it started,
or evicted from its cache) and members it never cached are covered too. What
a leave does is the guild's retention policy (``memory.retention``).
"""

from __future__ import annotations

import logging

import discord
from discord.ext import commands

from bot.client import GuildloreBot
from bot.convert import message_text
from memory import RetentionTimer

log = logging.getLogger(__name__)


class Lifecycle(commands.Cog):
    def __init__(self, bot: GuildloreBot) -> None:
        self.bot = bot

    async def cog_load(self) -> None:
        if not self.bot.intents.members:
            log.info(
                "members leaving and rejoining are not seen (no Server Members intent: "
                "discord.members_intent); member_leave_policy has no effect"
            )

    @commands.Cog.listener()
    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        if payload.guild_id is None:  # DMs are never ingested
            return
        await self._delete(payload.guild_id, [payload.message_id])

    @commands.Cog.listener()
    async def on_raw_bulk_message_delete(self, payload: discord.RawBulkMessageDeleteEvent) -> None:
        if payload.guild_id is None:
            return
        await self._delete(payload.guild_id, sorted(payload.message_ids))

    @commands.Cog.listener()
    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        if payload.guild_id is None or not self.bot.accepting:
            return
        if not isinstance(payload.data.get("content"), str):
            return  # an embed resolved, a pin: the text did not change
        # The text as the listener stores it (mentions shown as names), so a
        # catch-up reading the message back later sees the same text.
        content = message_text(payload.message)
        edited_at = payload.data.get("edited_timestamp")
        try:
            await self.bot.memory.edit_message(
                str(payload.guild_id),
                str(payload.message_id),
                content,
                edited_at if isinstance(edited_at, str) else None,
            )
        except Exception:
            log.exception("could not apply the edit of message %s", payload.message_id)

    @commands.Cog.listener()
    async def on_raw_member_remove(self, payload: discord.RawMemberRemoveEvent) -> None:
        me = self.bot.user
        if me is not None and payload.user.id == me.id:  # the guild's own removal says that
            return
        try:
            await self.bot.memory.retention.member_left(str(payload.guild_id), str(payload.user.id))
        except Exception:
            log.exception("could not apply the leave policy to member %s", payload.user.id)

    @commands.Cog.listener()
    async def on_member_join(self, member: discord.Member) -> None:
        try:
            await self.bot.memory.retention.member_joined(str(member.guild.id), str(member.id))
        except Exception:
            log.exception("could not cancel the leave timer of member %s", member.id)

    @commands.Cog.listener()
    async def on_guild_remove(self, guild: discord.Guild) -> None:
        try:
            await self.bot.memory.retention.guild_left(str(guild.id))
        except Exception:
            log.exception("could not apply the leave policy of guild %s", guild.id)

    @commands.Cog.listener()
    async def on_guild_join(self, guild: discord.Guild) -> None:
        await self._back_in(guild)

    @commands.Cog.listener()
    async def on_guild_available(self, guild: discord.Guild) -> None:
        # Added back while the bot was offline: no guild_join then.
        await self._back_in(guild)

    async def _back_in(self, guild: discord.Guild) -> None:
        try:
            await self.bot.memory.retention.guild_joined(str(guild.id))
        except Exception:
            log.exception("could not cancel the purge timer of guild %s", guild.id)

    async def _delete(self, guild_id: int, message_ids: list[int]) -> None:
        if not self.bot.accepting:
            return
        try:
            await self.bot.memory.delete_messages(str(guild_id), [str(i) for i in message_ids])
        except Exception:
            log.exception("could not apply the deletion of %d messages", len(message_ids))


async def still_away(bot: discord.Client, timer: RetentionTimer) -> bool:
    """Asked before a due retention timer runs: a member who rejoined (or a
    guild that added the bot back) while the bot was offline sent no event."""
    guild = bot.get_guild(int(timer.guild_id))
    if not timer.user_id:
        return guild is None
    if guild is None:
        return True  # the bot cannot see the guild: nobody to find
    if guild.get_member(int(timer.user_id)) is not None:
        return False
    try:
        await guild.fetch_member(int(timer.user_id))
    except discord.NotFound:
        return True
    except discord.HTTPException:
        # Unknown now: left for the next run rather than erased on a guess.
        raise
    return False


async def setup(bot: commands.Bot) -> None:
    assert isinstance(bot, GuildloreBot)
    await bot.add_cog(Lifecycle(bot))
