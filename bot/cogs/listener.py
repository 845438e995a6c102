"""Listener: guild messages (channels, threads, forum posts, voice text chat) → memory."""

from __future__ import annotations

import logging

import discord
from discord.ext import commands

from bot.client import GuildloreBot
from bot.convert import is_chat_message, names_of, to_incoming
from memory import TroubleLog, disk_problem

log = logging.getLogger(__name__)

MESSAGE_CONTENT_WARNING = (
    "The Message Content intent is off: guildlore only sees the text of messages that "
    "mention it, so it will remember very little. Enable it in the Developer Portal "
    "(your application → Bot → Privileged Gateway Intents → Message Content Intent) and "
    "set discord.message_content = true."
)


class Listener(commands.Cog):
    def __init__(self, bot: GuildloreBot) -> None:
        self.bot = bot
        # Names already recorded, so a busy channel costs no extra writes.
        self._named: dict[tuple[str, str], str] = {}
        self._trouble = TroubleLog(log)

    async def cog_load(self) -> None:
        if not self.bot.intents.message_content:
            log.warning(MESSAGE_CONTENT_WARNING)

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        if not self.bot.accepting:
            return
        if not is_chat_message(message, self.bot.user.id if self.bot.user else None):
            return
        if not message.content.strip():
            return
        try:
            await self._record_names(message)
        except Exception:  # names are cosmetic: they never cost the message
            log.exception("could not record the names of message %s", message.id)
        try:
            outcome = await self.bot.memory.ingest_message(to_incoming(message))
        except Exception as exc:
            if disk_problem(exc) is None:
                log.exception("could not ingest message %s", message.id)
            else:  # said once, and counted until storing works again
                self._trouble.error(
                    "storing incoming messages", exc, "messages arriving meanwhile are not stored"
                )
            return
        self._trouble.ok("storing incoming messages")
        if outcome.status == "rejected":
            log.debug("message %s not ingested: %s", message.id, outcome.reason)

    async def _record_names(self, message: discord.Message) -> None:
        guild_id, guild_name, channels, members = names_of(message)
        new_channels = {k: v for k, v in channels.items() if self._named.get(("c", k)) != v}
        new_members = {k: v for k, v in members.items() if self._named.get((guild_id, k)) != v}
        if not new_channels and not new_members:
            return
        await self.bot.memory.guilds.set_names(
            guild_id, guild_name=guild_name, channels=new_channels, members=new_members
        )
        for k, v in new_channels.items():
            self._named[("c", k)] = v
        for k, v in new_members.items():
            self._named[(guild_id, k)] = v
        if len(self._named) > 50_000:  # bounded; a clear only costs a few writes
            self._named.clear()


async def setup(bot: commands.Bot) -> None:
    assert isinstance(bot, GuildloreBot)
    await bot.add_cog(Listener(bot))
