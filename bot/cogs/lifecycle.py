"""Discord's own message lifecycle → memory: deletes (single and bulk) and edits.

Raw gateway events, so messages the bot never cached (sent before it started,
or evicted from its cache) are covered too.
"""

from __future__ import annotations

import logging

import discord
from discord.ext import commands

from bot.client import GuildloreBot

log = logging.getLogger(__name__)


class Lifecycle(commands.Cog):
    def __init__(self, bot: GuildloreBot) -> None:
        self.bot = bot

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
        content = payload.data.get("content")
        if not isinstance(content, str):  # an embed resolved, a pin: the text did not change
            return
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

    async def _delete(self, guild_id: int, message_ids: list[int]) -> None:
        if not self.bot.accepting:
            return
        try:
            await self.bot.memory.delete_messages(str(guild_id), [str(i) for i in message_ids])
        except Exception:
            log.exception("could not apply the deletion of %d messages", len(message_ids))


async def setup(bot: commands.Bot) -> None:
    assert isinstance(bot, GuildloreBot)
    await bot.add_cog(Lifecycle(bot))
