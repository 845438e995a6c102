"""Serve the dashboard on the caller's event loop (AppRunner + TCPSite, not run_app)."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from memory import Memory

from .app import create_app
from .config import DashboardConfig

log = logging.getLogger(__name__)


def runner_options(config: DashboardConfig) -> dict[str, Any]:
    """Options for ``web.AppRunner`` (tests pass the same to their TestServer)."""
    return {
        "handle_signals": False,  # the bot's composition root owns signals
        "max_line_size": config.max_url_bytes,
        "max_field_size": 16 * 1024,
    }


async def start_dashboard(memory: Memory, config: DashboardConfig) -> web.AppRunner:
    """Start serving; returns the runner, whose ``cleanup()`` stops it.

    Raises ``memory.errors.ConfigError`` for a non-loopback bind without a token.
    """
    config.check_bind()
    app = create_app(memory, config)
    runner = web.AppRunner(app, **runner_options(config))
    await runner.setup()
    try:
        site = web.TCPSite(runner, config.host, config.port)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    auth = "token required" if config.token else "open (loopback only)"
    for addr in runner.addresses:
        log.info("dashboard listening on %s (%s)", addr, auth)
    return runner


def bound_port(runner: web.AppRunner) -> int:
    """The port actually bound (useful with ``port=0``)."""
    for addr in runner.addresses:
        if isinstance(addr, tuple) and len(addr) >= 2:
            return int(addr[1])
    raise RuntimeError("dashboard is not listening")
