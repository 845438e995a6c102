"""What the voice cog calls: join/leave, opt-out/opt-in, stats for the dashboard.

Discord objects are typed loosely (``Any``) so this module imports and is
testable without a live client; the adapter is imported only when joining.

Consent rules enforced here rather than in the cog, so no caller can skip them:

* the guild's opt-outs are loaded before the first packet is accepted;
* the privacy notice is posted before connecting — if it cannot be posted,
  the bot does not join;
* an opt-out takes effect in memory before it is persisted, and an opt-in
  only after, so a storage failure errs on the side of not transcribing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from bot.voice.ids import SyntheticIds
from bot.voice.pipeline import (
    IngestFn,
    MonotonicClock,
    TranscriptListener,
    VoiceErrorReport,
    VoiceIngestPipeline,
)
from bot.voice.stt import Transcriber
from bot.voice.types import VoiceSettings
from bot.voice.vad import FrameVad
from memory import Clock, IncomingMessage, iso, system_clock

log = logging.getLogger(__name__)

OptOutLoader = Callable[[int], Awaitable[Iterable[int]]]
OptOutSaver = Callable[[int, int, bool], Awaitable[object]]  # (guild, user, opted_out)
Connector = Callable[[Any], Awaitable[Any]]

OPT_OUT_COMMAND = "/memory voice-opt-out"
FORGET_COMMAND = "/memory forget-me"

PRIVACY_NOTICE = (
    "🎙️ **Voice transcription is on in {channel}.** While I am in this voice channel, "
    "I turn what people say into text and store it in this server's memory; "
    "facts about you may be remembered and used in later answers. "
    "Speech is transcribed {where}; the audio itself is not kept.\n"
    "• Don't want this? Use `{opt_out}` — from then on your audio is ignored "
    "before it is transcribed (it also stops anything you are saying right now).\n"
    "• `{forget}` deletes what is stored about you.\n"
    "• Bots are never transcribed. A moderator can stop this with `/voice leave`."
)


class VoiceJoinError(RuntimeError):
    """Joining was refused (receive internals moved, or the notice could not be posted)."""


@dataclass
class VoiceSession:
    guild_id: int
    channel_id: int
    voice_client: Any
    pipeline: VoiceIngestPipeline
    sink: Any
    started_at: str
    receive_error: str | None = field(default=None)


def privacy_notice(
    channel_mention: str, *, where: str = "by the configured speech-to-text service"
) -> str:
    return PRIVACY_NOTICE.format(
        channel=channel_mention, where=where, opt_out=OPT_OUT_COMMAND, forget=FORGET_COMMAND
    )


def memory_consent_store(memory: Any) -> tuple[OptOutLoader, OptOutSaver]:
    """Opt-out persistence on the engine's ``voice_opt_outs`` table (kept by ``forget``)."""

    async def load(guild_id: int) -> list[int]:
        # Warms the memory opt-outs the receive thread reads (``known_out``).
        await memory.opt_outs.members(str(guild_id))
        return [int(u) for g, u in await memory.guilds.voice_opt_outs() if g == str(guild_id)]

    async def save(guild_id: int, user_id: int, opted_out: bool) -> None:
        await memory.guilds.set_voice_opt_out(str(guild_id), str(user_id), opted_out)

    return load, save


def voice_error_log(memory: Any) -> VoiceErrorReport:
    """Voice failures as ``voice_error`` rows of the engine's action log."""

    async def report(guild_id: int, message: str, detail: dict[str, Any]) -> None:
        await memory.admin.log_action("voice_error", message, guild_id=str(guild_id), detail=detail)

    return report


def describe_transcriber(transcriber: Any) -> str:
    """Where speech goes, in the words of the privacy notice."""
    from bot.voice.stt import FasterWhisperTranscriber, OpenAITranscriber

    if isinstance(transcriber, FasterWhisperTranscriber):
        return "offline, on the machine that runs this bot"
    if isinstance(transcriber, OpenAITranscriber):
        base = str(getattr(getattr(transcriber, "_client", None), "base_url", "") or "")
        host = base.split("//", 1)[-1].split("/", 1)[0]
        return (
            f"by an external speech-to-text service ({host})"
            if host
            else ("by an external speech-to-text service")
        )
    return "by the configured speech-to-text service"


async def _default_connect(channel: Any) -> Any:
    from bot.voice.discord_adapter import DaveRecvClient

    # self_deaf must stay False: a deafened bot receives no audio at all.
    return await channel.connect(cls=DaveRecvClient, self_deaf=False)


class VoiceManager:
    def __init__(
        self,
        *,
        transcriber: Transcriber,
        ingest: IngestFn,
        settings: VoiceSettings | None = None,
        load_opt_outs: OptOutLoader | None = None,
        save_opt_out: OptOutSaver | None = None,
        vad_factory: Callable[[], FrameVad] | None = None,
        clock: MonotonicClock = time.monotonic,
        wall_clock: Clock = system_clock,
        connect: Connector | None = None,
        stt_where: str | None = None,
        check_internals: bool = True,
        report_error: VoiceErrorReport | None = None,
        memory_opted_out: Callable[[str, str], bool] | None = None,
    ) -> None:
        self._transcriber = transcriber
        # (guild, user) → they opted out of memory altogether (``/memory
        # opt-out``): their audio is ignored before transcription too.
        self._memory_opted_out = memory_opted_out
        self._ingest = ingest
        self.settings = settings or VoiceSettings()
        self._load_opt_outs = load_opt_outs
        self._save_opt_out = save_opt_out
        self._vad_factory = vad_factory
        self._clock = clock
        self._wall_clock = wall_clock
        self._connect = connect or _default_connect
        self._stt_where = stt_where or describe_transcriber(transcriber)
        self._check_internals = check_internals
        self._report_error = report_error
        # Set by the bot (GuildloreBot.voice): each ingested transcript becomes an event.
        self.on_transcript: TranscriptListener | None = None
        self._pending_reports: set[concurrent.futures.Future[None]] = set()
        self._ids = SyntheticIds()  # one per process: ids stay unique across guilds
        self._sessions: dict[int, VoiceSession] = {}
        self._opted_out: dict[int, set[int]] = {}
        self._loaded: set[int] = set()
        self._locks: dict[int, asyncio.Lock] = {}

    # ── consent ──────────────────────────────────────────────────────────

    def is_opted_out(self, guild_id: int, user_id: int) -> bool:
        # Called from the receive thread; set membership is atomic in CPython.
        if user_id in self._opted_out.get(guild_id, ()):
            return True
        out = self._memory_opted_out
        return out is not None and out(str(guild_id), str(user_id))

    async def _ensure_loaded(self, guild_id: int) -> None:
        if guild_id in self._loaded or self._load_opt_outs is None:
            self._loaded.add(guild_id)
            return
        ids = {int(u) for u in await self._load_opt_outs(guild_id)}
        self._opted_out.setdefault(guild_id, set()).update(ids)
        self._loaded.add(guild_id)

    async def opt_out(self, guild_id: int, user_id: int) -> None:
        self._opted_out.setdefault(guild_id, set()).add(user_id)
        session = self._sessions.get(guild_id)
        if session is not None:
            session.pipeline.forget_speaker(user_id)
        if self._save_opt_out is not None:
            await self._save_opt_out(guild_id, user_id, True)
        log.info("voice opt-out: guild %s user %s", guild_id, user_id)

    async def opt_in(self, guild_id: int, user_id: int) -> None:
        if self._save_opt_out is not None:
            await self._save_opt_out(guild_id, user_id, False)
        self._opted_out.get(guild_id, set()).discard(user_id)
        log.info("voice opt-in: guild %s user %s", guild_id, user_id)

    # ── sessions ─────────────────────────────────────────────────────────

    def session(self, guild_id: int) -> VoiceSession | None:
        return self._sessions.get(guild_id)

    def _lock(self, guild_id: int) -> asyncio.Lock:
        return self._locks.setdefault(guild_id, asyncio.Lock())

    async def join(
        self,
        channel: Any,
        *,
        resolve_name: Callable[[int], str] | None = None,
        notice_channel: Any | None = None,
        post_notice: bool = True,
    ) -> VoiceSession:
        """Post the notice, connect with the DAVE receiver, start transcribing.

        ``channel`` is a ``discord.VoiceChannel``; ``notice_channel`` defaults
        to the voice channel's own text chat. With ``post_notice=False`` the
        caller takes over posting ``privacy_notice(...)`` itself. A failure is
        reported (``voice_error``) and raised.
        """
        try:
            return await self._join(channel, resolve_name, notice_channel, post_notice)
        except Exception as exc:
            await self._report(
                int(channel.guild.id),
                "join",
                f"could not join voice channel {channel.id}: {exc}",
                exc,
                channel.id,
            )
            raise

    async def _join(
        self,
        channel: Any,
        resolve_name: Callable[[int], str] | None,
        notice_channel: Any | None,
        post_notice: bool,
    ) -> VoiceSession:
        guild = channel.guild
        guild_id = int(guild.id)
        async with self._lock(guild_id):
            current = self._sessions.get(guild_id)
            if current is not None:
                if current.channel_id == int(channel.id):
                    return current
                await self._leave_locked(guild_id)
            if self._check_internals:
                from bot.voice.discord_adapter import check_receive_internals

                problems = check_receive_internals()
                if problems:
                    raise VoiceJoinError("voice receive internals moved: " + "; ".join(problems))
            await self._ensure_loaded(guild_id)
            if post_notice:
                target = notice_channel or channel
                text = privacy_notice(
                    getattr(channel, "mention", f"#{channel.id}"), where=self._stt_where
                )
                try:
                    await target.send(text)
                except Exception as exc:
                    raise VoiceJoinError(f"could not post the privacy notice: {exc}") from exc

            me_id = int(guild.me.id) if getattr(guild, "me", None) is not None else None

            def is_bot(user_id: int) -> bool:
                if user_id == me_id:
                    return True
                member = guild.get_member(user_id)
                return bool(getattr(member, "bot", False))

            def default_name(user_id: int) -> str:
                member = guild.get_member(user_id)
                return str(getattr(member, "display_name", None) or user_id)

            pipeline = VoiceIngestPipeline(
                guild_id,
                int(channel.id),
                self._transcriber,
                self._ingest,
                self._vad_factory,
                self._clock,
                self.settings,
                lambda uid: self.is_opted_out(guild_id, uid),
                resolve_name=resolve_name or default_name,
                is_bot=is_bot,
                wall_clock=self._wall_clock,
                ids=self._ids,
                report_error=self._report_error,
                on_transcript=self._transcript,
            )
            await pipeline.start()
            try:
                vc = await self._connect(channel)
            except Exception:
                await pipeline.close()
                raise
            from bot.voice.discord_adapter import PipelineSink

            sink = PipelineSink(pipeline)
            session = VoiceSession(
                guild_id=guild_id,
                channel_id=int(channel.id),
                voice_client=vc,
                pipeline=pipeline,
                sink=sink,
                started_at=iso(self._wall_clock()),
            )

            loop = asyncio.get_running_loop()

            def after(error: Exception | None) -> None:
                # Runs on voice-recv's stopper thread.
                if error is None:
                    return
                session.receive_error = f"{type(error).__name__}: {error}"
                log.warning("voice receive stopped in guild %s: %s", guild_id, error)
                if loop.is_closed():
                    return
                report = self._report(
                    guild_id, "receive", f"voice receive stopped: {error}", error, channel.id
                )
                pending = asyncio.run_coroutine_threadsafe(report, loop)
                self._pending_reports.add(pending)
                pending.add_done_callback(self._pending_reports.discard)

            try:
                vc.listen(sink, after=after)
            except Exception:
                await pipeline.close()
                with contextlib.suppress(Exception):
                    await vc.disconnect(force=True)
                raise
            self._sessions[guild_id] = session
            log.info("voice: transcribing guild %s channel %s", guild_id, channel.id)
            return session

    def _transcript(self, message: IncomingMessage) -> None:
        if self.on_transcript is not None:
            self.on_transcript(message)

    async def _report(
        self, guild_id: int, stage: str, message: str, exc: BaseException, channel_id: int
    ) -> None:
        if self._report_error is None:
            return
        detail = {"stage": stage, "channel_id": str(channel_id), "error": type(exc).__name__}
        try:
            await self._report_error(guild_id, message, detail)
        except Exception:  # a report must never become a second failure
            log.exception("voice: could not report a %s error in guild %s", stage, guild_id)

    async def leave(self, guild_id: int) -> bool:
        async with self._lock(guild_id):
            return await self._leave_locked(guild_id)

    async def _leave_locked(self, guild_id: int) -> bool:
        session = self._sessions.pop(guild_id, None)
        if session is None:
            return False
        vc = session.voice_client
        # Stop receiving first so nothing new arrives while the pipeline drains.
        try:
            if vc.is_listening():
                vc.stop_listening()
        except Exception:
            log.exception("voice: stop_listening failed in guild %s", guild_id)
        await session.pipeline.close()
        try:
            await vc.disconnect(force=False)
        except Exception:
            log.exception("voice: disconnect failed in guild %s", guild_id)
        log.info("voice: left guild %s", guild_id)
        return True

    async def close(self) -> None:
        for guild_id in list(self._sessions):
            await self.leave(guild_id)

    # ── health ───────────────────────────────────────────────────────────

    def stats(self) -> dict[str, Any]:
        """Counters for the dashboard's health view; cheap, safe to poll."""
        sessions = []
        for s in self._sessions.values():
            receive: dict[str, Any] = {}
            getter = getattr(s.voice_client, "receive_stats", None)
            if callable(getter):
                try:
                    receive = dict(getter())
                except Exception:
                    log.exception("voice: receive_stats failed")
            sessions.append(
                {
                    "guild_id": str(s.guild_id),
                    "channel_id": str(s.channel_id),
                    "started_at": s.started_at,
                    "listening": _safe_bool(s.voice_client, "is_listening"),
                    "receive_error": s.receive_error,
                    "receive": receive,
                    "dave_health": dave_health(receive),
                    "sink": dict(getattr(s.sink, "stats", {})),
                    "pipeline": s.pipeline.stats,
                }
            )
        return {
            "enabled": True,
            "sessions": sessions,
            "opted_out": {str(g): len(u) for g, u in self._opted_out.items()},
        }


def _safe_bool(obj: Any, method: str) -> bool:
    try:
        return bool(getattr(obj, method)())
    except Exception:
        return False


def dave_health(receive: dict[str, Any], *, min_frames: int = 250) -> str:
    """ "ok", "degraded" or "unknown" from the DAVE layer's counters.

    Degraded means most audio frames of known senders could not be
    decrypted — transcripts would be mostly silence.
    """
    ok = int(receive.get("dave_ok", 0)) + int(receive.get("plain", 0))
    bad = int(receive.get("failed", 0)) + int(receive.get("no_user", 0))
    if ok + bad < min_frames:
        return "unknown"
    return "degraded" if bad > ok else "ok"
