"""The dashboard's privacy page in headless Chromium (issue 31): the
operator's view (the notice, a checked deletion receipt, what the daily
caps held back), the same page after a setting change, and the public view a
member gets when the operator turns ``privacy_public`` on. Screenshots go to
tests/artifacts/ (``privacy-*.png``)."""

from __future__ import annotations

from typing import Any

import pytest

from dashboard.config import DashboardConfig
from dashboard.server import bound_port, start_dashboard
from memory import CapReached, Deployment
from tests.dashboard.test_browser import TOKEN, Watched, browser, web  # noqa: F401 (fixtures)
from tests.dashboard_data import CAROL, seed
from tests.helpers import ALICE, GUILD

pytestmark = [pytest.mark.browser]

DEPLOYMENT = Deployment(
    chat_endpoint="api.openai.com",
    extract_endpoint=None,
    embedding="local",
    voice=True,
    stt_endpoint=None,
)


async def _width(page: Any) -> int:
    return int(await page.evaluate("document.documentElement.scrollWidth"))


async def test_privacy_pages_read_well_and_are_captured(make_memory: Any, web: Watched) -> None:  # noqa: F811
    seeded = await seed(make_memory)
    mem = seeded.mem
    report = await mem.forget(GUILD, CAROL, actor=f"user:{CAROL}", opt_out=True)
    await mem.guilds.set_setting(GUILD, "daily_cap_lore_lines", "1")
    for line in ("The harbour festival is in June.", "The club boat is called Tern."):
        try:
            await mem.lore.remember(GUILD, line, source_text=line, author_id=ALICE)
        except CapReached:
            pass
    open_runner = await start_dashboard(
        mem, DashboardConfig(port=0, deployment=DEPLOYMENT, privacy_public=True)
    )
    public_runner = await start_dashboard(
        mem, DashboardConfig(port=0, token=TOKEN, deployment=DEPLOYMENT, privacy_public=True)
    )
    page = web.page
    try:
        operator = f"http://127.0.0.1:{bound_port(open_runner)}"
        await page.goto(f"{operator}/privacy?guildId={GUILD}&receipt={report.receipt_id}")
        assert (await page.locator("h1").inner_text()).strip() == "Privacy: Harbour Club"
        body = await page.locator("main").inner_text()
        assert "not stored until you agree" in body
        assert f"Receipt {report.receipt_id}" in body and "nothing from before the erase" in body, (
            body
        )
        assert "The club boat is called Tern." in body  # held back by the cap
        assert "Members opted out of memory in this server: 1" in body
        assert await _width(page) <= 1280
        await web.shot("privacy-operator")

        await mem.guilds.set_setting(GUILD, "sensitive_facts", "never")
        await mem.guilds.set_setting(GUILD, "member_leave_policy", "forget:30d")
        await page.goto(f"{operator}/privacy?guildId={GUILD}")
        body = await page.locator("main").inner_text()
        assert "are never stored" in body and "erased 30 days later" in body
        await web.shot("privacy-after-setting-change")

        public = f"http://127.0.0.1:{bound_port(public_runner)}"
        await page.goto(f"{public}/privacy?guildId={GUILD}")
        assert (await page.locator("h1").inner_text()).strip() == "Privacy"
        body = await page.locator("body").inner_text()
        assert "What you can do" in body and "For the operator" not in body
        assert "Harbour Club" not in body and report.receipt_id not in body
        assert await page.locator("nav.nav").count() == 0
        assert await _width(page) <= 1280
        await web.shot("privacy-public")
        assert web.console_errors == [], web.console_errors
    finally:
        await open_runner.cleanup()
        await public_runner.cleanup()
