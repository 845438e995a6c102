"""Button clicks and modal submits for the real bot under dpytest.

dpytest delivers messages but no interactions, and discord.py answers an
interaction over HTTP (``POST /interactions/{id}/{token}/callback``), not
through the client's HTTP object dpytest replaces. So:

- ``Callbacks`` is a local HTTP server standing in for Discord's interaction
  endpoints: ``discord.http.Route.BASE`` points at it and the bot's HTTP
  client gets a real aiohttp session, so every response goes through
  discord.py's own webhook adapter and is recorded as the JSON Discord
  would receive (``type`` 4: a message, 7: the clicked message updated, 9: a
  modal);
- ``click`` and ``submit`` build the INTERACTION_CREATE payload Discord
  would send (the member with their roles, the message with the components
  the bot posted) and hand it to the bot's connection state, as the gateway
  does, then wait until the bot's handlers are done.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import discord
from aiohttp import web
from aiohttp.test_utils import TestServer
from discord.ext.test import factories as dfacts
from discord.http import INTERNAL_API_VERSION, Route

MESSAGE_UPDATE, CHANNEL_MESSAGE, MODAL = 7, 4, 9
EPHEMERAL = 1 << 6
_ids = itertools.count(1)


@dataclass
class Answer:
    """One interaction callback the bot sent."""

    interaction_id: int
    type: int
    data: dict[str, Any]

    @property
    def ephemeral(self) -> bool:
        return bool(int(self.data.get("flags") or 0) & EPHEMERAL)

    @property
    def text(self) -> str:
        return str(self.data.get("content") or "")


@dataclass
class Callbacks:
    server: TestServer
    session: aiohttp.ClientSession
    answers: list[Answer] = field(default_factory=list)
    old_base: str = ""

    def for_interaction(self, interaction_id: int) -> list[Answer]:
        return [a for a in self.answers if a.interaction_id == interaction_id]


async def start_callbacks(bot: discord.Client) -> Callbacks:
    app = web.Application()
    server = TestServer(app)
    recorded: list[Answer] = []

    async def callback(request: web.Request) -> web.Response:
        body = await request.json()
        interaction_id = int(request.match_info["id"])
        recorded.append(Answer(interaction_id, int(body["type"]), dict(body.get("data") or {})))
        # Exactly Discord's content type: discord.py parses nothing else as JSON.
        body_out = json.dumps({"interaction": {"id": str(interaction_id), "type": 3}})
        return web.Response(body=body_out.encode(), headers={"Content-Type": "application/json"})

    app.router.add_post(
        f"/api/v{INTERNAL_API_VERSION}/interactions/{{id}}/{{token}}/callback", callback
    )
    await server.start_server()
    session = aiohttp.ClientSession()
    found = Callbacks(server, session, recorded, Route.BASE)
    Route.BASE = str(server.make_url(f"/api/v{INTERNAL_API_VERSION}"))
    bot.http._HTTPClient__session = session  # type: ignore[attr-defined]
    return found


async def stop_callbacks(found: Callbacks) -> None:
    Route.BASE = found.old_base
    await found.session.close()
    await found.server.close()


def _member(member: discord.Member) -> dict[str, Any]:
    data = dfacts.dict_from_member(member)
    data["roles"] = [str(r) for r in data["roles"]]
    data["joined_at"] = member.joined_at.isoformat() if member.joined_at else None
    data["deaf"] = data["mute"] = False
    data["flags"] = 0
    # What Discord computes for the member in the channel; the bot decides
    # from their roles all the same.
    data["permissions"] = str(member.guild_permissions.value)
    return data


def _message(message: discord.Message, components: list[dict[str, Any]]) -> dict[str, Any]:
    data = dfacts.dict_from_message(message)
    data["components"] = components
    return data


async def _dispatch(bot: discord.Client, payload: dict[str, Any]) -> None:
    bot._connection.parse_interaction_create(payload)  # type: ignore[attr-defined]
    store = bot._connection._view_store  # type: ignore[attr-defined]
    for _ in range(200):  # the handlers run as tasks of the view store
        tasks = [t for t in store._ViewStore__tasks if not t.done()]
        if not tasks:
            return
        await asyncio.wait(tasks, timeout=10)
    raise AssertionError("the interaction's handlers did not finish")


def _base(
    kind: int, member: discord.Member, channel: discord.abc.GuildChannel, data: dict[str, Any]
) -> dict[str, Any]:
    bot_user = channel.guild.me
    assert bot_user is not None
    return {
        "id": str(dfacts.make_id()),
        "application_id": str(bot_user.id),
        "type": kind,
        "token": f"token-{next(_ids)}",
        "version": 1,
        "guild_id": str(channel.guild.id),
        "channel_id": str(channel.id),
        "channel": {"id": str(channel.id), "type": 0},
        "member": _member(member),
        "data": data,
        "locale": "en-US",
        "guild_locale": "en-US",
        "app_permissions": "0",
        "entitlements": [],
        "attachment_size_limit": 25 * 1024 * 1024,
    }


async def click(
    bot: discord.Client,
    callbacks: Callbacks,
    message: discord.Message,
    components: list[dict[str, Any]],
    custom_id: str,
    member: discord.Member,
) -> list[Answer]:
    """``member`` clicks the button ``custom_id`` of ``message`` (which the
    bot posted with ``components``); what the bot answered."""
    assert isinstance(message.channel, discord.abc.GuildChannel)
    payload = _base(3, member, message.channel, {"custom_id": custom_id, "component_type": 2})
    payload["message"] = _message(message, components)
    await _dispatch(bot, payload)
    return callbacks.for_interaction(int(payload["id"]))


async def submit(
    bot: discord.Client,
    callbacks: Callbacks,
    message: discord.Message,
    components: list[dict[str, Any]],
    modal: Answer,
    values: dict[str, str],
    member: discord.Member,
) -> list[Answer]:
    """``member`` submits the ``modal`` the bot opened from ``message``,
    filling its text inputs (by label) with ``values``."""
    assert modal.type == MODAL
    rows = []
    for row in modal.data["components"]:
        inputs = []
        for c in row["components"]:
            inputs.append(
                {
                    "type": 4,
                    "custom_id": c["custom_id"],
                    "value": values.get(c["label"], c.get("value", "")),
                }
            )
        rows.append({"type": 1, "components": inputs})
    assert isinstance(message.channel, discord.abc.GuildChannel)
    payload = _base(
        5, member, message.channel, {"custom_id": modal.data["custom_id"], "components": rows}
    )
    payload["message"] = _message(message, components)
    await _dispatch(bot, payload)
    return callbacks.for_interaction(int(payload["id"]))
