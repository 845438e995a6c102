"""Serve the dashboard on the caller's event loop (AppRunner + TCPSite, not run_app)."""

from __future__ import annotations

import logging
import sys
from typing import Any

from aiohttp import web

from memory import Memory

from .app import create_app
from .config import DashboardConfig
from .params import MALFORMED_REQUEST, malformed_reason

log = logging.getLogger(__name__)


class ServerLog(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server logger, with requests its HTTP parser refused as one line.

    aiohttp answers a malformed request (bad request line, bad headers, an
    invalid Content-Length or chunk) with a 400 and logs it with
    ``logger.exception``; it logs a body it could not decode the same way
    when it drains what a handler left unread. Such requests come from the
    network before any authentication, so a stack trace for each would let
    anyone flood the log: they are logged at INFO as one line with the
    reason (and the client, where aiohttp names it). Every other exception
    keeps its trace.
    """

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        exc = _exception(kwargs.get("exc_info"))
        if isinstance(exc, MALFORMED_REQUEST):
            kwargs.pop("exc_info")
            text = str(msg) % args if args else str(msg)
            level, msg = min(level, logging.INFO), "malformed HTTP request: %s (aiohttp: %s)"
            args = (malformed_reason(exc), text)
        super().log(level, msg, *args, **kwargs)


def _exception(exc_info: object) -> BaseException | None:
    if isinstance(exc_info, BaseException):
        return exc_info
    if isinstance(exc_info, tuple) and len(exc_info) == 3:
        return exc_info[1] if isinstance(exc_info[1], BaseException) else None
    return sys.exc_info()[1] if exc_info is True else None


def runner_options(config: DashboardConfig) -> dict[str, Any]:
    """Options for ``web.AppRunner`` (tests pass the same to their TestServer)."""
    return {
        "logger": ServerLog(logging.getLogger("aiohttp.server")),
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
