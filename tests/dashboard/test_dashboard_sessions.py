"""Operator logins through the real aiohttp app: throttling per client, revocable sessions.

Clients come from different loopback addresses (127.0.0.1 and 127.0.0.2 are
both this machine on Linux), so the server sees two real peers. Sessions are
kept in the engine's database: logging out, or out everywhere, revokes them,
and a server restarted on the same database (with the same secret) keeps both
the live sessions and the revocations.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import TCPConnector, web
from aiohttp.test_utils import TestClient, TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options

TOKEN = "correct-horse-battery-staple-42"
SECRET = b"a-dashboard-secret-of-32-bytes!!"
Client = TestClient[web.Request, web.Application]
MakeClient = Callable[..., Awaitable[Client]]


@pytest.fixture
async def serve(aiohttp_client: Any) -> Callable[..., Awaitable[TestServer]]:
    async def start(mem: Any, **cfg: Any) -> TestServer:
        config = DashboardConfig(**{"token": TOKEN, "secret": SECRET, **cfg})
        server = TestServer(create_app(mem, config))
        await server.start_server(**runner_options(config))
        return server

    return start


@pytest.fixture
async def connect(aiohttp_client: Any) -> Callable[..., Awaitable[Client]]:
    async def client_of(server: TestServer, address: str = "127.0.0.1") -> Client:
        connector = TCPConnector(local_addr=(address, 0))
        client: Client = await aiohttp_client(server, connector=connector)
        return client

    return client_of


async def form_token(client: Client, path: str = "/login") -> str:
    html = await (await client.get(path)).text()
    m = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert m, f"no CSRF field on {path}"
    return m.group(1)


async def login(client: Client, token: str = TOKEN) -> int:
    r = await client.post(
        "/login",
        data={"csrf_token": await form_token(client), "token": token, "next": "/"},
        allow_redirects=False,
    )
    return r.status


def session_cookie(client: Client) -> str:
    for cookie in client.session.cookie_jar:
        if cookie.key == "guildlore_session":
            return cookie.value
    raise AssertionError("no session cookie")


async def replay(server: TestServer, connect: Any, cookie: str) -> int:
    """A fresh client presenting only ``cookie``: the status of an API call."""
    other = await connect(server)
    r = await other.get("/api/memory", headers={"Cookie": f"guildlore_session={cookie}"})
    return r.status


# -- throttling -------------------------------------------------------------------------------


async def test_wrong_logins_lock_out_only_their_own_address(
    make_memory: Any, serve: Any, connect: Any
) -> None:
    server = await serve(await make_memory(embeddings="none"), login_failures_per_minute=3)
    guesser = await connect(server, "127.0.0.1")
    for _ in range(3):
        assert await login(guesser, "a-wrong-guess-of-the-token") == 401
    assert await login(guesser, TOKEN) == 429  # even the right token, from there
    # A forged X-Forwarded-For does not help: it is not trusted unless configured.
    r = await guesser.post(
        "/login",
        data={"csrf_token": await form_token(guesser), "token": TOKEN},
        headers={"X-Forwarded-For": "198.51.100.7"},
        allow_redirects=False,
    )
    assert r.status == 429

    operator = await connect(server, "127.0.0.2")
    assert await login(operator, TOKEN) == 303
    assert (await operator.get("/api/memory")).status == 200


async def test_header_token_guesses_are_throttled(
    make_memory: Any, serve: Any, connect: Any
) -> None:
    server = await serve(await make_memory(embeddings="none"), login_failures_per_minute=3)
    guesser = await connect(server, "127.0.0.1")
    for header in ("X-Guildlore-Token", "Authorization"):
        value = "guess-number-one-0000" if header == "X-Guildlore-Token" else "Bearer guess-two"
        r = await guesser.get("/api/memory", headers={header: value})
        assert r.status == 401
    r = await guesser.get("/api/memory", headers={"X-Guildlore-Token": "guess-number-three"})
    assert r.status == 401
    r = await guesser.get("/api/memory", headers={"X-Guildlore-Token": TOKEN})
    assert r.status == 429
    body = await r.json()
    assert body == {"ok": False, "error": body["error"], "status": 429}
    assert int(r.headers["Retry-After"]) > 0
    # Header guesses and login guesses count together.
    assert await login(guesser, TOKEN) == 429

    elsewhere = await connect(server, "127.0.0.2")
    r = await elsewhere.get("/api/memory", headers={"X-Guildlore-Token": TOKEN})
    assert r.status == 200


async def test_forwarded_for_names_the_client_only_when_trusted(
    make_memory: Any, serve: Any, connect: Any
) -> None:
    server = await serve(
        await make_memory(embeddings="none"), login_failures_per_minute=2, trust_forwarded_for=True
    )
    proxy = await connect(server)
    behind = {"X-Forwarded-For": "203.0.113.9, 198.51.100.5"}
    for _ in range(2):
        r = await proxy.get("/api/memory", headers={**behind, "X-Guildlore-Token": "wrong-1234"})
        assert r.status == 401
    r = await proxy.get("/api/memory", headers={**behind, "X-Guildlore-Token": TOKEN})
    assert r.status == 429
    # The proxy appends the address it saw last: another client behind it is not locked out.
    r = await proxy.get(
        "/api/memory",
        headers={"X-Forwarded-For": "203.0.113.9, 198.51.100.6", "X-Guildlore-Token": TOKEN},
    )
    assert r.status == 200


# -- sessions ---------------------------------------------------------------------------------


async def test_a_cookie_replayed_after_logout_is_refused(
    make_memory: Any, serve: Any, connect: Any
) -> None:
    server = await serve(await make_memory(embeddings="none"))
    browser = await connect(server)
    assert await login(browser) == 303
    cookie = session_cookie(browser)
    assert await replay(server, connect, cookie) == 200

    r = await browser.post(
        "/logout", data={"csrf_token": await form_token(browser, "/")}, allow_redirects=False
    )
    assert r.status == 303
    assert await replay(server, connect, cookie) == 401


async def test_log_out_everywhere_revokes_every_session(
    make_memory: Any, serve: Any, connect: Any
) -> None:
    server = await serve(await make_memory(embeddings="none"))
    laptop, phone = await connect(server, "127.0.0.1"), await connect(server, "127.0.0.2")
    assert await login(laptop) == 303 and await login(phone) == 303
    cookies = [session_cookie(laptop), session_cookie(phone)]
    assert "Log out everywhere" in await (await laptop.get("/")).text()

    r = await laptop.post(
        "/logout/everywhere",
        data={"csrf_token": await form_token(laptop, "/")},
        allow_redirects=False,
    )
    assert r.status == 303
    assert [await replay(server, connect, c) for c in cookies] == [401, 401]
    # A script with the token can do the same (say, after a cookie leaked).
    assert await login(phone) == 303
    r = await laptop.post("/logout/everywhere", headers={"X-Guildlore-Token": TOKEN})
    assert r.status == 200
    assert (await r.json())["revoked"] == 1
    assert await replay(server, connect, session_cookie(phone)) == 401


async def test_sessions_and_revocations_survive_a_restart(
    make_memory: Any, serve: Any, connect: Any, tmp_path: Path
) -> None:
    data = tmp_path / "restart"
    before = await make_memory(embeddings="none", data_dir=data)
    first = await serve(before)
    kept, ended = await connect(first), await connect(first, "127.0.0.2")
    assert await login(kept) == 303 and await login(ended) == 303
    kept_cookie, ended_cookie = session_cookie(kept), session_cookie(ended)
    r = await ended.post(
        "/logout", data={"csrf_token": await form_token(ended, "/")}, allow_redirects=False
    )
    assert r.status == 303
    await first.close()
    await before.close()

    after = await make_memory(embeddings="none", data_dir=data)
    second = await serve(after)
    assert await replay(second, connect, kept_cookie) == 200
    assert await replay(second, connect, ended_cookie) == 401
    # Another secret (or a new random one) ends every earlier session.
    third = await serve(after, secret=b"x" * 32)
    assert await replay(third, connect, kept_cookie) == 401


def test_client_key_groups_ipv6_by_64_and_trusts_only_the_last_forwarded_entry() -> None:
    from dashboard.rates import client_key

    assert client_key("2001:db8:1:2::5", None, False) == client_key(
        "2001:db8:1:2:ff::9", None, False
    )
    assert client_key("2001:db8:1:2::5", None, False) != client_key("2001:db8:1:3::5", None, False)
    assert client_key("::ffff:192.0.2.4", None, False) == "192.0.2.4"
    assert client_key("192.0.2.4", "203.0.113.1", False) == "192.0.2.4"
    assert client_key("192.0.2.4", "10.0.0.1, 203.0.113.1", True) == "203.0.113.1"
    assert client_key(None, None, False) == "unknown"
