"""The one error shape and the dashboard's security: auth when a token is set, CSRF on every state-changing request, security headers, loopback-only hosts."""

from __future__ import annotations

import re
from typing import Any

import pytest
from yarl import URL

from dashboard.app import DashboardConfig
from dashboard.server import start_dashboard
from memory.errors import ConfigError
from tests.dashboard.http import (
    TOKEN,
    Client,
    MakeClient,
    assert_error,
    csrf_header,
    form_token,
)
from tests.dashboard_data import Seeded
from tests.helpers import ALICE, BOB, GUILD

# -- the error shape ------------------------------------------------------------------------------


async def test_error_shape_404_405_413(client: Client) -> None:
    r = await client.get("/api/nothing-here")
    assert r.status == 404
    assert_error(await r.json(), 404)
    r = await client.post("/api/memory", headers=await csrf_header(client))
    assert r.status == 405 and "GET" in r.headers["Allow"]
    assert_error(await r.json(), 405)
    r = await client.patch(
        "/api/settings",
        params={"guildId": GUILD},
        data=b"x" * 200_000,
        headers={**await csrf_header(client), "Content-Type": "application/json"},
    )
    assert r.status == 413
    assert_error(await r.json(), 413)


async def test_unexpected_exception_is_500_without_details(
    client: Client,
    seeded: Seeded,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def boom() -> Any:
        raise RuntimeError("database exploded at /secret/path")

    monkeypatch.setattr(seeded.mem.guilds, "overview", boom)
    r = await client.get("/api/guilds")
    assert r.status == 500
    body = await r.json()
    assert_error(body, 500)
    assert "secret" not in body["error"] and "exploded" not in body["error"]
    assert "database exploded" in caplog.text  # logged for the operator
    r = await client.get("/")
    assert r.status == 500 and "exploded" not in await r.text()


# -- security ---------------------------------------------------------------------------------------


async def test_security_headers_everywhere(client: Client) -> None:
    r = await client.get("/")
    cookie = r.headers["Set-Cookie"]
    assert "guildlore_csrf=" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    for path in ("/", "/api/memory", "/api/nope", "/static/style.css", "/metrics"):
        r = await client.get(path)
        h = r.headers
        assert "script-src 'none'" in h["Content-Security-Policy"], path
        assert "frame-ancestors 'none'" in h["Content-Security-Policy"]
        assert h["X-Frame-Options"] == "DENY"
        assert h["X-Content-Type-Options"] == "nosniff"
        assert h["Referrer-Policy"] == "same-origin"


async def test_open_dashboard_answers_only_loopback_hosts(client: Client) -> None:
    r = await client.get("/api/memory", headers={"Host": "evil.example:8765"})
    assert r.status == 403
    assert_error(await r.json(), 403)
    r = await client.get("/api/memory", headers={"Host": "localhost:8765"})
    assert r.status == 200


async def test_cross_site_posts_refused_even_with_token(client: Client) -> None:
    h = await csrf_header(client)
    r = await client.post("/api/memory/refresh", headers={**h, "Origin": "https://evil.example"})
    assert r.status == 403
    r = await client.post("/api/memory/refresh", headers={**h, "Sec-Fetch-Site": "cross-site"})
    assert r.status == 403
    r = await client.post("/api/memory/refresh", headers={**h, "Origin": "null"})
    assert r.status == 403
    r = await client.post(
        "/api/memory/refresh", headers={**h, "Origin": f"http://{client.host}:{client.port}"}
    )
    assert r.status == 200


async def test_token_required_when_configured(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN)
    for path in ("/api/memory", "/api/guilds", "/metrics", "/api/memory/health"):
        r = await client.get(path)
        assert r.status == 401, path
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
        assert_error(await r.json(), 401)
    r = await client.get("/", allow_redirects=False)
    assert r.status == 303 and URL(r.headers["Location"]).path == "/login"
    assert URL(r.headers["Location"]).query["next"] == "/"
    r = await client.get(f"/facts?guildId={GUILD}&active=all", allow_redirects=False)
    assert URL(r.headers["Location"]).query["next"] == f"/facts?guildId={GUILD}&active=all"
    r = await client.post("/api/memory/refresh")
    assert r.status == 401
    for headers in (
        {"Authorization": "Bearer nope"},
        {"X-Guildlore-Token": "nope"},
        {"Authorization": f"Basic {TOKEN}"},
    ):
        r = await client.get("/api/memory", headers=headers)
        assert r.status == 401
    for headers in ({"Authorization": f"Bearer {TOKEN}"}, {"X-Guildlore-Token": TOKEN}):
        r = await client.get("/api/memory", headers=headers)
        assert r.status == 200
        # Header-token requests cannot come from another site: no CSRF token needed.
        r = await client.post("/api/memory/refresh", headers=headers)
        assert r.status == 200
    r = await client.get("/static/style.css")
    assert r.status == 200  # the login page needs its stylesheet


async def test_login_form_sets_strict_cookie_and_csrf_still_applies(
    make_client: MakeClient,
) -> None:
    client = await make_client(token=TOKEN)
    token = await form_token(client, "/login")
    r = await client.post("/login", data={"csrf_token": token, "token": "wrong", "next": "/"})
    assert r.status == 401 and "wrong token" in await r.text()
    r = await client.post("/login", data={"token": TOKEN, "next": "/"})
    assert r.status == 403  # the login form is CSRF-protected too
    r = await client.post(
        "/login",
        data={"csrf_token": token, "token": TOKEN, "next": "//evil.example/x"},
        allow_redirects=False,
    )
    assert r.status == 303 and r.headers["Location"] == "/"
    cookie = r.headers["Set-Cookie"]
    assert "guildlore_session=" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    r = await client.get("/")
    assert r.status == 200 and "Log out" in await r.text()
    r = await client.get("/api/memory")
    assert r.status == 200
    r = await client.post("/api/memory/refresh")
    assert r.status == 403  # cookie sessions need the CSRF token
    r = await client.post("/api/memory/refresh", headers=await csrf_header(client))
    assert r.status == 200
    token = await form_token(client, "/")
    r = await client.post("/logout", data={"csrf_token": token}, allow_redirects=False)
    assert r.status == 303
    r = await client.get("/api/memory")
    assert r.status == 401


async def test_forged_or_stale_session_cookie_is_refused(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN, session_max_age_s=60)
    for value in (
        "x",
        "a.b.c",
        "AAAAAAAAAAAAAAAAAAAAAAAA.1.sig",
        "AAAAAAAAAAAAAAAAAAAAAAAA.99999999999.sig",
    ):
        client.session.cookie_jar.update_cookies({"guildlore_session": value})
        r = await client.get("/api/memory")
        assert r.status == 401, value


async def test_login_throttled_after_repeated_failures(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN, login_failures_per_minute=3)
    token = await form_token(client, "/login")
    for _ in range(3):
        r = await client.post("/login", data={"csrf_token": token, "token": "guess"})
        assert r.status == 401
    r = await client.post("/login", data={"csrf_token": token, "token": TOKEN})
    assert r.status == 429


def test_config_refuses_weak_tokens_and_open_public_binds() -> None:
    with pytest.raises(ConfigError):
        DashboardConfig(token="short")
    assert DashboardConfig(token="   ").token is None
    for host in ("0.0.0.0", "::", "192.168.1.5", "example.org", ""):
        with pytest.raises(ConfigError, match="DASHBOARD_TOKEN"):
            DashboardConfig(host=host).check_bind()
        DashboardConfig(host=host, token=TOKEN).check_bind()
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2", "[::1]"):
        DashboardConfig(host=host).check_bind()
    assert "correct-horse" not in repr(DashboardConfig(token=TOKEN))


async def test_start_dashboard_on_the_running_loop(seeded: Seeded) -> None:
    from aiohttp import ClientSession

    from dashboard.server import bound_port

    with pytest.raises(ConfigError):
        await start_dashboard(seeded.mem, DashboardConfig(host="0.0.0.0", port=0))
    runner = await start_dashboard(seeded.mem, DashboardConfig(port=0))
    try:
        port = bound_port(runner)
        async with ClientSession() as s, s.get(f"http://127.0.0.1:{port}/api/memory/health") as r:
            assert r.status == 200 and (await r.json())["ok"] is True
        # The request-line limit lets an over-long query reach the app's error shape.
        async with (
            ClientSession() as s,
            s.get(
                f"http://127.0.0.1:{port}/api/memory/search",
                params={"q": "q" * 100_000, "guildId": GUILD},
            ) as r,
        ):
            assert r.status == 400 and (await r.json())["status"] == 400
    finally:
        await runner.cleanup()


async def test_member_page_shows_what_the_bot_knows(client: Client) -> None:
    html = await (await client.get(f"/guilds/{GUILD}/members/{ALICE}")).text()
    assert "What the bot knows about Alice" in html
    assert "Alice works as a nurse in Berlin." in html
    overview = await (await client.get("/")).text()
    assert f'href="/guilds/{GUILD}/members/{ALICE}"' in overview  # one click from the overview
    assert BOB in overview


async def test_failed_and_waiting_messages_show_on_overview_health_and_metrics(
    client: Client, seeded: Seeded
) -> None:
    from memory.clock import iso, system_clock
    from memory.store import messages as store_messages

    mem = seeded.mem
    ids = await mem.db.read(lambda con: [r[0] for r in con.execute("SELECT id FROM messages")])
    now = iso(system_clock())

    def fail(con: Any) -> None:
        store_messages.record_failure(
            con, ids[0], "failed", "extraction failed: HTTP 500", now, None
        )
        later = "2100-01-01T00:00:00.000Z"  # not due while the test runs
        store_messages.record_failure(
            con, ids[1], "retry", "extraction failed: HTTP 429", now, later
        )

    await mem.db.write(fail)
    body = await (await client.get("/api/memory/health")).json()
    assert body["messages"]["failed"] == 1 and body["messages"]["waiting_retry"] == 1
    assert body["healthy"] is False
    assert any("guildlore retry" in w for w in body["warnings"])
    overview = await (await client.get("/")).text()
    assert "messages waiting for a retry / failed" in overview and "guildlore retry" in overview
    metrics = await (await client.get("/metrics")).text()
    assert re.search(r'^guildlore_messages_by_state\{state="failed"\} 1$', metrics, re.M)
    assert re.search(r'^guildlore_messages_by_state\{state="retry"\} 1$', metrics, re.M)
    assert "# TYPE guildlore_ingest_failed_total counter" in metrics
