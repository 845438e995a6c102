"""A local stand-in for Discord: enough of its REST API and gateway for a real
``guildlore run`` process (discord.py, sharded or not) to log in, connect,
receive its guilds and messages, and answer.

The bot is pointed at it with ``discord.api_base_url`` (``GUILDLORE_DISCORD_API_BASE_URL``
= ``fake.base_url``); any token is accepted::

    async with FakeDiscord(guilds=[FakeGuild(id, "Name", [channel_id])]) as fake:
        ... start the bot ...
        await fake.wait_identified(shard_id=0, shard_count=2)
        await fake.send_message(guild_id, channel_id, author_id, "text")

REST (under ``/api/v10``): ``GET /users/@me``, ``GET /oauth2/applications/@me``,
``GET /gateway`` and ``/gateway/bot`` (the websocket address of this server),
``PUT /applications/{app}/commands`` (the slash-command sync; echoed),
``POST /channels/{channel}/messages`` (recorded in ``sent``) and
``GET /channels/{channel}/messages`` (a channel's history, as Discord answers
it: ``limit`` 1–100, default 50; ``after`` gives the oldest ``limit`` messages
above that id, ``before`` the newest below it, neither the newest; always
newest first; recorded in ``history``; 403 for a channel in ``forbidden``, 404
for one that does not exist). Anything else is recorded in ``requests`` and
answered 404 like an unknown Discord route.

Gateway (``/gateway``, JSON text frames, no compression): HELLO; IDENTIFY is
recorded with its ``shard`` (``[id, count]``) and answered with READY naming
the guilds of that shard (``(guild_id >> 22) % count``, Discord's rule), then
a GUILD_CREATE per guild (its channels, active threads and the bot's own
member); a heartbeat is ACKed; a RESUME is refused (INVALID_SESSION, not
resumable: this server keeps no sessions), so the client identifies afresh.
``dispatch`` sends an event to the connection holding a guild's shard.

Each channel's messages are kept here, so the bot can read back what it
missed: ``send_message``, ``edit_message`` and ``delete_message`` change
them and, with ``deliver`` (the default), send MESSAGE_CREATE,
MESSAGE_UPDATE or MESSAGE_DELETE; ``deliver=False`` is a change made while
the bot was away, or an event it never got. ``drop`` closes a shard's
connection as a network failure would (the client tries to resume). A
connection that closes (or a process that dies) is dropped; a reconnecting
process identifies again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

API = "/api/v10"
BOT_ID = "900000000000000001"
APP_ID = "900000000000000002"
OWNER_ID = "900000000000000003"
HEARTBEAT_MS = 41_250

# Gateway opcodes (Discord's numbers).
DISPATCH, HEARTBEAT, IDENTIFY, RESUME, INVALID_SESSION, HELLO, HEARTBEAT_ACK = 0, 1, 2, 6, 9, 10, 11
# Close code Discord uses for an unknown error: the client reconnects and resumes.
CLOSE_UNKNOWN_ERROR = 4000


def shard_of(guild_id: str | int, shard_count: int) -> int:
    return (int(guild_id) >> 22) % shard_count


def snowflake(n: int) -> str:
    """A snowflake-shaped id for ``n`` (the time part from now)."""
    ms = int(datetime.now(UTC).timestamp() * 1000) - 1_420_070_400_000
    return str((ms << 22) | (n & 0x3FFFFF))


@dataclass
class FakeGuild:
    id: str
    name: str
    channels: list[str]
    members: dict[str, str] = field(default_factory=dict)  # id → user name
    threads: dict[str, str] = field(default_factory=dict)  # active thread id → parent channel

    def places(self) -> list[str]:
        """Every channel and thread holding messages."""
        return [*self.channels, *self.threads]

    def payload(self, last_ids: dict[str, str] | None = None) -> dict[str, Any]:
        """GUILD_CREATE's data; ``last_ids``: each channel's last message id
        (Discord's ``last_message_id``: the newest ever sent there)."""
        last = last_ids or {}
        return {
            "id": self.id,
            "name": self.name,
            "owner_id": OWNER_ID,
            "unavailable": False,
            "member_count": len(self.members) + 1,
            "large": False,
            "joined_at": datetime.now(UTC).isoformat(),
            "roles": [
                {
                    "id": self.id,  # @everyone has the guild's id
                    "name": "@everyone",
                    "permissions": str((1 << 41) - 1),
                    "position": 0,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                }
            ],
            "channels": [
                {
                    "id": cid,
                    "type": 0,
                    "name": f"channel-{i}",
                    "position": i,
                    "guild_id": self.id,
                    "permission_overwrites": [],
                    "nsfw": False,
                    "last_message_id": last.get(cid),
                }
                for i, cid in enumerate(self.channels)
            ],
            # The bot's own member: Discord always sends it (``guild.me``).
            "members": [
                {
                    "user": _user(BOT_ID, "guildlore", bot=True),
                    "roles": [],
                    "joined_at": datetime.now(UTC).isoformat(),
                    "deaf": False,
                    "mute": False,
                    "flags": 0,
                }
            ],
            "emojis": [],
            "stickers": [],
            "features": [],
            "threads": [
                {
                    "id": tid,
                    "guild_id": self.id,
                    "parent_id": parent,
                    "owner_id": OWNER_ID,
                    "type": 11,  # a public thread
                    "name": f"thread-{i}",
                    "last_message_id": last.get(tid),
                    "message_count": 0,
                    "member_count": 1,
                    "rate_limit_per_user": 0,
                    "flags": 0,
                    "thread_metadata": {
                        "archived": False,
                        "auto_archive_duration": 1440,
                        "archive_timestamp": datetime.now(UTC).isoformat(),
                        "locked": False,
                    },
                }
                for i, (tid, parent) in enumerate(self.threads.items())
            ],
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }


@dataclass
class Identified:
    shard_id: int
    shard_count: int
    token: str
    intents: int


@dataclass
class _Connection:
    ws: web.WebSocketResponse
    shard: tuple[int, int] | None = None
    seq: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def send(self, payload: dict[str, Any]) -> None:
        async with self.lock:
            await self.ws.send_str(json.dumps(payload))

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        self.seq += 1
        await self.send({"op": DISPATCH, "t": event, "s": self.seq, "d": data})


def _json(data: Any, status: int = 200) -> web.Response:
    # Exactly "application/json", as Discord sends it: discord.py parses a body
    # as JSON only for that header (aiohttp's json_response adds a charset).
    return web.Response(
        body=json.dumps(data).encode(), status=status, headers={"Content-Type": "application/json"}
    )


def _user(uid: str, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": uid,
        "username": name,
        "global_name": name,
        "discriminator": "0",
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
    }


class FakeDiscord:
    def __init__(self, guilds: list[FakeGuild], host: str = "127.0.0.1") -> None:
        self.guilds = {g.id: g for g in guilds}
        self.host = host
        self.base_url = ""
        self.identified: list[Identified] = []
        self.sent: list[dict[str, Any]] = []  # messages the bot posted
        self.requests: list[tuple[str, str]] = []  # every REST call: (method, path)
        # Each channel's messages as the REST API returns them, by id.
        self.messages: dict[str, dict[str, dict[str, Any]]] = {
            c: {} for g in guilds for c in g.places()
        }
        self.last_ids: dict[str, str] = {}  # channel → the newest message id ever sent there
        self.forbidden: set[str] = set()  # channels whose history is refused (403)
        self.history: list[tuple[str, dict[str, str]]] = []  # (channel, query) per history read
        self._connections: list[_Connection] = []
        self._changed = asyncio.Condition()
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None

    # -- lifecycle -------------------------------------------------------------
    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get(f"{API}/users/@me", self._me)
        app.router.add_get(f"{API}/oauth2/applications/@me", self._application)
        app.router.add_get(f"{API}/gateway", self._gateway_url)
        app.router.add_get(f"{API}/gateway/bot", self._gateway_url)
        app.router.add_put(API + "/applications/{app}/commands", self._sync_commands)
        app.router.add_post(API + "/channels/{channel}/messages", self._post_message)
        app.router.add_get(API + "/channels/{channel}/messages", self._history)
        app.router.add_route("*", "/{tail:.*}", self._unknown)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        port = next(a[1] for a in self._runner.addresses if isinstance(a, tuple) and len(a) >= 2)
        self.base_url = f"http://{self.host}:{port}"

    async def close(self) -> None:
        for conn in list(self._connections):
            with contextlib.suppress(Exception):
                await conn.ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeDiscord:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- what the test drives --------------------------------------------------
    def guilds_of(self, shard_id: int, shard_count: int) -> list[FakeGuild]:
        return [g for g in self.guilds.values() if shard_of(g.id, shard_count) == shard_id]

    def connected_shards(self) -> set[tuple[int, int]]:
        return {c.shard for c in self._connections if c.shard is not None and not c.ws.closed}

    async def wait_identified(self, shard_id: int, shard_count: int, timeout: float = 60) -> None:
        """Until a live connection identified as this shard (and got its guilds)."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: (shard_id, shard_count) in self.connected_shards())

    async def wait_disconnected(self, shard_id: int, shard_count: int, timeout: float = 60) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(
                lambda: (shard_id, shard_count) not in self.connected_shards()
            )

    async def dispatch(self, guild_id: str, event: str, data: dict[str, Any]) -> int:
        """Send ``event`` to the connection holding ``guild_id``'s shard; which shard."""
        for conn in self._connections:
            if conn.shard is None or conn.ws.closed:
                continue
            shard_id, count = conn.shard
            if shard_of(guild_id, count) == shard_id:
                await conn.dispatch(event, data)
                return shard_id
        raise LookupError(f"no connection holds the shard of guild {guild_id}")

    async def send_message(
        self,
        guild_id: str,
        channel_id: str,
        author_id: str,
        content: str,
        *,
        author_name: str = "member",
        message_id: str | None = None,
        deliver: bool = True,
    ) -> str:
        """A member's message, kept in its channel and (``deliver``) sent as
        MESSAGE_CREATE; the message id."""
        mid = message_id or snowflake(next(self._ids))
        stored: dict[str, Any] = {
            "id": mid,
            "channel_id": channel_id,
            "author": _user(author_id, author_name),
            "content": content,
            "timestamp": datetime.now(UTC).isoformat(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
        }
        self._channel(channel_id)[mid] = stored
        if int(mid) > int(self.last_ids.get(channel_id, "0")):
            self.last_ids[channel_id] = mid
        if deliver:
            await self.dispatch(guild_id, "MESSAGE_CREATE", self._event(guild_id, stored))
        return mid

    async def edit_message(
        self, guild_id: str, channel_id: str, message_id: str, content: str, *, deliver: bool = True
    ) -> None:
        """The author edits a message: new text and edit time, and
        (``deliver``) MESSAGE_UPDATE."""
        stored = self._channel(channel_id)[message_id]
        stored["content"] = content
        stored["edited_timestamp"] = datetime.now(UTC).isoformat()
        if deliver:
            await self.dispatch(guild_id, "MESSAGE_UPDATE", self._event(guild_id, stored))

    async def delete_message(
        self, guild_id: str, channel_id: str, message_id: str, *, deliver: bool = True
    ) -> None:
        """The message is gone from its channel; (``deliver``) MESSAGE_DELETE."""
        self._channel(channel_id).pop(message_id, None)
        if deliver:
            data = {"id": message_id, "channel_id": channel_id, "guild_id": guild_id}
            await self.dispatch(guild_id, "MESSAGE_DELETE", data)

    async def drop(self, shard_id: int, shard_count: int) -> None:
        """Close the shard's connection from this side, as a network failure
        or a gateway restart would: the client reconnects and tries to resume."""
        for conn in list(self._connections):
            if conn.shard == (shard_id, shard_count) and not conn.ws.closed:
                await conn.ws.close(code=CLOSE_UNKNOWN_ERROR)

    def _channel(self, channel_id: str) -> dict[str, dict[str, Any]]:
        if channel_id not in self.messages:
            raise LookupError(f"no channel {channel_id} in any guild")
        return self.messages[channel_id]

    @staticmethod
    def _event(guild_id: str, stored: dict[str, Any]) -> dict[str, Any]:
        """A kept message as a gateway event carries it: with its guild and
        the author's member."""
        member = {
            "roles": [],
            "joined_at": datetime.now(UTC).isoformat(),
            "deaf": False,
            "mute": False,
            "flags": 0,
        }
        return {**stored, "guild_id": guild_id, "member": member}

    # -- gateway ---------------------------------------------------------------
    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        conn = _Connection(ws)
        self._connections.append(conn)
        try:
            await conn.send({"op": HELLO, "d": {"heartbeat_interval": HEARTBEAT_MS}})
            async for frame in ws:
                if frame.type != WSMsgType.TEXT:
                    continue
                await self._gateway_frame(conn, json.loads(frame.data))
        finally:
            self._connections.remove(conn)
            await self._notify()
        return ws

    async def _gateway_frame(self, conn: _Connection, msg: dict[str, Any]) -> None:
        op = msg.get("op")
        if op == HEARTBEAT:
            await conn.send({"op": HEARTBEAT_ACK})
        elif op == IDENTIFY:
            d = msg["d"]
            shard_id, count = d.get("shard") or [0, 1]
            self.identified.append(Identified(shard_id, count, d["token"], d.get("intents", 0)))
            guilds = self.guilds_of(shard_id, count)
            await conn.dispatch(
                "READY",
                {
                    "v": 10,
                    "user": _user(BOT_ID, "guildlore", bot=True),
                    "guilds": [{"id": g.id, "unavailable": True} for g in guilds],
                    "session_id": f"session-{next(self._ids)}",
                    "resume_gateway_url": self._ws_url(),
                    "shard": [shard_id, count],
                    "application": {"id": APP_ID, "flags": 0},
                },
            )
            for g in guilds:
                await conn.dispatch("GUILD_CREATE", g.payload(self.last_ids))
            conn.shard = (shard_id, count)
            await self._notify()
        elif op == RESUME:
            # No sessions are kept here: identify again (Discord's answer to
            # a session it cannot resume).
            await conn.send({"op": INVALID_SESSION, "d": False})
        # Presence updates, voice state requests, member requests: nothing to say.

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _ws_url(self) -> str:
        return self.base_url.replace("http://", "ws://") + "/gateway"

    # -- REST ------------------------------------------------------------------
    def _record(self, request: web.Request) -> None:
        self.requests.append((request.method, request.path))

    async def _me(self, request: web.Request) -> web.Response:
        self._record(request)
        return _json(_user(BOT_ID, "guildlore", bot=True))

    async def _application(self, request: web.Request) -> web.Response:
        self._record(request)
        return _json(
            {
                "id": APP_ID,
                "name": "guildlore",
                "description": "",
                "icon": None,
                "bot_public": False,
                "bot_require_code_grant": False,
                "owner": _user(OWNER_ID, "owner"),
                "verify_key": "0" * 64,
                "flags": 0,
                "summary": "",
            }
        )

    async def _gateway_url(self, request: web.Request) -> web.Response:
        self._record(request)
        return _json(
            {
                "url": self._ws_url(),
                "shards": 1,
                "session_start_limit": {
                    "total": 1000,
                    "remaining": 1000,
                    "reset_after": 0,
                    "max_concurrency": 1,
                },
            }
        )

    async def _sync_commands(self, request: web.Request) -> web.Response:
        self._record(request)
        commands = await request.json()
        out = [
            {**c, "id": snowflake(next(self._ids)), "application_id": APP_ID, "version": "1"}
            for c in commands
        ]
        return _json(out)

    async def _post_message(self, request: web.Request) -> web.Response:
        self._record(request)
        body = await request.json()
        channel = request.match_info["channel"]
        sent = {
            "id": snowflake(next(self._ids)),
            "channel_id": channel,
            "author": _user(BOT_ID, "guildlore", bot=True),
            "content": body.get("content") or "",
            "timestamp": datetime.now(UTC).isoformat(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
        }
        self.sent.append(sent)
        return _json(sent)

    async def _history(self, request: web.Request) -> web.Response:
        self._record(request)
        channel = request.match_info["channel"]
        query = dict(request.query)
        self.history.append((channel, query))
        if channel in self.forbidden:
            return _json({"message": "Missing Access", "code": 50001}, status=403)
        if channel not in self.messages:
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)
        try:
            limit = int(query.get("limit", "50"))
            after = int(query["after"]) if "after" in query else None
            before = int(query["before"]) if "before" in query else None
        except ValueError:
            return _json({"message": "Invalid Form Body", "code": 50035}, status=400)
        if not 1 <= limit <= 100 or "around" in query:
            return _json({"message": "Invalid Form Body", "code": 50035}, status=400)
        kept = sorted(self.messages[channel].values(), key=lambda m: int(m["id"]))
        if after is not None:
            # The oldest ``limit`` above ``after``, answered newest first.
            page = [m for m in kept if int(m["id"]) > after]
            if before is not None:
                page = [m for m in page if int(m["id"]) < before]
            page = page[:limit]
        else:
            page = [m for m in kept if before is None or int(m["id"]) < before][-limit:]
        return _json(list(reversed(page)))

    async def _unknown(self, request: web.Request) -> web.Response:
        self._record(request)
        return _json({"message": "404: Not Found", "code": 0}, status=404)
