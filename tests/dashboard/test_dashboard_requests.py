"""Hostile request bodies and malformed HTTP against the real dashboard server.

Bodies go through the real app (``aiohttp_client``); malformed HTTP is written
byte for byte on a raw socket to the server ``start_dashboard`` starts, since
no HTTP client would send it. What is checked is the answer (a 400, in the
one JSON error shape when the app answers) and the log: one line per bad
request, never a stack trace.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.server import bound_port, runner_options, start_dashboard
from tests.helpers import GUILD

TOKEN = "correct-horse-battery-staple-42"
Client = TestClient[web.Request, web.Application]
MakeClient = Callable[..., Awaitable[Client]]


@pytest.fixture
async def memory(make_memory: Any) -> Any:
    return await make_memory(embeddings="none")


@pytest.fixture
async def make_client(aiohttp_client: Any, memory: Any) -> MakeClient:
    async def factory(**cfg: Any) -> Client:
        config = DashboardConfig(**cfg)
        server = TestServer(create_app(memory, config))
        await server.start_server(**runner_options(config))
        client: Client = await aiohttp_client(server)
        return client

    return factory


def assert_error(body: Any, status: int) -> None:
    assert body == {"ok": False, "error": body["error"], "status": status}
    assert isinstance(body["error"], str) and body["error"]


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


# -- bodies -----------------------------------------------------------------------------------


async def test_deeply_nested_json_body_is_a_400_in_the_error_shape(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client(token=TOKEN, max_body_bytes=1 << 20)
    headers = {"X-Guildlore-Token": TOKEN, "Content-Type": "application/json"}
    for url in ("/api/memory/facts/1", "/api/settings"):
        for depth in (30_000, 100_000):
            r = await client.patch(
                url, params={"guildId": GUILD}, data=nested(depth), headers=headers
            )
            assert r.status == 400, (url, depth)
            body = await r.json()
            assert_error(body, 400)
            assert "nested too deeply" in body["error"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_json_bodies_must_be_utf8(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN)
    cases = (
        ("application/json", b'{"text": "caf\xe9"}', "UTF-8"),
        ("application/json; charset=bogus-charset", b"{}", "UTF-8"),
        ("application/json; charset=latin-1", b'{"active": true}', "UTF-8"),
    )
    for content_type, data, said in cases:
        r = await client.patch(
            "/api/memory/facts/1",
            params={"guildId": GUILD},
            data=data,
            headers={"X-Guildlore-Token": TOKEN, "Content-Type": content_type},
        )
        assert r.status == 400, content_type
        body = await r.json()
        assert_error(body, 400)
        assert said in body["error"], content_type
    # charset=utf-8 is what it is anyway: the body is read (and the fact is not found).
    r = await client.patch(
        "/api/memory/facts/1",
        params={"guildId": GUILD},
        data=b'{"active": false}',
        headers={"X-Guildlore-Token": TOKEN, "Content-Type": "application/json; charset=UTF-8"},
    )
    assert r.status == 404


# -- malformed HTTP ---------------------------------------------------------------------------

AUTHED = f"Host: 127.0.0.1\r\nX-Guildlore-Token: {TOKEN}\r\n".encode()
MALFORMED: tuple[tuple[str, bytes], ...] = (
    ("not HTTP", b"GARBAGE\r\n\r\n"),
    ("unknown version", b"GET / HTTP/9.9\r\n\r\n"),
    ("control byte in the path", b"GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("header without a colon", b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n"),
    ("NUL in a header value", b"GET / HTTP/1.1\r\nHost: x\r\nX-A: \x00\r\n\r\n"),
    (
        "Content-Length not a number",
        b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    ),
    ("negative Content-Length", b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"),
    (
        "two Content-Lengths",
        b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    ),
    (
        "bad chunk size",
        b"POST /login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ),
    ("over-long header", b"GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n"),
    (
        "non-UTF-8 JSON",
        b"PATCH /api/memory/facts/1?guildId=1 HTTP/1.1\r\n" + AUTHED + b"Connection: close\r\n"
        b"Content-Type: application/json\r\nContent-Length: 4\r\n\r\n\xff\xfe\xfa\xfb",
    ),
    (
        "gzip body that is not gzip",
        b"PATCH /api/settings?guildId=1 HTTP/1.1\r\n" + AUTHED + b"Connection: close\r\n"
        b"Content-Type: application/json\r\nContent-Encoding: gzip\r\n"
        b"Content-Length: 10\r\n\r\n0123456789",
    ),
    (
        "deflate form that is not deflate, before login",
        b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Encoding: deflate\r\n"
        b"Content-Length: 10\r\n\r\n0123456789",
    ),
    (
        "unknown charset",
        b"PATCH /api/settings?guildId=1 HTTP/1.1\r\n" + AUTHED + b"Connection: close\r\n"
        b"Content-Type: application/json; charset=bogus\r\nContent-Length: 2\r\n\r\n{}",
    ),
)


async def _exchange(port: int, raw: bytes, *, then: bytes = b"") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        if then:
            # The rest of the body arrives after the handler has started reading it.
            await asyncio.sleep(0.2)
            writer.write(then)
            await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout=30)
    finally:
        writer.close()


async def _hang_up(port: int, raw: bytes, then: bytes) -> None:
    """Send ``raw`` (and ``then`` once the server is reading the body), then disconnect."""
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    await asyncio.sleep(0.2)
    if then:
        writer.write(then)
        await writer.drain()
        await asyncio.sleep(0.2)
    writer.close()
    await writer.wait_closed()


async def _access_logged(caplog: pytest.LogCaptureFixture, first: int) -> None:
    """Wait until the server has finished (and access-logged) the request."""
    for _ in range(600):
        if any(r.name == "aiohttp.access" for r in caplog.records[first:]):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the server never finished the request")


async def test_malformed_requests_are_400_and_one_log_line_without_a_trace(
    memory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    runner = await start_dashboard(memory, DashboardConfig(port=0, token=TOKEN))
    try:
        port = bound_port(runner)
        cases = [*MALFORMED]
        for name, raw in cases:
            first = len(caplog.records)
            answer = await _exchange(port, raw)
            status_line = answer.split(b"\r\n", 1)[0]
            assert status_line.startswith(b"HTTP/1.") and b" 400 " in status_line, (name, answer)
            await _access_logged(caplog, first)  # the server logs after answering
            logged = [
                r
                for r in caplog.records[first:]
                if r.name.startswith(("aiohttp", "dashboard")) and r.name != "aiohttp.access"
            ]
            assert all(r.exc_info is None and not r.exc_text for r in logged), (name, logged)
            assert all("\n" not in r.getMessage() for r in logged), name
            assert all(r.levelno < logging.ERROR for r in logged), name
            assert len([r for r in logged if r.levelno >= logging.INFO]) <= 1, (name, logged)
        # Clients that go away while their body is being read: a form posted
        # to the (public) login page, and a bad chunk arriving after an
        # authenticated handler started reading (aiohttp then waits for a
        # body that never comes, until the client leaves).
        for name, raw, then in (
            (
                "login body cut short",
                b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\n"
                b"Content-Length: 100\r\n\r\ntoken=abc",
                b"",
            ),
            (
                "bad chunk after the handler started",
                b"PATCH /api/settings?guildId=1 HTTP/1.1\r\n" + AUTHED + b"Content-Type: "
                b"application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n",
                b"zz\r\n\r\n",
            ),
        ):
            first = len(caplog.records)
            await _hang_up(port, raw, then)
            await _access_logged(caplog, first)
            late = [r for r in caplog.records[first:] if r.name != "aiohttp.access"]
            assert all(r.exc_info is None and r.levelno < logging.ERROR for r in late), (name, late)
            assert all("\n" not in r.getMessage() for r in late), name
            assert len([r for r in late if r.levelno >= logging.INFO]) == 1, (name, late)
        # The server still answers properly afterwards.
        answer = await _exchange(
            port, b"GET /api/memory/health HTTP/1.1\r\n" + AUTHED + b"Connection: close\r\n\r\n"
        )
        assert b" 200 " in answer.split(b"\r\n", 1)[0]
    finally:
        await runner.cleanup()
    refused = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert refused and all(r.exc_info is None for r in refused)
    # The parser's refusals name the client.
    assert sum("request from 127.0.0.1" in r.getMessage() for r in refused) >= 10
