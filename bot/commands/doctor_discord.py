"""``guildlore doctor``'s Discord checks: the token's format, and (online) whether
Discord accepts it and the application has the Message Content intent."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import re
from typing import Any

from bot.commands.doctor_report import Report, short_error

# Discord bot tokens: base64url(user id) "." timestamp "." HMAC.
_TOKEN = re.compile(r"^([A-Za-z0-9_-]{18,40})\.([A-Za-z0-9_-]{4,10})\.([A-Za-z0-9_-]{20,})$")
MESSAGE_CONTENT_FLAGS = (1 << 18) | (1 << 19)  # GATEWAY_MESSAGE_CONTENT(_LIMITED)
NETWORK_TIMEOUT_S = 8.0


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot be a Discord bot token, or None if its format is right."""
    token = token.strip()
    if token.lower().startswith("bot "):
        return "remove the leading 'Bot ' (guildlore adds it)"
    m = _TOKEN.match(token)
    if m is None:
        return "expected three dot-separated base64 parts (copy it again from Bot → Reset Token)"
    first = m.group(1)
    try:
        user_id = base64.urlsafe_b64decode(first + "=" * (-len(first) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return "its first part is not the bot's id in base64; it may be a client secret"
    if not (user_id.isdigit() and 15 <= len(user_id) <= 20):
        return "its first part is not the bot's id in base64; it may be a client secret"
    return None


def _token_user_id(token: str) -> str:
    first = token.strip().split(".")[0]
    return base64.urlsafe_b64decode(first + "=" * (-len(first) % 4)).decode("ascii")


def check_discord(report: Report, settings: Any, offline: bool) -> None:
    token = settings.discord_token
    if not token:
        report.add(
            "info",
            "discord token",
            "DISCORD_TOKEN not set (only `guildlore run` needs it; the demo does not)",
        )
        return
    problem = token_problem(token)
    if problem is not None:
        report.add(
            "FAIL", "discord token", f"DISCORD_TOKEN does not look like a bot token: {problem}"
        )
        return
    report.add("ok", "discord token", f"format valid (bot user id {_token_user_id(token)})")
    if offline:
        report.add("info", "discord intents", "not checked (--offline)")
        return
    try:
        status, data = asyncio.run(_discord_application(token.strip()))
    except Exception as exc:
        report.add("warn", "discord intents", f"could not reach Discord ({short_error(exc)})")
        return
    if status == 401:
        report.add(
            "FAIL",
            "discord token",
            "Discord rejected the token",
            "reset it in the Developer Portal (Bot → Reset Token) and set DISCORD_TOKEN again",
        )
        return
    if status != 200 or not isinstance(data, dict):
        report.add("warn", "discord intents", f"Discord answered HTTP {status}; not checked")
        return
    flags = int(data.get("flags") or 0)
    name = data.get("name", "?")
    if flags & MESSAGE_CONTENT_FLAGS:
        report.add("ok", "discord intents", f"application {name!r}: Message Content intent enabled")
    elif settings.discord_message_content:
        report.add(
            "FAIL",
            "discord intents",
            f"application {name!r}: the Message Content intent is not enabled",
            "Developer Portal → your application → Bot → Privileged Gateway Intents → "
            "Message Content Intent (or set discord.message_content = false)",
        )
    else:
        report.add(
            "warn",
            "discord intents",
            "Message Content intent off: the bot only sees messages that mention it",
        )


async def _discord_application(token: str) -> tuple[int, Any]:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=NETWORK_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async with session.get(
            "https://discord.com/api/v10/applications/@me",
            headers={"Authorization": f"Bot {token}", "User-Agent": "guildlore-doctor"},
        ) as resp:
            data = None
            with contextlib.suppress(Exception):
                data = await resp.json()
            return resp.status, data
