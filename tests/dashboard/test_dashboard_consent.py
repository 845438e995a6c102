"""The dashboard shows each guild's consent queue as counts, never the
pending texts (they belong to the member they are about)."""

from __future__ import annotations

import re
from typing import Any

from aiohttp.test_utils import TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from tests.helpers import GUILD, msg


async def test_consent_queue_counts_without_texts(make_memory: Any, aiohttp_client: Any) -> None:
    mem = await make_memory(embeddings="none")
    for text in ("I am a practising Catholic.", "I love hiking in the Alps."):
        assert await (await mem.ingest_message(msg(text))).wait()
    assert await mem.settle(30)
    await mem.guilds.set_names(GUILD, guild_name="Guild", channels={})
    config = DashboardConfig()
    server = TestServer(create_app(mem, config))
    await server.start_server(**runner_options(config))
    client = await aiohttp_client(server)

    body = await (await client.get("/api/guilds")).json()
    (g,) = body["guilds"]
    assert g["consent_pending"] == 1 and g["consent_by_category"] == {"religion": 1}
    for path in ("/", f"/guilds/{GUILD}", "/api/guilds"):
        page = await (await client.get(path)).text()
        assert "Catholic" not in page, path
    guild_page = await (await client.get(f"/guilds/{GUILD}")).text()
    assert "1 sensitive fact wait" in guild_page and "religion 1" in guild_page
    metrics = await (await client.get("/metrics")).text()
    assert re.search(r"sensitive_queued_total(\{[^}]*\})? 1\b", metrics), metrics[:500]
    actions = await (await client.get("/activity", params={"guildId": GUILD})).text()
    assert "memory_sensitive" in actions and "Catholic" not in actions
