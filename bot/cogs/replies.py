"""Replies: answer when mentioned or replied to, with memory — or, where a guild
turned voice replies on, when an utterance in a transcribed voice channel
names the bot (``bot/voice/wake.py``).

The conversation itself (prompt, chat, lookup, lore line) is the engine's
``compose_reply``; this cog decides when to answer, turns the Discord message
or the transcript into a ``ReplyRequest``, shows typing, posts the text in
pieces Discord accepts and records the traces, the posted reply (for the
channel's next short-term windows) and one ``reply`` action-log row. Text and
voice replies share that path (``answer``); a voice reply goes to the voice
channel's text chat, at most one per ``voice_interval_s`` per guild. Every
failure ends in a short apology and an action-log entry, never an exception.

The ``[M#]`` the model cites become a compact footer of jump links to their
source messages — only those in the reply's own channel or in channels
everyone in the server can read: the footer is seen by the whole channel, so
a link to a place some of its readers cannot open is left out. For a member who
opted out of memory (``/memory opt-out``) the reply keeps nothing of their
words: neither the posted reply (for the next windows) nor the context the
model saw is recorded; the traces (which memories were used, without the
words of theirs each matched) are, so "Why do you know this?" still answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import discord
from discord.ext import commands

from bot.client import SAFE_MENTIONS, GuildloreBot
from bot.convert import (
    INGESTED_TYPES,
    replied_message,
    reply_request,
    visible_channel_ids,
    voice_reply_request,
)
from bot.voice.wake import addresses, wake_keys
from memory import (
    Hit,
    IncomingMessage,
    LLMError,
    ReplyRequest,
    ReplyResult,
    Throttle,
    compose_reply,
    iso,
    record_bot_reply,
    record_reply_context,
)

log = logging.getLogger(__name__)

DISCORD_LIMIT = 2000
MAX_CHUNKS = 4
FOOTER_MAX = 5  # cited memories linked under a reply

NOT_CONFIGURED = (
    "I'm keeping track of this server's memory, but chat isn't set up on this bot "
    "(no language model is configured). `/memory search` and `/memory about` still work."
)
APOLOGY = (
    "Sorry, I couldn't come up with an answer just now (my language model didn't respond "
    "properly). Please try again in a moment."
)


def split_message(text: str, limit: int = DISCORD_LIMIT, max_chunks: int = MAX_CHUNKS) -> list[str]:
    """Cut at paragraph, line or word boundaries into pieces of at most ``limit`` chars."""
    text = text.strip()
    chunks: list[str] = []
    while text:
        if len(text) <= limit:
            chunks.append(text)
            break
        if len(chunks) == max_chunks - 1:
            chunks.append(text[: limit - 1].rstrip() + "…")
            break
        window = text[:limit]
        cut = -1
        for sep in ("\n\n", "\n", " "):
            cut = window.rfind(sep)
            if cut >= limit // 2:
                break
        if cut < limit // 2:
            cut = limit
        chunks.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    return [c for c in chunks if c]


# -- the cog ---------------------------------------------------------------------------------


class Replies(commands.Cog):
    def __init__(self, bot: GuildloreBot) -> None:
        self.bot = bot
        self._slots = asyncio.Semaphore(bot.reply_config.concurrency)
        self._last_reply: dict[tuple[int, int], float] = {}
        self._voice_throttle = Throttle(bot.reply_config.voice_interval_s, time.monotonic)

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        if not self.bot.accepting or message.guild is None:
            return
        me = self.bot.user
        if me is None or message.author.id == me.id or message.author.bot:
            return
        if not isinstance(message.author, discord.Member):  # webhooks
            return
        if message.type not in INGESTED_TYPES:
            return
        try:
            settings = await self.bot.memory.guilds.settings(str(message.guild.id))
            if not self.addressed(message, settings.reply_mode):
                return
        except Exception:
            log.exception("reply check failed for message %s", message.id)
            return
        if self._cooling_down(message):
            return
        await self.bot.track(self.respond(message), name=f"reply-{message.id}")

    def addressed(self, message: discord.Message, mode: str) -> bool:
        me = self.bot.user
        if mode == "off" or me is None:
            return False
        if any(u.id == me.id for u in message.mentions):
            return True
        return mode == "mention_or_reply" and replied_message(message, me.id) is not None

    def _cooling_down(self, message: discord.Message) -> bool:
        assert message.guild is not None
        key = (message.guild.id, message.author.id)
        now = time.monotonic()
        last = self._last_reply.get(key)
        if last is not None and now - last < self.bot.reply_config.cooldown_s:
            log.info("cooldown: not replying to %s again yet", message.author.id)
            return True
        self._last_reply[key] = now
        if len(self._last_reply) > 10_000:
            cutoff = now - self.bot.reply_config.cooldown_s
            self._last_reply = {k: v for k, v in self._last_reply.items() if v >= cutoff}
        return False

    @commands.Cog.listener()
    async def on_voice_transcript(self, utterance: IncomingMessage) -> None:
        """A transcribed utterance (``GuildloreBot.voice``): answer it if the guild
        wants voice replies and it names the bot."""
        if not self.bot.accepting or utterance.guild_id is None:
            return
        try:
            channel, speaker = self._voice_target(utterance)
            if channel is None:
                return
            settings = await self.bot.memory.guilds.settings(utterance.guild_id)
            if not settings.voice_replies or settings.reply_mode == "off":
                return
            keys = wake_keys(settings.voice_wake_words) or wake_keys(self._names(channel.guild))
            if not addresses(utterance.content, keys):
                return
            if self._voice_throttle.admit(utterance.guild_id) is None:
                log.info("voice reply rate limit: not answering %s", utterance.id)
                return
            request = voice_reply_request(channel, utterance, speaker)
        except Exception:
            log.exception("voice reply check failed for utterance %s", utterance.id)
            return
        await self.bot.track(
            self.answer(request, channel, trigger="voice"), name=f"voice-reply-{utterance.id}"
        )

    def _voice_target(
        self, utterance: IncomingMessage
    ) -> tuple[discord.VoiceChannel | None, discord.Member | None]:
        """The voice channel an utterance was said in (None if gone), and its speaker."""
        guild = self.bot.get_guild(int(utterance.guild_id or 0))
        channel = guild.get_channel(int(utterance.channel_id)) if guild is not None else None
        if guild is None or not isinstance(channel, discord.VoiceChannel):
            return None, None
        return channel, guild.get_member(int(utterance.author_id))

    def _names(self, guild: discord.Guild) -> list[str]:
        """What members call the bot here: its server nickname, display and user name."""
        me = self.bot.user
        names = [guild.me.display_name] if guild.me is not None else []
        if me is not None:
            names += [me.display_name, me.name]
        return names

    async def respond(self, message: discord.Message) -> None:
        """Compose, send and trace one reply to a member's message; never raises."""
        me = self.bot.user
        assert message.guild is not None and me is not None  # checked in on_message
        try:
            request = reply_request(message, me)
        except Exception as exc:
            log.exception("reply to %s failed", message.id)
            await self._log_error(
                str(message.guild.id), str(message.id), str(message.channel.id), "reply_error", exc
            )
            await self._send(message.channel, APOLOGY, message, str(message.guild.id))
            return
        await self.answer(request, message.channel, reference=message)

    async def answer(
        self,
        request: ReplyRequest,
        channel: discord.abc.Messageable,
        *,
        reference: discord.Message | None = None,
        trigger: str = "text",
    ) -> None:
        """Compose ``request``'s reply, post it in ``channel`` (a Discord reply to
        ``reference`` when given), record and trace it; never raises."""
        gid = request.guild_id
        chat = self.bot.chat
        if chat is None:
            await self._send(channel, NOT_CONFIGURED, reference, gid)
            return
        cfg = self.bot.reply_config
        started = time.perf_counter()
        result: ReplyResult | None = None
        try:
            async with self._slots, _typing(channel):
                result = await compose_reply(
                    self.bot.memory,
                    chat,
                    request,
                    persona=cfg.persona,
                    temperature=cfg.temperature,
                    max_tokens=cfg.max_tokens,
                    max_recent_messages=cfg.max_recent_messages,
                    recent_tokens=cfg.recent_tokens,
                )
        except LLMError as exc:
            self._count(gid, chat.model, started, error=exc)
            await self._log_error(
                gid, request.message_id, request.channel_id, "reply_llm_error", exc
            )
        except Exception as exc:
            log.exception("reply to %s failed", request.message_id)
            self._count(gid, chat.model, started, error=exc)
            await self._log_error(gid, request.message_id, request.channel_id, "reply_error", exc)
        else:
            self._count(gid, chat.model, started, result=result)
        text = result.text if result is not None else APOLOGY
        if result is not None:
            try:
                footer = await citation_footer(
                    self.bot.memory, request, result, self._linkable(channel, request)
                )
            except Exception:
                log.exception("could not link the sources of the reply to %s", request.message_id)
                footer = ""
            text = f"{text}\n{footer}" if footer else text
        sent = await self._send(channel, text, reference, gid, request.message_id)
        if result is None:
            return
        latency_ms = (time.perf_counter() - started) * 1000
        try:
            keep = not await self.bot.memory.opt_outs.is_out(gid, request.author_id)
        except Exception:
            log.exception("could not read opt-outs; keeping nothing of %s", request.author_id)
            keep = False
        await self._record(request, result, sent, latency_ms, trigger, keep=keep)
        if keep:
            try:
                await record_reply_context(
                    self.bot.memory, request, result, str(sent.id) if sent is not None else None
                )
            except Exception:
                log.exception("could not record the context of the reply to %s", request.message_id)
        if not (result.retrieved or result.stored):
            return
        try:
            await self.bot.memory.traces.record(
                gid,
                request.channel_id,
                request.message_id,
                retrieved=result.retrieved,
                stored=[(r.fact, r.event) for r in result.stored],
                reply_id=str(sent.id) if sent is not None else None,
                # Which of her words a memory matched is hers: not for an opt-out.
                query=request.text if keep else None,
            )
        except Exception:
            log.exception("could not record traces for %s", request.message_id)

    def _linkable(self, channel: Any, request: ReplyRequest) -> frozenset[str]:
        """Channels a reply's footer may link into: its own, and those everyone
        in the server can read (the footer's readers are the channel's)."""
        guild = getattr(channel, "guild", None)
        public = visible_channel_ids(guild, guild.default_role) if guild is not None else set()
        return frozenset((public | {request.channel_id}) & set(request.visible_channels))

    def _count(
        self,
        gid: str,
        model: str,
        started: float,
        *,
        result: ReplyResult | None = None,
        error: BaseException | None = None,
    ) -> None:
        """The reply's request-log row and series (time, model, tokens, outcome)."""
        detail = None
        if result is not None:
            lookups = f", {len(result.calls)} lookups" if result.calls else ""
            calls = f"{result.llm_calls} model call{'s' if result.llm_calls != 1 else ''}"
            detail = f"{calls}{lookups}, {len(result.retrieved)} memories used"
        try:
            self.bot.memory.usage.record_reply(
                gid,
                (time.perf_counter() - started) * 1000,
                model=result.model if result is not None else model,
                prompt_tokens=result.prompt_tokens if result is not None else None,
                completion_tokens=result.completion_tokens if result is not None else None,
                error=error,
                detail=detail,
            )
        except Exception:  # a meter must never cost the member their reply
            log.exception("could not count the reply")

    async def _record(
        self,
        request: ReplyRequest,
        result: ReplyResult,
        sent: discord.Message | None,
        latency_ms: float,
        trigger: str,
        *,
        keep: bool = True,
    ) -> None:
        """The posted reply for the channel's next windows (not when ``keep`` is
        False: the member opted out), and its ``reply`` action-log row."""
        mem = self.bot.memory
        if sent is not None and keep:
            try:
                await record_bot_reply(
                    mem,
                    guild_id=request.guild_id,
                    channel_id=request.channel_id,
                    message_id=str(sent.id),
                    reply_to_id=request.message_id,
                    to_user_id=request.author_id,
                    text=result.text,
                    created_at=iso(sent.created_at),
                )
            except Exception:
                log.exception("could not record the reply to %s", request.message_id)
        detail = {
            "message_id": request.message_id,
            "channel_id": request.channel_id,
            "trigger": trigger,
            "reply_id": str(sent.id) if sent is not None else None,
            "sent": sent is not None,
            "latency_ms": round(latency_ms, 1),
            **result.log_detail(),
        }
        lookup = (
            f", {len(result.calls)} lookup(s) via {result.mode}: {result.lookup_hits} hits"
            if result.calls
            else ""
        )
        try:
            await mem.admin.log_action(
                "reply",
                f"replied to {'utterance ' if trigger == 'voice' else ''}{request.message_id} "
                f"({len(result.window)} recent messages"
                f"{lookup}, {len(result.stored)} stored)",
                guild_id=request.guild_id,
                # The member answered: the row is erased with them.
                subject=request.author_id,
                detail=detail,
            )
        except Exception:
            log.exception("could not write the action log")

    async def _send(
        self,
        channel: discord.abc.Messageable,
        text: str,
        reference: discord.Message | None,
        gid: str,
        message_id: str | None = None,
    ) -> discord.Message | None:
        first: discord.Message | None = None
        where = str(getattr(channel, "id", "?"))
        try:
            for i, chunk in enumerate(split_message(text)):
                if i == 0 and reference is not None:
                    # Still posted if the member deleted their message meanwhile.
                    first = await channel.send(
                        chunk,
                        reference=reference.to_reference(fail_if_not_exists=False),
                        allowed_mentions=SAFE_MENTIONS,
                        mention_author=True,
                    )
                else:
                    posted = await channel.send(chunk, allowed_mentions=SAFE_MENTIONS)
                    first = first or posted
        except Exception as exc:  # Forbidden, rate limits beyond retries, a vanished channel
            log.warning("could not send a reply in %s: %s", where, exc)
            msg_id = message_id or (str(reference.id) if reference is not None else "")
            await self._log_error(gid, msg_id, where, "reply_send_error", exc)
        return first

    async def _log_error(
        self, gid: str, message_id: str, channel_id: str, what: str, exc: BaseException
    ) -> None:
        log.warning("%s for message %s: %s", what, message_id, exc)
        try:
            await self.bot.memory.admin.log_action(
                "bot_error",
                f"{what}: {str(exc)[:300]}",
                guild_id=gid,
                detail={
                    "error": what,
                    "message_id": message_id,
                    "channel_id": channel_id,
                    "exception": type(exc).__name__,
                },
            )
        except Exception:
            log.exception("could not write the action log")


async def citation_footer(
    memory: Any, request: ReplyRequest, result: ReplyResult, linkable: frozenset[str]
) -> str:
    """``-# Sources: [M1](link) · …``: for each memory the answer cites, a jump
    link to its latest source message in ``linkable`` channels ('' when none
    has one)."""
    cited = result.citations()[:FOOTER_MAX]
    if not cited:
        return ""
    facts = [int(h.id) for _, h in cited if h.kind == "fact" and h.id.isdigit()]
    explained = {
        e.fact_id: e for e in await memory.provenance.explain_facts(request.guild_id, facts)
    }
    links = []
    for n, hit in cited:
        target = _cited_source(hit, explained, linkable)
        if target is not None:
            channel_id, message_id = target
            url = f"https://discord.com/channels/{request.guild_id}/{channel_id}/{message_id}"
            links.append(f"[M{n}](<{url}>)")
    return "-# Sources: " + " · ".join(links) if links else ""


def _cited_source(
    hit: Hit, explained: dict[Any, Any], visible: frozenset[str]
) -> tuple[str, str] | None:
    """(channel, message) a cited memory links to, if the audience can read it."""
    if hit.kind == "message":
        return (hit.channel_id, hit.id) if hit.channel_id in visible else None
    found = explained.get(int(hit.id))
    readable = [s for s in (found.sources if found else ()) if s.channel_id in visible]
    return (readable[-1].channel_id, readable[-1].message_id) if readable else None


@contextlib.asynccontextmanager
async def _typing(channel: Any) -> AsyncIterator[None]:
    """The typing indicator, if the channel allows it (never fails the reply)."""
    cm = None
    try:
        cm = channel.typing()
        await cm.__aenter__()
    except (discord.HTTPException, AttributeError):
        cm = None
    try:
        yield
    finally:
        if cm is not None:
            with contextlib.suppress(Exception):
                await cm.__aexit__(None, None, None)


async def setup(bot: commands.Bot) -> None:
    assert isinstance(bot, GuildloreBot)
    await bot.add_cog(Replies(bot))
