"""The composition root: one event loop, every lifecycle, in order.

Start-up: settings (validated by the caller) → openai clients → Memory →
dashboard (``web.AppRunner`` on this loop) → scheduled jobs → voice →
``bot.start``. A process holding some of Discord's shards
(``discord.shard_ids`` of ``discord.shard_count``) first claims them in the
database (bot/shards.py), before the engine replays their guilds' inbox.
Each resource is entered on one ``AsyncExitStack`` as it opens,
so one that fails to open closes everything opened before it. Shutdown on
SIGINT/SIGTERM runs the stack backwards: stop intake (the bot stops taking
messages and finishes replies in progress, then disconnects), close voice,
drain the ingest queue and stop its workers, stop the jobs (giving their
leases back), close the dashboard, give the shard claims back (a process
waiting for them takes them over at once), close the engine and its
database, close the clients. Anything accepted but not processed in
time stays in the ``messages`` inbox and is replayed at the next start, so
nothing is lost.

Test hook — ``GUILDLORE_FAKE_GATEWAY=1`` (test-only, never for production):
instead of connecting to Discord the process reads JSON lines from stdin, one
message each (``id``, ``guild_id``, ``channel_id``, ``author_id``,
``author_name``, ``content``, optional ``created_at``), ingests them, and
prints ``accepted <id> <status>`` per line. It prints
``guildlore: fake gateway ready`` once it listens. No token is needed. The
shutdown test drives a real ``guildlore run`` process this way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import discord

from bot.client import GuildloreBot, ShardedGuildloreBot, make_intents
from bot.cogs.lifecycle import still_away
from bot.deployment import deployment
from bot.jobs import Jobs
from bot.settings import Settings
from bot.shards import ShardClaims, ShardsTaken, claim
from memory import (
    Clients,
    IncomingMessage,
    Memory,
    PairChecker,
    StorageError,
    build_clients,
    iso,
    system_clock,
)

if TYPE_CHECKING:
    from bot.voice.service import VoiceManager
    from bot.voice.stt import Transcriber

log = logging.getLogger(__name__)

FAKE_GATEWAY_ENV = "GUILDLORE_FAKE_GATEWAY"
FAKE_READY_LINE = "guildlore: fake gateway ready"
QUIESCE_TIMEOUT_S = 15.0
# Exit statuses when the database fails under a running process (sysexits):
# unreachable past database.unreachable_exit_s (a supervisor may start it
# again now), or damaged (an I/O error, a malformed file: look first).
EXIT_DATABASE_UNREACHABLE = 75
EXIT_DATABASE_DAMAGED = 74

NO_TOKEN_MESSAGE = """\
guildlore run: no Discord bot token. Set DISCORD_TOKEN in the environment:

    export DISCORD_TOKEN='<your bot token>'
    guildlore run

Get a token at https://discord.com/developers/applications → your application →
Bot → Reset Token (docs/operating/discord.md walks through creating the application,
the intents to enable and the invite link). The token is read only from the
environment, never from the config file.

To try guildlore without Discord, run the offline demo:

    guildlore demo"""

PRIVILEGED_INTENTS_MESSAGE = """\
guildlore run: Discord refused the connection because the Message Content intent
is not enabled for this application. Enable it at
https://discord.com/developers/applications → your application → Bot →
Privileged Gateway Intents → Message Content Intent, then start again.
(Or set discord.message_content = false to run without it; the bot will then
only see messages that mention it.)"""

LOGIN_FAILED_MESSAGE = """\
guildlore run: Discord rejected the token in DISCORD_TOKEN. Copy a fresh one
from the Developer Portal (Bot → Reset Token) and set it again."""

DashboardStarter = Callable[[Memory, Settings], Awaitable[Any]]
ClientsFactory = Callable[[Settings], Clients]


def settings_clients(settings: Settings) -> Clients:
    """The process's OpenAI-compatible clients: chat, LLM extraction, embeddings
    and, when voice goes to a speech-to-text endpoint, transcription."""
    remote_stt = settings.voice_enabled and settings.voice_stt != "local"
    return build_clients(
        settings.llm_config(),
        use_llm_extractor=settings.use_llm_extractor,
        transcription=settings.voice_stt_config() if remote_stt else None,
    )


@dataclass
class VoiceSetup:
    """The voice manager (None: voice off, ``reason`` says why) and what to close at the end."""

    manager: VoiceManager | None
    reason: str = ""
    transcriber: Any = None

    async def aclose(self) -> None:
        if self.manager is not None:  # normally already closed by the voice cog's unload
            with contextlib.suppress(Exception):
                await self.manager.close()
        if self.transcriber is not None:
            with contextlib.suppress(Exception):
                await self.transcriber.aclose()


def build_transcriber(settings: Settings, clients: Clients) -> tuple[Transcriber | None, str]:
    """(transcriber, why there is none)."""
    if settings.voice_stt == "local":
        from bot.voice.stt import FasterWhisperTranscriber

        stt = FasterWhisperTranscriber(
            settings.voice_local_model_path, language=settings.voice_language or "en"
        )
        return stt, ""
    from bot.voice.stt import OpenAITranscriber

    if clients.transcription is None:
        return (
            None,
            "no speech-to-text is configured (set OPENAI_API_KEY or voice.stt_base_url, or "
            'voice.stt = "local" with the local-stt extra)',
        )
    return (
        OpenAITranscriber(clients.transcription, settings.voice_stt_model, settings.voice_language),
        "",
    )


def build_voice(settings: Settings, memory: Memory, clients: Clients) -> VoiceSetup:
    if not settings.voice_enabled:
        return VoiceSetup(None, "voice transcription is turned off (voice.enabled = false)")
    stt, reason = build_transcriber(settings, clients)
    if stt is None:
        return VoiceSetup(None, reason)
    from bot.voice.service import VoiceManager, memory_consent_store, voice_error_log

    load, save = memory_consent_store(memory)
    manager = VoiceManager(
        transcriber=stt,
        ingest=memory.ingest_message,
        load_opt_outs=load,
        save_opt_out=save,
        report_error=voice_error_log(memory),
        memory_opted_out=memory.opt_outs.known_out,
    )
    return VoiceSetup(manager, transcriber=stt)


async def _start_dashboard(memory: Memory, settings: Settings) -> Any:
    """The operator dashboard on this loop (``web.AppRunner``), or None when disabled."""
    if not settings.dashboard_enabled:
        return None
    from bot.deployment import dashboard_config
    from dashboard.server import start_dashboard

    return await start_dashboard(memory, dashboard_config(settings))


async def main(
    settings: Settings,
    *,
    fake_gateway: bool = False,
    dashboard_starter: DashboardStarter | None = None,
    clients_factory: ClientsFactory = settings_clients,
) -> int:
    """Run until a signal (or the gateway ends); returns the process exit code."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    _install_signal_handlers(loop, stop)
    gave_up: list[int] = []  # the exit status, once the database failed (see _serve)
    try:
        return await _run(settings, fake_gateway, dashboard_starter, clients_factory, stop, gave_up)
    except StorageError:
        if not gave_up:
            raise
        # Closing after the database failed: what could not be written stays
        # in the inbox or is caught up at the next start; the reason is logged.
        log.debug("closing after the database failed", exc_info=True)
        return gave_up[0]


async def _run(
    settings: Settings,
    fake_gateway: bool,
    dashboard_starter: DashboardStarter | None,
    clients_factory: ClientsFactory,
    stop: asyncio.Event,
    gave_up: list[int],
) -> int:
    timeout = settings.ingest_drain_timeout_s
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(log.info, "stopped")
        try:
            shards = await _claim_shards(settings)
        except ShardsTaken as exc:
            print(f"guildlore run: {exc}. Each shard runs in one process.", file=sys.stderr)
            return 1
        clients = clients_factory(settings)
        stack.push_async_callback(clients.aclose)
        memory = await Memory.open(
            settings.memory_config(),
            extractor=clients.extractor,
            embedding_client=clients.openai,
            env_embedding_model=settings.embedding_default_model,
            clock=system_clock,
        )
        stack.push_async_callback(memory.close, timeout)
        claims = ShardClaims(memory, shards, settings.discord_shard_lease_s, stop.set)
        claims.start()
        stack.push_async_callback(claims.release)
        log.info(
            "memory open: %s (journal %s) for %s; chat %s; extraction %s",
            settings.database_label,
            settings.resolved_journal_dir,
            memory.config.ownership.describe(),
            settings.llm_chat_model if clients.chat else "off (no LLM configured)",
            "LLM" if clients.extractor is not None else "offline rules",
        )
        try:
            dashboard = await (dashboard_starter or _start_dashboard)(memory, settings)
        except OSError as exc:  # port in use, address not available
            print(
                f"guildlore run: cannot serve the dashboard on {settings.dashboard_host}:"
                f"{settings.dashboard_port}: {exc.strerror or exc}. Choose another "
                "dashboard.port, or set dashboard.enabled = false.",
                file=sys.stderr,
            )
            return 1
        if dashboard is not None:
            stack.push_async_callback(_quietly, dashboard.cleanup)
        jobs = Jobs(
            memory,
            timezone=settings.timezone,
            snapshot_interval_s=settings.snapshot_interval_s,
            reindex_interval_min=settings.jobs_reindex_interval_min,
            retention_interval_min=settings.jobs_retention_interval_min,
        )
        jobs.start()
        stack.push_async_callback(jobs.stop)
        stack.push_async_callback(_drain, memory, timeout)
        # Closed before the drain: bot.close() unloads the voice cog, which
        # closes the sessions; their last transcripts go into the queue drained next.
        voice = build_voice(settings, memory, clients)
        stack.push_async_callback(voice.aclose)
        log.info("voice: %s", voice.reason or f"{voice.transcriber.name}, on /voice join")
        bot = (ShardedGuildloreBot if settings.discord_shard_count else GuildloreBot)(
            **_shard_options(settings),
            memory=memory,
            chat=clients.chat,
            reply_config=settings.reply_config(),
            intents=make_intents(
                settings.discord_message_content, members=settings.discord_members_intent
            ),
            sync_commands=settings.discord_sync_commands,
            sync_state_file=settings.resolved_db_path.parent / "slash_commands.sha256",
            voice=voice.manager,
            voice_unavailable=voice.reason or "voice transcription is not configured",
            catch_up=settings.catch_up_config(),
            deployment=deployment(settings),
        )
        jobs.still_away = partial(still_away, bot)
        jobs.pair_checker = PairChecker.from_chat(clients.chat) if clients.chat else None
        code = await _serve(bot, memory, settings, stop, fake_gateway, gave_up)
    return code


async def _serve(
    bot: GuildloreBot,
    memory: Memory,
    settings: Settings,
    stop: asyncio.Event,
    fake: bool,
    gave_up: list[int],
) -> int:
    """Connect (or read the fake gateway) until the gateway ends, ``stop`` is
    set or the database fails (``gave_up`` then holds the exit status)."""
    code = 0
    async with bot:
        if fake:
            gateway = asyncio.create_task(_fake_gateway(memory, bot), name="fake-gateway")
        else:
            assert settings.discord_token, "checked by the run command"
            gateway = asyncio.create_task(_connect(bot, settings), name="gateway")
        stopper = asyncio.create_task(stop.wait(), name="stop-signal")
        failed = asyncio.create_task(memory.admin.database_failure(), name="database-watch")
        await asyncio.wait({gateway, stopper, failed}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if failed.done():
            code = _database_failed(memory, failed.result())
            gave_up.append(code)
        else:
            failed.cancel()
        if gateway.done() and not gave_up:
            code = _gateway_outcome(gateway)
        log.info("shutting down: stopping intake")
        if not await bot.quiesce(QUIESCE_TIMEOUT_S):
            log.warning("some replies were still running at shutdown")
        await bot.close()
        if not gateway.done():
            gateway.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await gateway
    return code


async def _claim_shards(settings: Settings) -> list[str]:
    """Claim this process's shards before its engine replays their inbox rows
    (a short-lived engine without ingest does it: the claim precedes the
    replay; both engines hold under the process's name)."""
    ownership = settings.ownership()
    if ownership.everything and ownership.shard_count == 1:
        return []
    claimer = await Memory.open(settings.memory_config(), ingest=False)
    try:
        names = await claim(claimer, ownership, settings.discord_shard_lease_s)
    finally:
        await claimer.close()
    log.info("claimed %s", ", ".join(names))
    return names


def _shard_options(settings: Settings) -> dict[str, Any]:
    if not settings.discord_shard_count:
        return {}
    ids = list(settings.discord_shard_ids) or None
    return {"shard_count": settings.discord_shard_count, "shard_ids": ids}


async def _connect(bot: GuildloreBot, settings: Settings) -> None:
    """``bot.start``, at ``discord.api_base_url`` when one is set."""
    assert settings.discord_token, "checked by the run command"
    if settings.discord_api_base_url:
        from bot.discord_api import use_api, use_its_gateway

        use_api(settings.discord_api_base_url)
        await bot.login(settings.discord_token)
        log.info(
            "Discord API at %s, gateway %s",
            settings.discord_api_base_url,
            await use_its_gateway(bot),
        )
    else:
        await bot.login(settings.discord_token)
    await bot.connect()


async def _drain(memory: Memory, timeout: float) -> None:
    """Stop ingest for good: the shard claims given back after it hand over
    guilds whose messages nothing here still processes."""
    drained = await memory.stop_ingest(timeout)
    log.info("ingest queue %s", "drained" if drained else "not drained (replayed next start)")


async def _quietly(close: Callable[[], Awaitable[Any]]) -> None:
    with contextlib.suppress(Exception):
        await close()


def _database_failed(memory: Memory, reason: str) -> int:
    """Log why the process stops (one line) and the status a supervisor sees:
    75 (try again later) for a database away too long, 74 for a damaged one."""
    unreachable = memory.admin.database().get("failure_kind") == "unreachable"
    code = EXIT_DATABASE_UNREACHABLE if unreachable else EXIT_DATABASE_DAMAGED
    log.error("guildlore run: exiting with status %d: %s", code, reason)
    return code


def _gateway_outcome(task: asyncio.Task[Any]) -> int:
    if task.cancelled():
        return 0
    exc = task.exception()
    if exc is None:
        return 0
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        print(PRIVILEGED_INTENTS_MESSAGE, file=sys.stderr)
    elif isinstance(exc, discord.LoginFailure):
        print(LOGIN_FAILED_MESSAGE, file=sys.stderr)
    else:
        log.error("the Discord connection failed", exc_info=exc)
    return 1


def _install_signal_handlers(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    def on_signal(sig: signal.Signals) -> None:
        if stop.is_set():
            log.warning("%s again: already shutting down", sig.name)
            return
        log.info("%s received", sig.name)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # non-Unix, other threads
            loop.add_signal_handler(sig, on_signal, sig)


async def _fake_gateway(memory: Memory, bot: GuildloreBot) -> None:
    """Test-only stand-in for Discord: JSON lines on stdin → ``ingest_message``."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print(FAKE_READY_LINE, flush=True)
    while bot.accepting:
        line = await reader.readline()
        if not line:
            await asyncio.Event().wait()  # stdin closed: idle until the signal
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            msg = IncomingMessage(
                id=str(data["id"]),
                guild_id=str(data["guild_id"]),
                channel_id=str(data["channel_id"]),
                author_id=str(data["author_id"]),
                author_name=str(data.get("author_name") or data["author_id"]),
                content=str(data["content"]),
                created_at=str(data.get("created_at") or iso(system_clock())),
            )
        except (ValueError, KeyError, TypeError) as exc:
            print(f"error {exc}", flush=True)
            continue
        outcome = await memory.ingest_message(msg)
        print(f"accepted {outcome.message_id} {outcome.status}", flush=True)
