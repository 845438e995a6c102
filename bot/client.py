"""The ``commands.Bot`` subclass: holds the shared services, loads one cog per feature."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import discord
from discord.ext import commands

from bot.settings import CatchUpConfig, ReplyConfig
from memory import ChatModel, Deployment, IncomingMessage, Memory

if TYPE_CHECKING:  # the voice stack loads only where it is used
    from bot.voice.service import VoiceManager

log = logging.getLogger(__name__)

DEFAULT_EXTENSIONS: tuple[str, ...] = (
    "bot.cogs.listener",
    "bot.cogs.lifecycle",
    "bot.cogs.catch_up",
    "bot.cogs.replies",
    "bot.cogs.memory_commands",
    "bot.cogs.member_commands",  # joins /memory: after memory_commands
    "bot.cogs.trust_commands",  # joins /memory: after memory_commands
    "bot.cogs.provenance",
    "bot.cogs.upkeep_commands",  # joins /memory and /memory-admin: after memory_commands
    "bot.cogs.consent",
    "bot.cogs.review",
    "bot.cogs.pins",
    "bot.cogs.voice",
)

NO_VOICE = "voice transcription is not configured"

# Model output must never ping @everyone, @here or roles; user pings only where
# a call site opts in (the replied-to member).
SAFE_MENTIONS = discord.AllowedMentions(everyone=False, roles=False, users=False, replied_user=True)


def make_intents(message_content: bool = True, members: bool = False) -> discord.Intents:
    """Guilds, guild messages (incl. threads, forum posts, voice text chat), voice states.

    Presences are not needed, and members only for the leave policies
    (``members``: member leave and join events): slash commands carry the
    member, and messages carry their author.
    """
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.voice_states = True
    intents.message_content = message_content
    intents.members = members
    return intents


class GuildloreBot(commands.Bot):
    def __init__(
        self,
        *,
        memory: Memory,
        chat: ChatModel | None = None,
        reply_config: ReplyConfig | None = None,
        intents: discord.Intents | None = None,
        extensions: Sequence[str] = DEFAULT_EXTENSIONS,
        sync_commands: bool = False,
        sync_state_file: Path | None = None,
        voice: VoiceManager | None = None,
        voice_unavailable: str = NO_VOICE,
        catch_up: CatchUpConfig | None = None,
        deployment: Deployment | None = None,
        **options: Any,
    ) -> None:
        """``catch_up``: read back what was missed when a session starts
        afresh (bot/cogs/catch_up.py); None: never."""
        super().__init__(
            command_prefix=commands.when_mentioned,
            intents=intents if intents is not None else make_intents(),
            allowed_mentions=SAFE_MENTIONS,
            help_command=None,
            **options,
        )
        self.memory = memory
        self.chat = chat
        self.reply_config = reply_config or ReplyConfig()
        self.catch_up = catch_up
        self.initial_extensions = tuple(extensions)
        self.sync_commands = sync_commands
        self.sync_state_file = sync_state_file
        # None when voice is off; ``voice_unavailable`` then says why (shown by /voice join).
        self._voice: VoiceManager | None = None
        self.voice = voice
        self.voice_unavailable = voice_unavailable
        # What the privacy notice says about this process (None: derived
        # from the engine's configuration, bot.cogs.trust_commands).
        self.deployment = deployment
        # Cleared when shutdown begins: cogs stop taking new work.
        self.accepting = True
        self._work: set[asyncio.Task[Any]] = set()

    @property
    def voice(self) -> VoiceManager | None:
        return self._voice

    @voice.setter
    def voice(self, manager: VoiceManager | None) -> None:
        """Attach the voice stack: each ingested transcript becomes a
        ``voice_transcript`` event (``IncomingMessage``) for the cogs."""
        if self._voice is not None and self._voice is not manager:
            self._voice.on_transcript = None
        self._voice = manager
        if manager is not None:
            manager.on_transcript = self._voice_transcript

    def _voice_transcript(self, message: IncomingMessage) -> None:
        self.dispatch("voice_transcript", message)

    async def setup_hook(self) -> None:
        for ext in self.initial_extensions:
            await self.load_extension(ext)

    async def on_ready(self) -> None:
        assert self.user is not None
        log.info("logged in as %s (%s) in %d guilds", self.user, self.user.id, len(self.guilds))
        if self.sync_commands:
            self.sync_commands = False  # once per process; reconnects fire on_ready again
            await self._sync_if_changed()
        for guild in self.guilds:
            await self.record_guild_names(guild)

    async def on_guild_join(self, guild: discord.Guild) -> None:
        log.info("joined guild %s (%s)", guild.name, guild.id)
        await self.record_guild_names(guild)

    async def record_guild_names(self, guild: discord.Guild) -> None:
        """Guild and channel names for the dashboard and MEMORY.md."""
        channels = {
            str(c.id): c.name for c in guild.channels if not isinstance(c, discord.CategoryChannel)
        }
        try:
            await self.memory.guilds.set_names(
                str(guild.id), guild_name=guild.name, channels=channels
            )
        except Exception:  # names are cosmetic; never let them stop the bot
            log.exception("could not record names of guild %s", guild.id)

    async def on_message(self, message: discord.Message) -> None:
        # No prefix commands: the cogs' listeners handle messages, and slash
        # commands arrive as interactions.
        return None

    def track(self, coro: Any, *, name: str) -> asyncio.Task[Any]:
        """Run background work the shutdown waits for (replies in progress)."""
        task = asyncio.create_task(coro, name=name)
        self._work.add(task)
        task.add_done_callback(self._work.discard)
        return task

    async def quiesce(self, timeout: float) -> bool:
        """Stop taking work and wait for work in progress; False if some is still running."""
        self.accepting = False
        pending = [t for t in self._work if not t.done()]
        if not pending:
            return True
        _, still = await asyncio.wait(pending, timeout=max(0.1, timeout))
        return not still

    # -- slash-command publishing ------------------------------------------------------------
    def command_fingerprint(self) -> str:
        payload = [cmd.to_dict(self.tree) for cmd in self.tree.get_commands()]
        # Another application (a new token) must sync even if the commands match.
        blob = json.dumps([self.application_id, payload], sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()

    async def _sync_if_changed(self) -> None:
        """Publish slash commands only when they changed (global sync is rate-limited)."""
        fingerprint = self.command_fingerprint()
        state = self.sync_state_file
        if state is not None:
            try:
                if state.read_text(encoding="utf-8").strip() == fingerprint:
                    log.info("slash commands unchanged since the last sync")
                    return
            except OSError:
                pass
        try:
            synced = await self.tree.sync()
        except discord.HTTPException as exc:
            log.warning("could not publish slash commands: %s", exc)
            return
        log.info("published %d slash commands (may take a minute to appear)", len(synced))
        if state is not None:
            try:
                state.parent.mkdir(parents=True, exist_ok=True)
                state.write_text(fingerprint + "\n", encoding="utf-8")
            except OSError as exc:
                log.warning("could not record the slash-command sync: %s", exc)


class ShardedGuildloreBot(GuildloreBot, commands.AutoShardedBot):
    """The same bot holding several of Discord's shards (``shard_ids`` of
    ``shard_count``) over one connection each."""
