"""The operator's pages in headless Chromium (Debian's /usr/bin/chromium):
the charts draw under the dashboard's CSP with no console error, a settings
group saves from the browser, and at 390 px the request log and a journal day
keep every column on the screen (nothing scrolls sideways)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.dashboard.test_browser import Site, Watched, _serve, browser, web
from tests.helpers import GUILD

pytestmark = [pytest.mark.browser]
__all__ = ["browser", "web"]  # the fixtures this module uses from test_browser


@pytest.fixture
async def site(make_memory: Any) -> AsyncIterator[Site]:
    async for s in _serve(make_memory):
        await s.seeded.mem.search(GUILD, "where does Alice work", consumer="api")
        await s.seeded.mem.usage.flush()
        yield s


async def test_the_charts_draw_and_a_settings_group_saves(site: Site, web: Watched) -> None:
    page = web.page
    await page.goto(site.base + "/")
    charts = page.locator("svg.chart")
    assert await charts.count() == 8
    box = await charts.first.bounding_box()
    assert box is not None and box["width"] > 250 and box["height"] > 100
    # The messages chart has a bar for today, drawn in the stylesheet's colour.
    bar = page.locator("#chart-messages svg rect.tone-1").first
    assert await bar.count() == 1
    fill = await bar.evaluate("e => getComputedStyle(e).fill")
    assert fill == "rgb(48, 86, 211)"
    await web.shot("30-overview-charts")
    await page.goto(site.base + f"/guilds/{GUILD}?days=90")
    assert await page.locator("svg.chart").count() == 8
    await page.goto(site.base + f"/settings?guildId={GUILD}")
    group = page.locator("#group-budgets")
    assert "In force: 80 facts" in await group.inner_text()
    await page.locator("#f-budget_member_facts").fill("12")
    await group.get_by_role("button", name="Save budgets and expiry").click()
    await page.get_by_text("Setting saved.").wait_for()
    assert "In force: 12 facts" in await page.locator("#group-budgets").inner_text()
    assert (await site.seeded.mem.guilds.settings(GUILD)).budget_member_facts == 12
    assert web.console_errors == [], web.console_errors


async def test_at_390_px_nothing_scrolls_sideways(site: Site, web: Watched) -> None:
    page = web.page
    await page.set_viewport_size({"width": 390, "height": 844})
    day = (await site.seeded.mem.journal_days())[0].day
    for path in ("/requests", f"/journal/{day}", f"/guilds/{GUILD}", "/"):
        await page.goto(site.base + path)
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{path} is {width}px wide"
    await page.goto(site.base + f"/journal/{day}")
    texts = page.locator(".journal-text")
    assert await texts.count() >= 5
    for i in range(await texts.count()):
        box = await texts.nth(i).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    await web.shot("31-journal-day-390")
    await page.goto(site.base + "/requests")
    detail = page.locator("td.detail").first
    box = await detail.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 390
    await web.shot("32-request-log-390")
    assert web.console_errors == [], web.console_errors
