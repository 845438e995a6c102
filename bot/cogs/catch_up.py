"""Catch-up: when the bot connects afresh, read back what each channel said
while it was away, and what was deleted or edited there meanwhile.

discord.py dispatches ``guild_available`` for a guild each time a fresh
session (IDENTIFY, then READY) brings it: at start, for the shards a process
took over, after a session Discord would not resume, and when a guild comes
back from an outage. A resumed session (``on_resumed``) gets the missed
events from Discord itself and reads nothing. Each text channel, voice or
stage chat and active thread the bot can read is read with discord.py's
``history`` (oldest first, 100 messages a request, within its rate limits),
one channel after another and one guild at a time; a channel whose last
message (``last_message_id``, as Discord reports it) is older than the start
costs no request. ``Memory.catch_up`` says where to start and judges what
comes back (docs/catch-up.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import discord
from discord.ext import commands

from bot.client import GuildloreBot
from bot.convert import is_chat_message, to_incoming
from memory import GuildCatchUp

log = logging.getLogger(__name__)


def readable_channels(guild: discord.Guild) -> list[Any]:
    """The guild's channels with a history the bot may read: text channels,
    the text chat of voice and stage channels, and the active threads."""
    me = guild.me
    if me is None:
        return []
    out: list[Any] = []
    places: Sequence[Any] = [
        *guild.text_channels,
        *guild.voice_channels,
        *guild.stage_channels,
        *guild.threads,
    ]
    for channel in places:
        perms = channel.permissions_for(me)
        if not (perms.read_messages and perms.read_message_history):
            continue
        if isinstance(channel, discord.Thread):
            if channel.archived:
                continue
            # A private thread is readable only to its members and moderators.
            if channel.is_private() and channel.me is None and not perms.manage_threads:
                continue
        out.append(channel)
    return out


class CatchUp(commands.Cog):
    def __init__(self, bot: GuildloreBot) -> None:
        self.bot = bot
        # One guild at a time: the reads share Discord's rate limits with
        # the replies.
        self._turn = asyncio.Lock()
        self._busy: set[int] = set()
        self._again: set[int] = set()

    @commands.Cog.listener()
    async def on_guild_available(self, guild: discord.Guild) -> None:
        config = self.bot.catch_up
        if config is None or not config.enabled or not self.bot.accepting:
            return
        if guild.id in self._busy:  # a new session while one runs: once more after it
            self._again.add(guild.id)
            return
        self._busy.add(guild.id)
        self.bot.track(self._run(guild.id), name=f"catch-up-{guild.id}")

    async def _run(self, guild_id: int) -> None:
        try:
            while True:
                async with self._turn:
                    self._again.discard(guild_id)  # this run covers sessions until now
                    guild = self.bot.get_guild(guild_id)
                    if guild is None or not self.bot.accepting:
                        return
                    await self._catch_up(guild)
                if guild_id not in self._again:
                    return
        except Exception:
            log.exception("catch-up of guild %s failed", guild_id)
        finally:
            self._busy.discard(guild_id)

    async def _catch_up(self, guild: discord.Guild) -> None:
        config = self.bot.catch_up
        assert config is not None
        memory = self.bot.memory
        settings = await memory.guilds.settings(str(guild.id))
        if not settings.memory_enabled:
            return
        channels = [
            c for c in readable_channels(guild) if str(c.id) not in settings.excluded_channels
        ]
        run = await memory.catch_up.plan(
            str(guild.id),
            [str(c.id) for c in channels],
            reconcile_s=config.reconcile_s,
            channel_limit=config.channel_limit,
            guild_limit=config.guild_limit,
            texts=self.bot.intents.message_content,
        )
        if run is None:
            return
        log.info("catching up guild %s: %d channels since %s", guild.id, len(channels), run.start)
        for i, channel in enumerate(channels):
            if not self.bot.accepting:
                break
            if run.spent:
                run.skip(len(channels) - i)
                break
            last = getattr(channel, "last_message_id", None)
            if last is not None and last <= run.after:
                continue  # nothing sent there since the start (Discord's mark): no request
            await self._read(channel, run)
        await run.finish()

    async def _read(self, channel: Any, run: GuildCatchUp) -> None:
        """One channel, oldest first, from the run's start up to its limit."""
        reading = await run.channel(str(channel.id))
        me = self.bot.user.id if self.bot.user else None
        count = 0
        complete = False
        try:
            async for message in channel.history(
                limit=reading.limit, after=discord.Object(id=run.after), oldest_first=True
            ):
                count += 1
                if is_chat_message(message, me):
                    await reading.add(to_incoming(message))
                else:
                    reading.present(str(message.id))
                if not self.bot.accepting:
                    break
            else:
                complete = count < reading.limit
        except Exception as exc:  # Forbidden, a server error, the network
            await reading.failed(f"{type(exc).__name__}: {exc}")
            return
        await reading.close(complete=complete)


async def setup(bot: commands.Bot) -> None:
    assert isinstance(bot, GuildloreBot)
    await bot.add_cog(CatchUp(bot))
