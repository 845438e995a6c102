"""The operator's pages over the real aiohttp app: the charts of the overview
and the guild page (and that a restart keeps them), the request log with its
filters, /metrics, the grouped settings with their values in force, the
guild's member list, a journal day in time order with names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.charts import nice_ceiling, svg
from dashboard.server import runner_options
from memory import SETTING_GROUPS
from memory.guild_settings import GUILD_SETTINGS
from tests.dashboard.http import Client, assert_error, form_token
from tests.dashboard_data import CAROL, GUILD_NAME, Seeded, seed
from tests.helpers import ALICE, CHANNEL, GUILD, OTHER_GUILD, msg


async def _client(aiohttp_client: Any, mem: Any) -> Client:
    server = TestServer(create_app(mem, DashboardConfig()))
    await server.start_server(**runner_options(DashboardConfig()))
    client: Client = await aiohttp_client(server)
    return client


# -- charts ----------------------------------------------------------------------------------------


async def test_overview_and_guild_page_draw_the_series_without_any_script(
    client: Client, seeded: Seeded
) -> None:
    await seeded.mem.search(GUILD, "where does Alice work")
    body = await (await client.get("/", params={"format": "json"})).json()
    usage = body["usage"]
    assert usage["days"] == 30 and len(usage["charts"][0]["days"]) == 30
    charts = {c["key"]: c for c in usage["charts"]}
    assert set(charts) == {
        "messages",
        "facts",
        "searches",
        "search_latency",
        "extractions",
        "replies",
        "errors",
        "tokens",
    }
    # The seed's messages were written today: 7 of them in two guilds.
    assert sum(charts["messages"]["series"][0]["values"]) == 7
    assert sum(charts["searches"]["series"][0]["values"]) >= 2
    assert [s["label"] for s in charts["facts"]["series"]] == ["added", "superseded", "archived"]
    html = await (await client.get("/")).text()
    assert html.count('<svg class="chart"') == 8
    assert "<script" not in html.replace("&lt;script", "")
    assert not re.search(r'(src|href)="https?://', html)  # nothing from elsewhere
    guild = await (await client.get(f"/guilds/{GUILD}", params={"format": "json"})).json()
    messages = next(c for c in guild["usage"]["charts"] if c["key"] == "messages")
    assert sum(messages["series"][0]["values"]) == 6  # this guild's only
    r = await client.get("/", params={"days": "90"})
    assert r.status == 200 and (await r.text()).count('<svg class="chart"') == 8
    r = await client.get("/", params={"days": "45", "format": "json"})
    assert_error(await r.json(), 400)
    r = await client.get("/", params={"end": "2024-13-40", "format": "json"})
    assert_error(await r.json(), 400)


async def test_an_imported_history_shows_on_its_own_days(client: Client, seeded: Seeded) -> None:
    mem = seeded.mem
    for day in ("2024-02-01", "2024-02-01", "2024-02-20"):
        await (await mem.ingest_message(msg("hello there", created_at=f"{day}T10:00:00Z"))).wait()
    await mem.settle()
    today = (await (await client.get(f"/guilds/{GUILD}?format=json")).json())["usage"]
    assert today["messagesOutside"] is False  # today's messages are in the window
    old = await (
        await client.get(f"/guilds/{GUILD}", params={"end": "2024-02-29", "format": "json"})
    ).json()
    usage = old["usage"]
    assert (usage["first"], usage["last"]) == ("2024-01-31", "2024-02-29")
    chart = usage["charts"][0]
    values = dict(zip(chart["days"], chart["series"][0]["values"], strict=True))
    assert values["2024-02-01"] == 2 and values["2024-02-20"] == 1
    assert usage["earlier"] == "2024-01-30" and usage["later"] == "2024-03-30"
    series = await (
        await client.get("/api/usage/series", params={"guildId": GUILD, "end": "2024-02-29"})
    ).json()
    assert series["ok"] and series["series"]["messages"][1] == 2
    assert series["messageDays"][0] == "2024-02-01"


async def test_the_charts_survive_a_restart(
    make_memory: Any, aiohttp_client: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    seeded = await seed(make_memory, data_dir=data)
    await seeded.mem.search(GUILD, "where does Alice work", consumer="api")
    first = await _client(aiohttp_client, seeded.mem)
    before = (await (await first.get("/?format=json")).json())["usage"]
    guild_before = (await (await first.get(f"/guilds/{GUILD}?format=json")).json())["usage"]
    await first.close()
    await seeded.mem.close()

    again = await make_memory(data_dir=data)
    second = await _client(aiohttp_client, again)
    after = (await (await second.get("/?format=json")).json())["usage"]
    assert after["charts"] == before["charts"]
    assert (await (await second.get(f"/guilds/{GUILD}?format=json")).json())["usage"] == (
        guild_before
    )
    searches = next(c for c in after["charts"] if c["key"] == "searches")
    assert sum(searches["series"][0]["values"]) >= 2


def test_svg_stacks_bars_escapes_text_and_breaks_lines() -> None:
    chart = {
        "title": "Facts <b>",
        "kind": "bars",
        "unit": "",
        "days": ["2024-02-01", "2024-02-02"],
        "series": [
            {"label": "added", "tone": 2, "values": [3, 0]},
            {"label": "<archived>", "tone": 4, "values": [1, 0]},
        ],
    }
    out = str(svg(chart))
    assert out.startswith('<svg class="chart"') and out.endswith("</svg>")
    assert "<b>" not in out and "&lt;archived&gt;" in out
    heights = [float(h) for h in re.findall(r'class="tone-\d" [^>]*height="([0-9.]+)"', out)]
    assert len(heights) == 2 and abs(heights[0] / heights[1] - 3) < 0.01
    assert "1 Feb 2024: added 3, &lt;archived&gt; 1" in out
    line = str(
        svg(
            {
                "title": "Search time",
                "kind": "line",
                "unit": "ms",
                "days": ["2024-02-01", "2024-02-02", "2024-02-03"],
                "series": [{"label": "mean", "tone": 1, "values": [4.0, None, 8.0]}],
            }
        )
    )
    (path,) = re.findall(r'<path class="line tone-1" d="([^"]+)"', line)
    assert path.count("M") == 2 and "L" not in path  # no line across the day without searches
    empty = str(svg({**chart, "series": [{"label": "x", "tone": 1, "values": [0, 0]}]}))
    assert "none in these days" in empty
    assert [nice_ceiling(v) for v in (0, 0.3, 7, 12, 180, 2100)] == [1, 1, 10, 20, 200, 2500]


# -- the request log and /metrics ------------------------------------------------------------------


async def test_the_request_log_page_filters_and_pages(client: Client, seeded: Seeded) -> None:
    mem = seeded.mem
    await mem.search(GUILD, "where does Alice work", consumer="api")
    await mem.search(GUILD, "zzqxv", consumer="api")
    mem.usage.record_reply(OTHER_GUILD, 1200.0, model="chat", error=TimeoutError("slow"))
    await mem.usage.flush()
    body = await (await client.get("/requests", params={"format": "json"})).json()
    kinds = {e["kind"] for e in body["entries"]}
    assert {"search", "extraction", "reply"} <= kinds
    searches = await (
        await client.get("/requests", params={"format": "json", "kind": "search"})
    ).json()
    assert searches["entries"] and all(e["kind"] == "search" for e in searches["entries"])
    empty = await (
        await client.get(
            "/requests", params={"format": "json", "outcome": "empty", "kind": "search"}
        )
    ).json()
    assert [e["detail"] for e in empty["entries"]] == ["via api, 0 hits"]
    failed = await (await client.get("/api/usage/requests", params={"outcome": "error"})).json()
    (row,) = failed["entries"]
    assert (row["guild_id"], row["kind"], row["detail"]) == (
        OTHER_GUILD,
        "reply",
        "TimeoutError: slow",
    )
    by_guild = await (await client.get("/api/usage/requests", params={"guildId": GUILD})).json()
    assert by_guild["entries"] and {e["guild"] for e in by_guild["entries"]} == {GUILD_NAME}
    page1 = await (await client.get("/api/usage/requests", params={"limit": "2"})).json()
    page2 = await (
        await client.get(
            "/api/usage/requests", params={"limit": "2", "before": str(page1["nextBefore"])}
        )
    ).json()
    assert len(page1["entries"]) == 2 and page2["entries"]
    assert page2["entries"][0]["id"] < page1["entries"][-1]["id"]
    future = await (await client.get("/api/usage/requests", params={"since": "2999-01-01"})).json()
    assert future["entries"] == []
    before_all = await (
        await client.get("/api/usage/requests", params={"until": "2001-01-01T00:00:00Z"})
    ).json()
    assert before_all["entries"] == []
    html = await (await client.get("/requests", params={"kind": "reply"})).text()
    assert "TimeoutError: slow" in html and "where does Alice" not in html
    for bad in ({"kind": "chat"}, {"outcome": "meh"}, {"since": "yesterday"}):
        assert_error(await (await client.get("/api/usage/requests", params=bad)).json(), 400)


async def test_metrics_carry_the_series_from_the_database(client: Client, seeded: Seeded) -> None:
    await seeded.mem.search(GUILD, "where does Alice work")
    await seeded.mem.usage.flush()
    text = await (await client.get("/metrics")).text()
    assert "# TYPE guildlore_usage_total counter" in text
    assert f'guildlore_usage_total{{guild_id="{GUILD}",series="messages"}} 6' in text
    assert f'guildlore_usage_today{{guild_id="{OTHER_GUILD}",series="messages"}} 1' in text
    assert re.search(rf'guildlore_usage_total{{guild_id="{GUILD}",series="searches"}} [1-9]', text)


# -- settings ------------------------------------------------------------------------------------------


def test_every_setting_is_in_exactly_one_group() -> None:
    grouped = [key for g in SETTING_GROUPS for key, _, _ in g.settings]
    assert sorted(grouped) == sorted(s.key for s in GUILD_SETTINGS)
    assert [g.title for g in SETTING_GROUPS] == [
        "Memory",
        "Replies",
        "Voice",
        "Privacy and retention",
        "Moderator review and limits",
        "Budgets and expiry",
    ]


async def test_settings_show_groups_labels_and_the_value_in_force(
    client: Client, seeded: Seeded
) -> None:
    body = await (await client.get("/settings", params={"guildId": GUILD, "format": "json"})).json()
    groups = {g["key"]: {s["key"]: s for s in g["settings"]} for g in body["groups"]}
    budget = groups["budgets"]["budget_member_facts"]
    # A blank budget reads as the number in force (the deployment's default), not "default".
    assert budget["label"] == "Facts kept per member"
    assert budget["stored"] is None and budget["in_force"] == "80 facts"
    assert groups["budgets"]["ttl_days_other"]["in_force"] == "365 days"
    assert groups["replies"]["reply_mode"]["in_force"] == "when mentioned or replied to"
    assert groups["privacy"]["member_leave_policy"]["in_force"] == "keep what is remembered"
    api = await (await client.get("/api/settings", params={"guildId": GUILD})).json()
    in_force = {s["key"]: s["in_force"] for s in api["settings"]}
    assert in_force["budget_member_facts"] == "80" and in_force["budget_guild_total"] == "20000"
    html = await (await client.get("/settings", params={"guildId": GUILD})).text()
    assert "default (default)" not in html
    assert html.count('<form method="post" action="/settings"') == len(SETTING_GROUPS)
    assert "In force: <strong>80 facts</strong>" in html


async def test_a_group_form_saves_what_changed_all_or_nothing(
    client: Client, seeded: Seeded
) -> None:
    token = await form_token(client, f"/settings?guildId={GUILD}")
    base = {"csrf_token": token, "guildId": GUILD, "group": "budgets"}
    fields = {f"v.{key}": "" for key, _, _ in SETTING_GROUPS[-1].settings}
    r = await client.post(
        "/settings",
        data={**base, **fields, "v.budget_member_facts": "5", "v.ttl_days_other": "30"},
        allow_redirects=False,
    )
    assert r.status == 303 and "notice=saved" in r.headers["Location"]
    gs = await seeded.mem.guilds.settings(GUILD)
    assert (gs.budget_member_facts, gs.ttl_days_other, gs.budget_lore) == (5, 30, None)
    changes = await seeded.mem.admin.action_log(kind="settings_change", guild_id=GUILD)
    assert len(changes) == 2  # only what changed
    # One bad value: nothing of the group is stored.
    r = await client.post(
        "/settings",
        data={**base, **fields, "v.budget_member_facts": "7", "v.budget_lore": "0"},
    )
    assert r.status == 400 and "budget_lore" in await r.text()
    assert (await seeded.mem.guilds.settings(GUILD)).budget_member_facts == 5
    r = await client.post(
        "/settings",
        data={**base, **fields, "v.budget_member_facts": "5", "v.ttl_days_other": "30"},
        allow_redirects=False,
    )
    assert "notice=unchanged" in r.headers["Location"]
    page = await (await client.get("/settings", params={"guildId": GUILD})).text()
    assert "In force: <strong>5 facts</strong>" in page
    r = await client.post("/settings", data={**base, "group": "nope"})
    assert r.status == 400


# -- the guild's members ---------------------------------------------------------------------------


async def test_members_without_facts_fold_away_and_the_list_pages_and_sorts(
    client: Client, seeded: Seeded
) -> None:
    mem = seeded.mem
    for i in range(30):  # members who only said hello: no facts
        m = msg("hi all", author=str(900000000000000000 + i), name=f"Quiet {i:02d}")
        await (await mem.ingest_message(m)).wait()
    await mem.settle()
    url = f"/guilds/{GUILD}"
    body = await (await client.get(url, params={"format": "json"})).json()
    assert body["members_without_facts"] == 30 and not body["show_all"]
    assert body["members_listed"] == body["members_total"] - 30
    assert all(m["facts"] > 0 for m in body["members"])
    html = await (await client.get(url)).text()
    assert "30 with no facts folded away" in html and "Quiet 05" not in html
    everyone = await (await client.get(url, params={"format": "json", "all": "1"})).json()
    assert len(everyone["members"]) == 25 and everyone["pages"] == 2
    second = await (
        await client.get(url, params={"format": "json", "all": "1", "page": "2"})
    ).json()
    names = [m["display_name"] for m in everyone["members"] + second["members"]]
    assert len(names) == len(set(names)) == everyone["members_total"]
    by_name = await (
        await client.get(url, params={"format": "json", "all": "1", "sort": "name"})
    ).json()
    listed = [m["display_name"].lower() for m in by_name["members"]]
    assert listed == sorted(listed)
    found = await (
        await client.get(url, params={"format": "json", "all": "1", "q": "quiet 1"})
    ).json()
    assert sorted(m["display_name"] for m in found["members"]) == [
        f"Quiet {i}" for i in range(10, 20)
    ]
    by_last = await (await client.get(url, params={"format": "json", "sort": "last"})).json()
    lasts = [m["last_message"] or "" for m in by_last["members"]]
    assert lasts == sorted(lasts, reverse=True)
    assert_error(
        await (await client.get(url, params={"format": "json", "sort": "age"})).json(), 400
    )


# -- the journal -----------------------------------------------------------------------------------------


async def test_a_journal_day_reads_in_time_order_with_names_and_whole_words(
    client: Client, seeded: Seeded
) -> None:
    mem = seeded.mem
    day = "2024-03-02"
    # Processed out of time order, as an import's batches are.
    for hour, text in ((15, "the later message"), (9, "the earlier message")):
        m = msg(text, author=ALICE, name="Alice", created_at=f"{day}T{hour:02d}:00:00Z")
        await (await mem.ingest_message(m)).wait()
    long_text = "word " * 70 + "supercalifragilistic tail"
    m = msg(long_text, author=CAROL, name="Carol", created_at=f"{day}T12:00:00Z")
    await (await mem.ingest_message(m)).wait()
    await mem.settle()
    body = await (await client.get(f"/journal/{day}", params={"format": "json"})).json()
    entries = body["entries"]
    assert [e["time"][11:13] for e in entries] == ["09", "12", "15"]
    assert entries[0]["channel_name"] == "general" and entries[0]["guild_name"] == GUILD_NAME
    cut = entries[1]["content"]
    assert cut.endswith("…") and len(cut) <= 320
    assert cut[:-1].rstrip().split(" ")[-1] in ("word", "supercalifragilistic")
    html = await (await client.get(f"/journal/{day}")).text()
    assert "#general" in html and f"#{CHANNEL}" not in html
