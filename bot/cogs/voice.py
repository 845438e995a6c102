"""``/voice join|leave|status``: voice transcription into the server's memory.

Members opt out with ``/memory voice-opt-out`` (in ``memory_commands``, where
the ``/memory`` group lives). Consent rules — the privacy notice before
connecting, opt-outs loaded before the first packet — are enforced by
``VoiceManager`` so that no caller can skip them; this cog adds who may start
and stop transcription, and leaves a channel once no human is left in it.

As in ``memory_commands``, the command bodies are plain async functions
returning an ``Answer``; the handlers only adapt interactions to them.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from bot.client import GuildloreBot
from bot.cogs.answers import (
    Answer,
    answer_command_error,
    fit_lines,
    guild_member,
    is_operator,
    send_answer,
)
from bot.voice.service import VoiceJoinError, VoiceManager
from memory import Memory

log = logging.getLogger(__name__)

MODERATORS_ONLY = (
    "Only members with the Manage Server permission can start or stop voice transcription."
)


def humans_in(channel: Any, me_id: int | None) -> list[int]:
    """Ids of the people in a voice channel: not the bot itself, not other bots.

    A member missing from the cache counts as human, so the bot never leaves
    people behind for lack of information.
    """
    out = []
    for user_id in channel.voice_states:
        if user_id == me_id:
            continue
        member = channel.guild.get_member(user_id)
        if member is None or not member.bot:
            out.append(int(user_id))
    return out


def _me_id(guild: discord.Guild) -> int | None:
    return guild.me.id if guild.me is not None else None


# -- command bodies ----------------------------------------------------------------------------


async def join_voice(
    bot: GuildloreBot,
    guild: discord.Guild,
    member: discord.Member,
    channel: discord.VoiceChannel | discord.StageChannel | None,
) -> Answer:
    if not is_operator(member):
        return Answer(MODERATORS_ONLY)
    manager = bot.voice
    if manager is None:
        return Answer(f"I can't transcribe voice on this bot: {bot.voice_unavailable}.")
    if not bot.accepting:
        return Answer("I am shutting down.")
    if channel is None:
        channel = member.voice.channel if member.voice is not None else None
        if channel is None:
            return Answer("Join a voice channel first, or name one: `/voice join channel:…`.")
    if not isinstance(channel, discord.VoiceChannel):
        return Answer("I only transcribe voice channels, not stage channels.")
    if not humans_in(channel, _me_id(guild)):
        return Answer(f"Nobody is in {channel.mention}; I join when people are there.")
    assert guild.me is not None
    perms = channel.permissions_for(guild.me)
    missing = [
        name
        for name, ok in (
            ("View Channel", perms.view_channel),
            ("Connect", perms.connect),
            ("Send Messages", perms.send_messages),  # the privacy notice
        )
        if not ok
    ]
    if missing:
        return Answer(f"I need {', '.join(missing)} in {channel.mention} to transcribe it.")
    before = manager.session(guild.id)
    if before is not None and before.channel_id == channel.id:
        return Answer(f"I am already transcribing {channel.mention}.")
    try:
        await manager.join(channel)
    except VoiceJoinError as exc:
        return Answer(f"I did not join {channel.mention}: {exc}.")
    except Exception as exc:  # connect timeouts, gateway refusals, missing libopus/davey
        log.exception("voice: could not join %s in guild %s", channel.id, guild.id)
        return Answer(f"I could not connect to {channel.mention}: {type(exc).__name__}: {exc}")
    moved = f" (and left <#{before.channel_id}>)" if before is not None else ""
    return Answer(
        f"Transcribing {channel.mention} now{moved}. I posted the privacy notice in its chat; "
        "stop with `/voice leave`."
    )


async def leave_voice(bot: GuildloreBot, guild: discord.Guild, member: discord.Member) -> Answer:
    if not is_operator(member):
        return Answer(MODERATORS_ONLY)
    manager = bot.voice
    session = manager.session(guild.id) if manager is not None else None
    if manager is None or session is None:
        return Answer("I am not in a voice channel in this server.")
    await manager.leave(guild.id)
    return Answer(f"Stopped transcribing <#{session.channel_id}> and left.")


async def voice_status(
    memory: Memory, manager: VoiceManager | None, unavailable: str, guild: discord.Guild
) -> Answer:
    opted_out = sum(1 for g, _ in await memory.guilds.voice_opt_outs() if g == str(guild.id))
    tail = f"{opted_out} member{'s' if opted_out != 1 else ''} opted out of voice here."
    if manager is None:
        return Answer(f"**Voice:** off — {unavailable}.\n{tail}")
    stats = manager.stats()
    session = next((s for s in stats["sessions"] if s["guild_id"] == str(guild.id)), None)
    if session is None:
        return Answer(f"**Voice:** not in a voice channel in this server.\n{tail}")
    p, rx = session["pipeline"], session["receive"]
    lines = [
        f"• speech-to-text: `{p['transcriber']}`; {p['speakers']} speaker(s) heard",
        f"• utterances: {p['segments']} cut, {p['transcribed']} transcribed, "
        f"{p['ingested']} stored; last stored {p['last_ingested_at'] or 'never'}",
        f"• dropped: {p['dropped_opted_out']} frames of opted-out members, "
        f"{p['dropped_short']} blips too short, "
        f"{p['dropped_frames_queue_full'] + p['dropped_utterances_queue_full']} under load",
        f"• errors: {p['stt_errors']} speech-to-text, {p['ingest_errors']} storing",
        f"• DAVE decryption: {session['dave_health']} "
        f"({rx.get('dave_ok', 0)} frames decrypted, {rx.get('failed', 0)} failed)",
    ]
    if session["receive_error"]:
        lines.append(f"• receiving stopped: {session['receive_error']}")
    since = discord.utils.format_dt(datetime.fromisoformat(session["started_at"]), "R")
    head = (
        f"**Voice:** transcribing <#{session['channel_id']}>, started {since}"
        f"{'' if session['listening'] else ' (not receiving)'}"
    )
    return Answer(fit_lines(head, lines, tail))


async def leave_if_empty(bot: GuildloreBot, guild: discord.Guild) -> bool:
    """Leave the guild's voice session if no human is left in its channel."""
    manager = bot.voice
    session = manager.session(guild.id) if manager is not None else None
    if manager is None or session is None:
        return False
    channel = guild.get_channel(session.channel_id)
    if channel is not None and humans_in(channel, _me_id(guild)):
        return False
    log.info("voice: %s is empty, leaving", session.channel_id)
    return await manager.leave(guild.id)


# -- the cog ---------------------------------------------------------------------------------


class VoiceCommands(commands.Cog):
    voice_group = app_commands.Group(
        name="voice",
        description="Transcribe a voice channel into this server's memory",
        guild_only=True,
    )

    def __init__(self, bot: GuildloreBot) -> None:
        self.bot = bot

    async def cog_unload(self) -> None:
        # Also runs on bot.close(): drain the pipelines so the last
        # utterances still reach the ingest queue, then disconnect.
        if self.bot.voice is not None:
            await self.bot.voice.close()

    @voice_group.command(name="join", description="Start transcribing a voice channel")
    @app_commands.describe(channel="Voice channel (default: the one you are in)")
    async def join(
        self, interaction: discord.Interaction, channel: discord.VoiceChannel | None = None
    ) -> None:
        guild, member = guild_member(interaction)
        if is_operator(member):  # connecting can take seconds
            await interaction.response.defer(ephemeral=True, thinking=True)
        await send_answer(interaction, await join_voice(self.bot, guild, member, channel))

    @voice_group.command(name="leave", description="Stop transcribing and leave the channel")
    async def leave(self, interaction: discord.Interaction) -> None:
        guild, member = guild_member(interaction)
        await send_answer(interaction, await leave_voice(self.bot, guild, member))

    @voice_group.command(name="status", description="What is being transcribed, with counters")
    async def status(self, interaction: discord.Interaction) -> None:
        guild, _ = guild_member(interaction)
        bot = self.bot
        answer = await voice_status(bot.memory, bot.voice, bot.voice_unavailable, guild)
        await send_answer(interaction, answer)

    @commands.Cog.listener()
    async def on_voice_state_update(
        self, member: discord.Member, before: discord.VoiceState, after: discord.VoiceState
    ) -> None:
        manager = self.bot.voice
        session = manager.session(member.guild.id) if manager is not None else None
        if manager is None or session is None:
            return
        was_here = before.channel is not None and before.channel.id == session.channel_id
        still_here = after.channel is not None and after.channel.id == session.channel_id
        if not was_here or still_here:
            return  # joins, mutes, moves elsewhere: nothing to do
        try:
            if member.id == _me_id(member.guild):
                # Disconnected or moved by someone: the notice was for this channel only.
                log.info("voice: removed from %s, stopping", session.channel_id)
                await manager.leave(member.guild.id)
            else:
                await leave_if_empty(self.bot, member.guild)
        except Exception:
            log.exception("voice: leaving %s failed", session.channel_id)

    async def cog_app_command_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        await answer_command_error(interaction, error)


async def setup(bot: commands.Bot) -> None:
    assert isinstance(bot, GuildloreBot)
    await bot.add_cog(VoiceCommands(bot))
