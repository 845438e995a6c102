"""The dashboard in headless Chromium (Debian's /usr/bin/chromium driven by Playwright).

The real app is served by ``start_dashboard`` on 127.0.0.1:0 from a database
populated through the real ingest path. Playwright's async API runs on the
test's own event loop, next to the server. Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dashboard.config import DashboardConfig
from dashboard.server import bound_port, start_dashboard
from tests.dashboard_data import SCRIPT, Seeded, seed
from tests.helpers import BOB, GUILD

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
TOKEN = "correct-horse-battery-staple-42"

pytestmark = [pytest.mark.browser]


@dataclass
class Site:
    seeded: Seeded
    base: str


@dataclass
class Watched:
    """A page plus everything it complained about."""

    page: Any
    console_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    async def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        await self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def _serve(make_memory: Any, **cfg: Any) -> AsyncIterator[Site]:
    seeded = await seed(make_memory)
    runner = await start_dashboard(seeded.mem, DashboardConfig(port=0, **cfg))
    try:
        yield Site(seeded, f"http://127.0.0.1:{bound_port(runner)}")
    finally:
        await runner.cleanup()


@pytest.fixture
async def site(make_memory: Any) -> AsyncIterator[Site]:
    async for s in _serve(make_memory):
        yield s


@pytest.fixture
async def locked_site(make_memory: Any) -> AsyncIterator[Site]:
    async for s in _serve(make_memory, token=TOKEN):
        yield s


def _chromium() -> str:
    # A missing browser is a broken test machine: fail, do not skip.
    assert CHROMIUM.exists(), (
        "Debian chromium is not installed at /usr/bin/chromium (scripts/setup.sh --tests "
        "installs it)"
    )
    return str(CHROMIUM)


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        b = await p.chromium.launch(
            executable_path=_chromium(),
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                "--disable-sync",
            ],
        )
        try:
            yield b
        finally:
            await b.close()


@pytest.fixture
async def web(browser: Any) -> AsyncIterator[Watched]:
    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    page = await context.new_page()
    page.set_default_timeout(15_000)
    watched = Watched(page)

    def on_console(msg: Any) -> None:
        if msg.type == "error":
            watched.console_errors.append(msg.text)

    async def on_dialog(dialog: Any) -> None:
        watched.dialogs.append(dialog.message)
        await dialog.dismiss()

    page.on("console", on_console)
    page.on("pageerror", lambda exc: watched.console_errors.append(str(exc)))
    page.on("dialog", on_dialog)
    try:
        yield watched
    finally:
        await context.close()


async def test_every_page_reads_well_and_is_captured(site: Site, web: Watched) -> None:
    page = web.page
    fid = await site.seeded.fact_id("nurse")
    day = (await site.seeded.mem.journal_days())[0].day
    tour = [
        ("01-overview", "/", "Overview"),
        ("02-guild-members", f"/guilds/{GUILD}", "Harbour Club"),
        ("03-member", f"/guilds/{GUILD}/members/{BOB}", "What the bot knows about Bob"),
        ("04-search", f"/search?guildId={GUILD}&q=where+does+Alice+work", "Search memory"),
        ("05-facts", f"/facts?guildId={GUILD}", "Fact inspector"),
        ("06-fact-detail", f"/facts/{fid}?guildId={GUILD}", "Alice works as a nurse in Berlin."),
        ("07-snapshot", "/snapshot", "MEMORY.md snapshot"),
        ("08-journal", "/journal", "Daily journal"),
        ("09-journal-day", f"/journal/{day}", f"Journal {day}"),
        ("10-traces", "/traces", "Traces"),
        (
            "11-trace-context",
            f"/traces?guildId={GUILD}&messageId={site.seeded.reply_to}",
            "Show context",
        ),
        ("12-activity", "/activity", "Activity"),
        ("13-settings", f"/settings?guildId={GUILD}", "Guild settings"),
        ("14-not-found", "/no/such/page", "404"),
    ]
    for name, path, heading in tour:
        if name == "14-not-found":
            # No CSP violation, failed asset or script error on any real page.
            assert web.console_errors == [], web.console_errors
        await page.goto(site.base + path)
        h1 = page.locator("h1")
        assert (await h1.inner_text()).strip().startswith(heading), path
        # Nothing overflows the window sideways (tables scroll inside their wrapper).
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1280, f"{path} is {width}px wide"
        await web.shot(name)
    await page.set_viewport_size({"width": 420, "height": 860})
    await page.goto(site.base + f"/search?guildId={GUILD}&q=where+does+Alice+work")
    await web.shot("15-search-narrow")


async def test_search_shows_hit_with_score_parts(site: Site, web: Watched) -> None:
    page = web.page
    await page.goto(site.base + "/")
    await page.get_by_role("link", name="Search", exact=True).first.click()
    await page.get_by_label("Guild").select_option(GUILD)
    await page.get_by_label("Query").fill("where does Alice work")
    await page.get_by_role("button", name="Search").click()
    hit = page.locator("li.hit").first
    await hit.wait_for()
    assert "Alice works as a nurse in Berlin." in await hit.inner_text()
    labels = [t.strip() for t in await hit.locator(".bar-label").all_inner_texts()]
    assert labels == ["semantic", "lexical", "bm25", "confidence", "recency", "channel"]
    meters = hit.locator("meter")
    assert await meters.count() == 6
    values = [float(await meters.nth(i).get_attribute("value")) for i in range(6)]
    assert all(0.0 <= v <= 1.0 for v in values) and values[0] > 0 and values[1] > 0
    assert re.fullmatch(r"\d\.\d\d", (await hit.locator(".hit-score").inner_text()).strip())
    await web.shot("20-search-hit")
    assert web.console_errors == []


async def test_refresh_snapshot(site: Site, web: Watched) -> None:
    page = web.page
    await page.goto(site.base + "/snapshot")
    assert "Durable Memory Snapshot" in await page.locator("article.markdown h2").inner_text()
    path = site.seeded.mem.snapshot_path
    path.unlink()
    await page.locator("#refresh").click()
    await page.get_by_text("Snapshot regenerated.").wait_for()
    assert path.exists()
    people = await page.locator("article.markdown").inner_text()
    assert "Alice works as a nurse in Berlin." in people and "Ongoing Lore" in people
    await web.shot("21-snapshot-refreshed")


async def test_archive_fact_and_it_is_gone_from_search(site: Site, web: Watched) -> None:
    page = web.page
    search = site.base + f"/search?guildId={GUILD}&q=favourite+food+ramen"
    await page.goto(search)
    link = page.locator("li.hit a", has_text="Bob's favourite food is ramen.")
    await link.click()
    await page.locator("#archive").click()
    await page.get_by_text("Fact archived").wait_for()
    assert await page.locator(".badge", has_text="archived").count() == 1
    await web.shot("22-fact-archived")
    await page.goto(search)
    # The fact is gone; the message that said it may still be found (search
    # covers past messages too).
    assert await page.locator("li.hit", has_text="Bob's favourite food is ramen.").count() == 0
    await web.shot("23-search-after-archive")
    # …and the history says who did it.
    fid = await site.seeded.fact_id("ramen")
    history = await site.seeded.mem.facts.history(GUILD, fid)
    assert (history[-1].event, history[-1].actor) == ("archive", "operator")


async def test_script_in_a_fact_is_rendered_inert(site: Site, web: Watched) -> None:
    page = web.page
    fid = await site.seeded.fact_id(SCRIPT)
    day = (await site.seeded.mem.journal_days())[0].day
    for path in (
        f"/guilds/{GUILD}/members/{BOB}",
        f"/facts?guildId={GUILD}",
        f"/facts/{fid}?guildId={GUILD}",
        f"/search?guildId={GUILD}&q=favourite+snippet",
        "/snapshot",
        f"/journal/{day}",
    ):
        await page.goto(site.base + path)
        # Shown as text…
        assert SCRIPT in await page.locator("main").inner_text(), path
        # …never parsed as an element (escaping, independent of the CSP).
        assert await page.locator("script").count() == 0, path
    await page.goto(site.base + f"/facts/{fid}?guildId={GUILD}")
    await web.shot("24-script-fact-inert")
    assert web.dialogs == []


async def test_member_facts_within_three_clicks(site: Site, web: Watched) -> None:
    page = web.page
    await page.goto(site.base + "/")
    clicks = 0
    await page.get_by_role("link", name="All members").first.click()
    clicks += 1
    await page.get_by_role("link", name="Carol", exact=True).click()
    clicks += 1
    assert (await page.locator("h1").inner_text()) == "What the bot knows about Carol"
    assert "Carol lives in Lisbon." in await page.locator("main").inner_text()
    assert clicks < 3
    await web.shot("25-member-carol")
    # Shorter still: the overview lists who the bot knows most about.
    await page.goto(site.base + "/")
    await page.get_by_role("link", name="Alice", exact=True).first.click()
    assert (await page.locator("h1").inner_text()) == "What the bot knows about Alice"


async def test_login_when_a_token_is_set(locked_site: Site, web: Watched) -> None:
    page = web.page
    await page.goto(locked_site.base + f"/facts?guildId={GUILD}")
    assert page.url.startswith(locked_site.base + "/login")
    await web.shot("26-login")
    await page.get_by_label("Token").fill("wrong-token-wrong-token")
    await page.get_by_role("button", name="Log in").click()
    await page.get_by_text("wrong token").wait_for()
    await page.get_by_label("Token").fill(TOKEN)
    await page.get_by_role("button", name="Log in").click()
    await page.locator("h1", has_text="Fact inspector").wait_for()
    assert page.url == locked_site.base + f"/facts?guildId={GUILD}"
    cookies = {c["name"]: c for c in await page.context.cookies()}
    session = cookies["guildlore_session"]
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    await page.get_by_role("button", name="Log out", exact=True).click()
    await page.locator("h1", has_text="Log in").wait_for()


async def test_undo_a_consolidation_run_from_its_page(site: Site, web: Watched) -> None:
    from datetime import UTC, datetime, timedelta

    from tests.conftest import FakeClock
    from tests.roles.test_consolidation import seed as seed_duplicates

    mem = site.seeded.mem
    ids = await seed_duplicates(mem, FakeClock(datetime.now(UTC) - timedelta(hours=1)))
    done = await mem.consolidation.run(GUILD)
    dup = ids["alice likes  hiking"]
    assert {a["drop"] for a in done.report["applied"]} >= {dup}
    page = web.page
    await page.goto(site.base + f"/consolidation?guildId={GUILD}")
    assert (await page.locator("h1").inner_text()).strip() == "Consolidation runs"
    run = page.locator(f"#run-{done.run_id}")
    link = run.locator(f'a[href^="/facts/{dup}?"]')
    assert (await link.inner_text()).strip() == "alice likes hiking"  # the fact's text
    await web.shot("24-consolidation-run")
    await run.get_by_role("button", name=f"Undo run {done.run_id}").click()
    await page.get_by_text("Consolidation run undone").wait_for()
    assert await page.locator(f"#run-{done.run_id} .undo-form").count() == 0
    restored = await mem.facts.get(GUILD, dup)
    assert restored is not None and restored.is_active
    assert web.console_errors == [], web.console_errors
