"""``guildlore dashboard``: the operator dashboard as a process of its own.

It serves the same app, with the same settings (``dashboard.host``, ``port``,
token, secret …), as the one ``guildlore run`` starts, against the database
the bot processes write: no Discord connection, no ingest, no scheduled jobs.
``dashboard.enabled`` is for the bot's own dashboard; this command serves
regardless (bot processes beside it usually turn theirs off). What the
bot processes write shows up here: the engine notices their commits and
drops what it cached (guild settings, loaded vectors).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from bot.commands._common import CliError, add_config_argument, load_cli_settings, open_memory
from bot.settings import Settings

READY_PREFIX = "guildlore dashboard: serving "


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="port to serve on (setting dashboard.port; 0: any free port)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        settings = load_cli_settings(args, {"dashboard_port": args.port})
    except CliError as exc:
        print(exc, file=sys.stderr)
        return exc.code
    from memory import GuildloreError

    try:
        return asyncio.run(serve(settings))
    except CliError as exc:  # the database could not be opened
        print(exc, file=sys.stderr)
        return exc.code
    except GuildloreError as exc:  # storage, a refused bind (ConfigError)
        print(f"guildlore dashboard: {exc}", file=sys.stderr)
        return 1


async def serve(settings: Settings, stop: asyncio.Event | None = None) -> int:
    """Serve until ``stop`` is set (None: until SIGINT or SIGTERM)."""
    from dashboard.server import bound_port, start_dashboard

    if stop is None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
    from bot.deployment import dashboard_config

    config = dashboard_config(settings)
    async with open_memory(settings, ingest=False) as memory:
        try:
            runner = await start_dashboard(memory, config)
        except OSError as exc:
            print(
                f"guildlore dashboard: cannot serve on {config.host}:{config.port}: "
                f"{exc.strerror or exc}. Choose another dashboard.port.",
                file=sys.stderr,
            )
            return 1
        try:
            print(f"{READY_PREFIX}http://{config.host}:{bound_port(runner)}/", flush=True)
            stopped = asyncio.create_task(stop.wait())
            failed = asyncio.create_task(memory.admin.database_failure())
            await asyncio.wait({stopped, failed}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            if not failed.done():
                failed.cancel()
                return 0
            # Unreachable past database.unreachable_exit_s (75), or damaged (74).
            unreachable = memory.admin.database().get("failure_kind") == "unreachable"
            code = 75 if unreachable else 74
            print(
                f"guildlore dashboard: exiting with status {code}: {failed.result()}",
                file=sys.stderr,
            )
            return code
        finally:
            await runner.cleanup()
