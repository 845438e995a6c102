"""A fact's date is when it was said: an imported fact from a 2023 message
shows 2023 in about-me, the member export, the dashboard, search and the
model's prompt — not the day it was imported."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestServer

from bot.cogs.member_commands import about_me_text
from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from memory.extract.rules.extractor import RuleExtractor
from memory.importer.session import import_files
from memory.member_export import export_json, export_markdown
from memory.reply.conversation import render_fact

GUILD = "1079907749569237093"
CHANNEL = "1108110426412752957"
AUTHOR = "1162131923045449809"
SAID = "2023-10-12"
IMPORTED = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)


def _export(path: Path) -> Path:
    """A two-message DiscordChatExporter export written in 2023."""
    author = {"id": AUTHOR, "name": "ilsedevos", "nickname": "ilsedevos", "isBot": False}
    messages = [
        {
            "id": "1162145093122261042",
            "type": "Default",
            "timestamp": f"{SAID}T21:49:41.812+00:00",
            "content": "I am a paleographer.",
            "author": author,
        },
        {
            "id": "1162145093122261099",
            "type": "Default",
            "timestamp": f"{SAID}T21:52:00.000+00:00",
            "content": "The scans arrive next week.",
            "author": author,
        },
    ]
    doc = {
        "guild": {"id": GUILD, "name": "Papyrology"},
        "channel": {"id": CHANNEL, "type": "GuildTextChat", "name": "papyrology"},
        "messages": messages,
    }
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


async def test_an_imported_fact_shows_its_messages_date_everywhere(
    make_memory: Any, aiohttp_client: Any, tmp_path: Path
) -> None:
    mem = await make_memory(extractor=RuleExtractor(), clock=lambda: IMPORTED)
    report = await import_files(mem, [_export(tmp_path / "export.json")])
    assert report.facts_added == 1
    (fact,) = await mem.facts.find(GUILD, subject=AUTHOR, limit=10)
    assert fact.created_at.startswith("2026-11-29")  # stored on the import's day
    assert fact.said_at.startswith(SAID)

    # Search (the bot's /memory search, the API, the CLI) and the model's prompt.
    (hit,) = [h for h in await mem.search(GUILD, "paleographer", scope="facts") if h.kind == "fact"]
    assert hit.created_at.startswith(SAID)
    assert f"({SAID}" in render_fact(hit) or f", {SAID}" in render_fact(hit)
    assert "2026" not in render_fact(hit)

    # About-me and the member export.
    record = await mem.members.about(GUILD, AUTHOR, None)
    # About-me says the day in words: "— 12 October 2023".
    about = about_me_text(record)
    assert "12 October 2023" in about and "2026" not in about.split("\n", 2)[1], about
    export = await mem.members.export(GUILD, AUTHOR, None)
    assert json.loads(export_json(export))["facts"][0]["said_at"].startswith(SAID)
    assert f"said {SAID}" in export_markdown(export)

    # The dashboard: the member's page, the fact inspector and the fact's page.
    config = DashboardConfig()
    server = TestServer(create_app(mem, config))
    await server.start_server(**runner_options(config))
    client = await aiohttp_client(server)
    for url, params in (
        (f"/guilds/{GUILD}/members/{AUTHOR}", {}),
        ("/facts", {"guildId": GUILD}),
        (f"/facts/{fact.id}", {"guildId": GUILD}),
    ):
        r = await client.get(url, params=params)
        assert r.status == 200, url
        page = await r.text()
        assert f"said {SAID}" in page or f">{SAID} " in page, url
    r = await client.get(f"/facts/{fact.id}", params={"guildId": GUILD})
    page = await r.text()
    said_row = page[page.index('id="said"') :]
    assert said_row[: said_row.index("</td>")].count(SAID) == 1
    r = await client.get("/api/memory/search", params={"q": "paleographer", "guildId": GUILD})
    found = await r.json()
    assert found["results"][0]["created_at"].startswith(SAID)
