"""The dashboard's review queue in headless Chromium (Debian's
/usr/bin/chromium through Playwright), served by ``start_dashboard`` from a
guild whose memories wait for review (``tests/review_data.py``): the queue
reads well wide and narrow, and a moderator approves, edits and merges with
the page's own forms. Screenshots go to tests/artifacts/review-*.png."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from dashboard.config import DashboardConfig
from dashboard.server import bound_port, start_dashboard
from tests.dashboard.test_browser import Watched, browser, web  # noqa: F401 (fixtures)
from tests.helpers import ALICE, BOB, GUILD
from tests.review_data import ReviewSeed, lore_facts, seed_review

pytestmark = [pytest.mark.browser]


@dataclass
class ReviewSite:
    seeded: ReviewSeed
    base: str


@pytest.fixture
async def site(make_memory: Any) -> AsyncIterator[ReviewSite]:
    seeded = await seed_review(make_memory)
    runner = await start_dashboard(seeded.mem, DashboardConfig(port=0))
    try:
        yield ReviewSite(seeded, f"http://127.0.0.1:{bound_port(runner)}")
    finally:
        await runner.cleanup()


async def _no_overflow(page: Any, width: int) -> None:
    scroll = await page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"{page.url} is {scroll}px wide"


async def test_the_review_queue_in_a_browser(site: ReviewSite, web: Watched) -> None:  # noqa: F811
    page, s = web.page, site.seeded
    await page.goto(site.base + "/")
    await page.get_by_role("link", name="Review", exact=True).click()
    assert (await page.locator("h1").inner_text()).strip() == "Review queue"
    items = page.locator("section.review-item")
    assert await items.count() == 4
    porto = page.locator(f"#item-{s.porto}")
    sides = porto.locator(".side-by-side .side")
    assert await sides.count() == 2
    now_box, proposed_box = await sides.nth(0).bounding_box(), await sides.nth(1).bounding_box()
    assert now_box is not None and proposed_box is not None
    # Side by side: the same row, the current fact on the left.
    assert abs(now_box["y"] - proposed_box["y"]) < 2 and now_box["x"] < proposed_box["x"]
    assert "Alice lives in Lisbon." in await sides.nth(0).inner_text()
    assert "Alice lives in Porto." in await sides.nth(1).inner_text()
    await _no_overflow(page, 1280)
    await web.shot("review-01-queue")

    # Approve Bob's low-confidence fact with a reason.
    chess = page.locator(f"#item-{s.chess}")
    await chess.get_by_label(f"Reason for approving #{s.chess}").fill("he plays every week")
    await page.locator(f"#approve-{s.chess}").click()
    await page.get_by_text("Approved: the memory is stored.").wait_for()
    assert await items.count() == 3
    assert [f.fact for f in await s.mem.facts.find(GUILD, subject=BOB)] == ["Bob loves chess."]

    # Edit the lore line before it is stored.
    lore = page.locator(f"#item-{s.lore}")
    await lore.get_by_text("Edit", exact=True).click()
    await lore.get_by_label("Text to remember").fill(
        "Memory line: the harbour festival is on the last weekend of June."
    )
    await web.shot("review-02-editing")
    await page.locator(f"#edit-{s.lore}").click()
    await page.get_by_text("Stored with your text.").wait_for()
    assert await lore_facts(s.mem) == [
        "Memory line: the harbour festival is on the last weekend of June."
    ]

    # Merge the contradiction into the pinned fact, with a combined text.
    await porto.get_by_text(f"Merge into #{s.pinned_id}").click()
    await porto.get_by_label("The merged fact reads").fill(
        "Alice lives in Lisbon and works in Porto."
    )
    await page.locator(f"#merge-{s.porto}").click()
    await page.get_by_text("Merged into the existing fact.").wait_for()
    facts = [f.fact for f in await s.mem.facts.find(GUILD, subject=ALICE)]
    assert "Alice lives in Lisbon and works in Porto." in facts
    assert await items.count() == 1  # the correction still waits
    await web.shot("review-03-after-decisions")

    # Narrow: the two sides stack, nothing overflows.
    await page.set_viewport_size({"width": 420, "height": 860})
    correction = page.locator(f"#item-{s.correction}")
    sides = correction.locator(".side-by-side .side")
    first, second = await sides.nth(0).bounding_box(), await sides.nth(1).bounding_box()
    assert first is not None and second is not None and second["y"] > first["y"]
    await _no_overflow(page, 420)
    await web.shot("review-04-narrow")
    assert web.console_errors == [], web.console_errors
