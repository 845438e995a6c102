"""Pointing discord.py at another Discord API address (``discord.api_base_url``):
a local stand-in in tests, or an HTTP proxy.

discord.py keeps the REST base and the gateway address on its classes, so
this is process-wide. The REST base is set before login; the gateway address
is asked from that API (``GET /gateway/bot``) after it, as discord.py would
use Discord's own otherwise.
"""

from __future__ import annotations

import yarl
from discord.gateway import DiscordWebSocket
from discord.http import INTERNAL_API_VERSION, Route

from bot.client import GuildloreBot


def use_api(base_url: str) -> None:
    Route.BASE = f"{base_url.rstrip('/')}/api/v{INTERNAL_API_VERSION}"


async def use_its_gateway(bot: GuildloreBot) -> str:
    """After login: the gateway address that API names; returned for the log."""
    _, url, _ = await bot.http.get_bot_gateway()
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)
    return str(url)
