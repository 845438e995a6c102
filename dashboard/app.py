"""The app factory: ``create_app(memory, config)`` builds the whole dashboard, does no I/O.

Serving it is ``dashboard.server.start_dashboard`` (AppRunner + TCPSite on the
bot's loop). Layout: routes.py (URL table) → api.py / pages.py (handlers) →
context.py (one context builder per view) → render.py (HTML or JSON);
middlewares.py + security.py (errors, auth, CSRF, headers).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator

from aiohttp import web

from memory import Memory

from .config import DashboardConfig
from .keys import CONFIG, LOGIN_THROTTLE, MARKDOWN, MEMORY, RATES, SECRET, TEMPLATES
from .middlewares import MIDDLEWARES, security_headers
from .rates import LoginThrottle, RateMeter
from .render import create_environment, create_markdown
from .routes import setup_routes

__all__ = ["DashboardConfig", "create_app"]

log = logging.getLogger(__name__)

RATE_SAMPLE_S = 15.0


async def _rate_sampler(app: web.Application) -> AsyncIterator[None]:
    """Sample the ingest counters while the app runs, for the overview's rates."""
    meter = app[RATES]
    mem = app[MEMORY]
    meter.sample(mem.admin.counters())

    async def loop() -> None:
        while True:
            await asyncio.sleep(RATE_SAMPLE_S)
            try:
                meter.sample(mem.admin.counters())
            except Exception:  # a meter must never take the dashboard down
                log.exception("dashboard: rate sampling failed")

    task = asyncio.create_task(loop(), name="dashboard-rate-sampler")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def create_app(memory: Memory, config: DashboardConfig | None = None) -> web.Application:
    config = config or DashboardConfig()
    app = web.Application(middlewares=MIDDLEWARES, client_max_size=config.max_body_bytes)
    app[MEMORY] = memory
    app[CONFIG] = config
    app[SECRET] = config.secret or secrets.token_bytes(32)
    app[TEMPLATES] = create_environment()
    app[MARKDOWN] = create_markdown()
    app[RATES] = RateMeter()
    app[LOGIN_THROTTLE] = LoginThrottle(config.login_failures_per_minute)
    app.on_response_prepare.append(security_headers)
    app.cleanup_ctx.append(_rate_sampler)
    setup_routes(app)
    return app
