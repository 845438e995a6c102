"""Budgets, pins and the admin purge through the real aiohttp app: the JSON
API's shapes (``{"ok": true, "deletedCount": N}``), CSRF on each change, the
guild page's budget section and the fact page's pin button."""

from __future__ import annotations

from typing import Any

from tests.dashboard.http import (
    Client,
    assert_error,
    csrf_header,
    form_token,
)
from tests.dashboard_data import Seeded
from tests.helpers import ALICE, BOB, GUILD


async def test_pin_and_unpin_a_fact_by_api_and_see_it_in_the_budgets(
    client: Client, seeded: Seeded
) -> None:
    fid = await seeded.fact_id("ramen")
    g = {"guildId": GUILD}
    h = await csrf_header(client)
    r = await client.post(f"/api/memory/facts/{fid}/pin", params=g)
    assert r.status == 403  # no CSRF token
    r = await client.post(f"/api/memory/facts/{fid}/pin", params=g, headers=h)
    assert await r.json() == {"ok": True, "guildId": GUILD, "factId": fid, "pinned": True}
    body = await (await client.get(f"/api/guilds/{GUILD}/budgets")).json()
    assert body["budgets"]["pinned"] == 1
    assert [f["id"] for f in body["pinned_facts"]] == [fid]
    guild_scope = body["budgets"]["scopes"][0]
    assert guild_scope["kind"] == "guild" and guild_scope["budget"] == 20_000
    history = await (await client.get(f"/api/memory/facts/{fid}/history", params=g)).json()
    assert history["history"][-1]["event"] == "pin"
    r = await client.delete(f"/api/memory/facts/{fid}/pin", params=g, headers=h)
    assert (await r.json())["pinned"] is False
    r = await client.post("/api/memory/facts/999999/pin", params=g, headers=h)
    assert r.status == 404
    assert_error(await r.json(), 404)


async def test_the_fact_page_pins_and_the_guild_page_shows_budgets(
    client: Client, seeded: Seeded
) -> None:
    fid = await seeded.fact_id("ramen")
    page = f"/facts/{fid}?guildId={GUILD}"
    token = await form_token(client, page)
    r = await client.post(
        f"/facts/{fid}",
        data={"csrf_token": token, "guildId": GUILD, "action": "pin"},
        allow_redirects=False,
    )
    assert r.status in (302, 303)
    html = await (await client.get(page)).text()
    assert 'id="pin">Unpin' in html
    assert await seeded.mem.upkeep.pinned_ids(GUILD) == {fid}
    guild_html = await (await client.get(f"/guilds/{GUILD}")).text()
    assert 'id="budgets"' in guild_html and "1 pinned" in guild_html


async def test_admin_purge_of_a_member_then_the_guild_answers_deleted_count(
    client: Client, seeded: Seeded
) -> None:
    mem = seeded.mem
    alice = [f for f in await mem.facts.find(GUILD, active=None, limit=500) if f.subject == ALICE]
    total = len(await mem.facts.find(GUILD, active=None, limit=500))
    assert alice and total > len(alice)
    h = await csrf_header(client)
    url = f"/api/guilds/{GUILD}/members/{ALICE}/facts"
    r = await client.delete(url)
    assert r.status == 403
    r = await client.delete(url, headers=h)
    assert await r.json() == {"ok": True, "deletedCount": len(alice)}
    left = await mem.facts.find(GUILD, active=None, limit=500)
    assert ALICE not in {f.subject for f in left} and BOB in {f.subject for f in left}
    r = await client.delete(f"/api/guilds/{GUILD}/facts", headers=h)
    assert await r.json() == {"ok": True, "deletedCount": total - len(alice)}
    r = await client.delete(f"/api/guilds/{GUILD}/facts", headers=h)
    assert await r.json() == {"ok": True, "deletedCount": 0}
    body = await (await client.get(f"/api/guilds/{GUILD}/budgets")).json()
    assert body["budgets"]["purged"] == total


async def test_purge_needs_the_token_when_one_is_set(make_client: Any) -> None:
    locked = await make_client(token="correct-horse-battery-staple-42")
    r = await locked.delete(f"/api/guilds/{GUILD}/facts")
    assert r.status == 401


async def test_budget_settings_are_shown_and_changed_like_any_setting(client: Client) -> None:
    h = await csrf_header(client)
    g = {"guildId": GUILD}
    r = await client.patch("/api/settings", params=g, json={"budget_member_facts": 5}, headers=h)
    assert r.status == 200
    items = {s["key"]: s for s in (await r.json())["settings"]}
    assert (items["budget_member_facts"]["stored"], items["budget_member_facts"]["effective"]) == (
        "5",
        "5",
    )
    assert items["purge_after_days"]["effective"] is None  # the default
    r = await client.patch("/api/settings", params=g, json={"budget_lore": 0}, headers=h)
    assert r.status == 400
    page = await client.get("/settings", params=g)
    assert page.status == 200 and "budget_member_facts" in await page.text()
    body = await (await client.get(f"/api/guilds/{GUILD}/budgets")).json()
    member = [s for s in body["budgets"]["scopes"] if s["kind"] == "member"]
    assert member and all(s["budget"] == 5 for s in member)
