"""Settings and the HTML pages (and the same context as JSON) through the real aiohttp app."""

from __future__ import annotations

from tests.dashboard.http import (
    Client,
    assert_error,
    csrf_header,
    form_token,
)
from tests.dashboard_data import SCRIPT, XSS_FACT, Seeded
from tests.helpers import ALICE, BOB, CHANNEL, GUILD, OTHER_GUILD

# -- settings ---------------------------------------------------------------------------------


async def test_settings_api_applies_and_logs(client: Client, seeded: Seeded) -> None:
    body = await (await client.get("/api/settings", params={"guildId": GUILD})).json()
    keys = {s["key"] for s in body["settings"]}
    assert {"memory_enabled", "reply_mode", "excluded_channels"} <= keys
    h = await csrf_header(client)
    r = await client.patch(
        "/api/settings",
        params={"guildId": GUILD},
        json={"reply_mode": "off", "excluded_channels": [CHANNEL], "memory_enabled": False},
        headers=h,
    )
    assert r.status == 200, await r.text()
    gs = await seeded.mem.guilds.settings(GUILD)
    assert gs.reply_mode == "off" and CHANNEL in gs.excluded_channels and not gs.memory_enabled
    changes = (await r.json())["changes"]
    assert len(changes) == 3 and all(c["kind"] == "settings_change" for c in changes)
    for bad in ({"reply_mode": "shout"}, {"nope": 1}, {"excluded_channels": ["general"]}, {}):
        r = await client.patch("/api/settings", params={"guildId": GUILD}, json=bad, headers=h)
        assert r.status == 400, bad
        assert_error(await r.json(), 400)
    assert (await seeded.mem.guilds.settings(GUILD)).reply_mode == "off"


async def test_settings_form_with_csrf(client: Client, seeded: Seeded) -> None:
    token = await form_token(client, f"/settings?guildId={GUILD}")
    r = await client.post(
        "/settings",
        data={"csrf_token": token, "guildId": GUILD, "key": "ingest_bots", "value": "false"},
        allow_redirects=False,
    )
    assert r.status == 303 and r.headers["Location"].startswith("/settings?")
    assert (await seeded.mem.guilds.settings(GUILD)).ingest_bots is False
    r = await client.post(
        "/settings",
        data={"csrf_token": token, "guildId": GUILD, "key": "reply_mode", "value": "loud"},
    )
    assert r.status == 400 and "reply_mode must be one of" in await r.text()


# -- pages (HTML and the same context as JSON) ---------------------------------------------------


async def test_every_page_renders(client: Client, seeded: Seeded) -> None:
    fid = await seeded.fact_id("nurse")
    day = (await seeded.mem.journal_days())[0].day
    pages = [
        "/",
        f"/guilds/{GUILD}",
        f"/guilds/{GUILD}/members/{ALICE}",
        f"/guilds/{GUILD}/members/__lore__",
        "/search",
        f"/search?guildId={GUILD}&q=nurse",
        "/facts",
        f"/facts?guildId={GUILD}&active=all",
        f"/facts/{fid}?guildId={GUILD}",
        "/snapshot",
        "/journal",
        f"/journal/{day}",
        f"/journal/{day}?guildId={GUILD}",
        "/traces",
        f"/traces?guildId={GUILD}&messageId={seeded.reply_to}",
        "/activity",
        "/activity?kind=memory_fact",
        "/settings",
        f"/settings?guildId={OTHER_GUILD}",
    ]
    for path in pages:
        r = await client.get(path)
        assert r.status == 200, path
        assert r.content_type == "text/html"
        html = await r.text()
        assert "<nav" in html and "</html>" in html


async def test_traces_pages_say_when_there_are_none(client: Client, seeded: Seeded) -> None:
    html = await (
        await client.get("/traces", params={"guildId": GUILD, "messageId": "123456789012345678"})
    ).text()
    assert "No traces for this message." in html
    html = await (
        await client.get("/traces", params={"guildId": GUILD, "messageId": seeded.reply_to})
    ).text()
    assert "No traces for this message." not in html and "Retrieved (" in html
    html = await (await client.get("/traces", params={"guildId": OTHER_GUILD})).text()
    assert "No traces yet" in html


async def test_pages_answer_json_with_their_context(client: Client) -> None:
    body = await (await client.get("/", params={"format": "json"})).json()
    assert body["ok"] and {g["guild_id"] for g in body["guilds"]} == {GUILD, OTHER_GUILD}
    assert body["guilds"][0]["top_members"]
    member = await (
        await client.get(f"/guilds/{GUILD}/members/{ALICE}", headers={"Accept": "application/json"})
    ).json()
    assert member["member"]["name"] == "Alice"
    assert any("nurse" in f["fact"] for f in member["facts"])


async def test_script_text_is_escaped_everywhere(client: Client, seeded: Seeded) -> None:
    fid = await seeded.fact_id(SCRIPT)
    for path in (
        f"/guilds/{GUILD}/members/{BOB}",
        f"/facts?guildId={GUILD}",
        f"/facts/{fid}?guildId={GUILD}",
        f"/search?guildId={GUILD}&q=favourite+snippet",
        "/snapshot",
        f"/journal/{(await seeded.mem.journal_days())[0].day}",
    ):
        html = await (await client.get(path)).text()
        assert "<script" not in html.lower(), path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, path
    body = await (await client.get(f"/api/memory/facts/{fid}", params={"guildId": GUILD})).json()
    assert body["fact"]["fact"] == XSS_FACT  # stored verbatim, escaped only when rendered


async def test_fact_form_actions(client: Client, seeded: Seeded) -> None:
    fid = await seeded.fact_id("cello")
    page = f"/facts/{fid}?guildId={GUILD}"
    token = await form_token(client, page)
    r = await client.post(
        f"/facts/{fid}",
        data={"csrf_token": token, "guildId": GUILD, "action": "archive"},
        allow_redirects=False,
    )
    assert r.status == 303
    assert not (await seeded.mem.facts.get(GUILD, fid)).is_active
    r = await client.post(
        f"/facts/{fid}",
        data={
            "csrf_token": token,
            "guildId": GUILD,
            "action": "edit",
            "text": "no",
            "type": "other",
        },
    )
    assert r.status == 400 and "4 to 190" in await r.text()
    r = await client.post(
        f"/facts/{fid}", data={"csrf_token": token, "guildId": GUILD, "action": "delete"}
    )
    assert r.status == 400  # unconfirmed
    r = await client.post(
        f"/facts/{fid}",
        data={"csrf_token": token, "guildId": GUILD, "action": "delete", "confirm": "yes"},
        allow_redirects=False,
    )
    assert r.status == 303 and await seeded.mem.facts.get(GUILD, fid) is None


PAGE_ERRORS = (
    ("/journal/2026-13-45", 400),
    ("/journal/1999-01-01", 404),
    ("/journal/..%2F..%2Fetc%2Fpasswd", 404),
    (f"/guilds/{GUILD}/members/999999999999", 404),
    ("/guilds/424242/members/1", 404),
    (f"/facts/1?guildId={OTHER_GUILD}x", 400),
    ("/facts/1", 400),
    (f"/facts/999999?guildId={GUILD}", 404),
    ("/search?guildId=abc", 400),
    ("/search?limit=lots", 400),
    ("/activity?kind=DROP%20TABLE", 400),
    ("/facts?before=0", 400),
    ("/static/../app.py", 404),
)


async def test_page_errors_html_and_json(client: Client) -> None:
    for path, status in PAGE_ERRORS:
        r = await client.get(path)
        assert r.status == status, path
        assert r.content_type == "text/html"
        assert "Traceback" not in await r.text()
        r = await client.get(path, headers={"Accept": "application/json"})
        assert r.status == status, path
        assert_error(await r.json(), status)
