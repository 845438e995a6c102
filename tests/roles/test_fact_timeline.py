"""The dashboard's view of memory over time, through the real aiohttp app and
once in headless Chromium: a fact's timeline (observations with links to
their messages, decisions, supersedes linking the other fact), the search
page's "as of" date, the decision counters on the overview."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.server import bound_port, runner_options, start_dashboard
from memory.engine import Memory
from tests.helpers import CHANNEL, GUILD, msg
from tests.ingest.test_decision import ingest

CHROMIUM = Path("/usr/bin/chromium")
QUERY = "where does Alice live"


@dataclass
class Moved:
    mem: Memory
    ny: int
    la: int


async def moved(make_memory: Any) -> Moved:
    mem = await make_memory()
    await ingest(
        mem,
        msg("I live in New York", id="940000000000000001", created_at="2022-05-01T10:00:00.000Z"),
        msg("I live in New York", id="940000000000000002", created_at="2023-01-10T10:00:00.000Z"),
        msg("I moved to Los Angeles", id="940000000000000003", created_at="2024-03-01T10:00:00Z"),
    )
    facts = {f.fact: f.id for f in await mem.facts.find(GUILD)}
    return Moved(mem, facts["Alice lives in New York."], facts["Alice moved to Los Angeles."])


async def client_for(mem: Memory, aiohttp_client: Any) -> Any:
    config = DashboardConfig()
    server = TestServer(create_app(mem, config))
    await server.start_server(**runner_options(config))
    return await aiohttp_client(server)


async def test_a_fact_page_shows_its_timeline(make_memory: Any, aiohttp_client: Any) -> None:
    m = await moved(make_memory)
    client = await client_for(m.mem, aiohttp_client)
    r = await client.get(f"/facts/{m.ny}", params={"guildId": GUILD, "format": "json"})
    assert r.status == 200
    timeline = (await r.json())["timeline"]
    assert [e["kind"] for e in timeline] == ["observed", "observed", "add", "update", "supersede"]
    first, second = timeline[0], timeline[1]
    assert (first["at"], second["at"]) == ("2022-05-01T10:00:00.000Z", "2023-01-10T10:00:00.000Z")
    assert first["url"] == f"https://discord.com/channels/{GUILD}/{CHANNEL}/940000000000000001"
    assert first["author_name"] == "Alice" and first["content"] == "I live in New York"
    supersede = timeline[-1]
    assert supersede["direction"] == "superseded by" and supersede["linked_fact_id"] == m.la
    assert supersede["linked_fact_text"] == "Alice moved to Los Angeles."
    assert supersede["reason"].startswith("new residence")

    html = await (await client.get(f"/facts/{m.ny}", params={"guildId": GUILD})).text()
    assert 'id="timeline"' in html and "superseded by" in html
    assert f'href="/facts/{m.la}?guildId={GUILD}"' in html
    assert f"https://discord.com/channels/{GUILD}/{CHANNEL}/940000000000000002" in html
    # The other side links back.
    other = await client.get(f"/facts/{m.la}", params={"guildId": GUILD, "format": "json"})
    (back,) = [e for e in (await other.json())["timeline"] if e["kind"] == "supersede"]
    assert (back["direction"], back["linked_fact_id"]) == ("supersedes", m.ny)


async def test_the_search_page_searches_as_of_a_date(make_memory: Any, aiohttp_client: Any) -> None:
    m = await moved(make_memory)
    client = await client_for(m.mem, aiohttp_client)
    base = {"guildId": GUILD, "q": QUERY, "format": "json"}

    async def facts(**extra: str) -> set[str]:
        body = await (await client.get("/search", params={**base, **extra})).json()
        return {h["fact"] for h in body["results"] if h["kind"] == "fact"}

    now = await facts()
    assert "Alice moved to Los Angeles." in now and "Alice lives in New York." not in now
    then = await facts(asOf="2023-06-01")
    assert "Alice lives in New York." in then and "Alice moved to Los Angeles." not in then
    # A date means the end of that day: the move on 2024-03-01 counts that day.
    assert "Alice moved to Los Angeles." in await facts(asOf="2024-03-01")
    html = await (
        await client.get("/search", params={"guildId": GUILD, "q": QUERY, "asOf": "2023-06-01"})
    ).text()
    assert 'name="asOf" value="2023-06-01"' in html and "as memory stood on" in html
    r = await client.get("/search", params={**base, "asOf": "yesterday"})
    assert r.status == 400


async def test_the_overview_counts_the_decisions(make_memory: Any, aiohttp_client: Any) -> None:
    m = await moved(make_memory)
    client = await client_for(m.mem, aiohttp_client)
    html = await (await client.get("/")).text()
    assert 'id="decisions"' in html and "1 already known" in html
    metrics = await (await client.get("/metrics")).text()
    assert "guildlore_decision_llm_fallbacks_total 0" in metrics


def chromium() -> str:
    # A missing browser is a broken test machine: fail, do not skip.
    assert CHROMIUM.exists(), "Debian chromium is not installed at /usr/bin/chromium"
    return str(CHROMIUM)


@pytest.fixture
async def served(make_memory: Any) -> AsyncIterator[tuple[Moved, str]]:
    m = await moved(make_memory)
    runner = await start_dashboard(m.mem, DashboardConfig(port=0))
    try:
        yield m, f"http://127.0.0.1:{bound_port(runner)}"
    finally:
        await runner.cleanup()


@pytest.mark.browser
async def test_timeline_and_as_of_in_chromium(served: tuple[Moved, str]) -> None:
    from playwright.async_api import async_playwright

    m, base = served
    errors: list[str] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=chromium(), headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = await browser.new_page()
            page.set_default_timeout(15_000)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            await page.goto(f"{base}/facts/{m.ny}?guildId={GUILD}")
            items = page.locator("#timeline li")
            assert await items.count() == 5
            assert await page.locator("#timeline li[data-kind=observed]").count() == 2
            assert "superseded" in (await page.locator("#validity").inner_text())
            await page.locator("#timeline li[data-kind=supersede] a").click()
            await page.wait_for_url(f"**/facts/{m.la}?guildId={GUILD}")
            assert "Alice moved to Los Angeles." in await page.locator("h1").inner_text()

            await page.goto(f"{base}/search?guildId={GUILD}&q={QUERY.replace(' ', '+')}")
            await page.fill("input[name=asOf]", "2023-06-01")
            await page.click("form.search-form button[type=submit]")
            await page.wait_for_url("**asOf=2023-06-01**")
            hits = await page.locator("ol.hits").inner_text()
            assert "Alice lives in New York." in hits and "Los Angeles" not in hits
        finally:
            await browser.close()
    assert not errors
