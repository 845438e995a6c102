"""Pins are canon: a pinned message becomes canon lore, unpinning archives it.

Discord sends a message update (``MESSAGE_UPDATE``) with the message's
``pinned`` flag when it is pinned or unpinned (discord.py lists "a message
has been pinned or unpinned" among the causes of ``on_message_edit``), and
every later update of a pinned message carries it too. The raw event is
used, so messages the bot never cached are covered. ``on_guild_channel_pins_update``
is not used: it carries only the time of the last pin, and answering it
would need a ``channel.pins()`` request per event to find what changed.

An edit of a pinned message arrives with ``pinned: true`` and its new text:
the canon fact follows the new text (the old one is archived).
"""

from __future__ import annotations

import logging
from typing import Any

import discord
from discord.ext import commands

from bot.client import GuildloreBot
from memory import iso, parse_iso

log = logging.getLogger(__name__)


class Pins(commands.Cog):
    def __init__(self, bot: GuildloreBot) -> None:
        self.bot = bot

    @commands.Cog.listener()
    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        if payload.guild_id is None or not self.bot.accepting:
            return
        pinned = payload.data.get("pinned")
        if not isinstance(pinned, bool):
            return
        gid, mid = str(payload.guild_id), str(payload.message_id)
        try:
            if pinned:
                await self._pin(gid, payload)
            elif await self.bot.memory.pins.canon_fact(gid, mid) is not None:
                await self.bot.memory.pins.unpin(gid, mid)
        except Exception:
            log.exception("could not apply the pin state of message %s", mid)

    async def _pin(self, guild_id: str, payload: discord.RawMessageUpdateEvent) -> None:
        data: Any = payload.data
        content = data.get("content")
        if not isinstance(content, str):
            log.info("pinned message %s arrived without its text", payload.message_id)
            return
        author = data.get("author")
        author_id = str(author.get("id")) if isinstance(author, dict) else ""
        if author_id and await self.bot.memory.opt_outs.is_out(guild_id, author_id):
            # Its author asked not to be remembered here: a pin does not override that.
            log.info("not making pinned message %s canon: its author opted out", payload.message_id)
            return
        await self.bot.memory.pins.pin(
            guild_id,
            str(payload.channel_id),
            str(payload.message_id),
            content,
            created_at=_created(data.get("timestamp"), payload.message_id),
        )


def _created(stamp: Any, message_id: int) -> str:
    """The message's time: Discord's timestamp, else its snowflake's."""
    if isinstance(stamp, str):
        try:
            return iso(parse_iso(stamp))
        except ValueError:
            pass
    return iso(discord.utils.snowflake_time(message_id))


async def setup(bot: commands.Bot) -> None:
    assert isinstance(bot, GuildloreBot)
    await bot.add_cog(Pins(bot))
