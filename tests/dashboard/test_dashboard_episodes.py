"""Episodes on the dashboard, through the real aiohttp app: the JSON route
and the guild page's section."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from memory.engine import Memory
from tests.conftest import FakeClock
from tests.helpers import CHANNEL, GUILD
from tests.ingest.test_decision import ingest
from tests.roles.test_episodes import PRIVATE, engine, run_at, talk

Client = TestClient[web.Request, web.Application]


async def client_for(aiohttp_client: Any, mem: Memory) -> Client:
    config = DashboardConfig()
    server = TestServer(create_app(mem, config))
    await server.start_server(**runner_options(config))
    client: Client = await aiohttp_client(server)
    return client


async def test_episodes_json_and_guild_page(
    make_memory: Any, clock: FakeClock, aiohttp_client: Any
) -> None:
    mem = await engine(make_memory, clock)
    await mem.guilds.set_names(GUILD, channels={CHANNEL: "raids"})
    messages = talk()
    await ingest(mem, *messages, *talk(channel=PRIVATE))
    created = await run_at(mem, clock, 40)
    assert len(created) == 2
    client = await client_for(aiohttp_client, mem)

    r = await client.get(f"/api/memory/episodes?guildId={GUILD}")
    assert r.status == 200
    body = await r.json()
    assert body["ok"] is True
    assert sorted(c["channel_id"] for c in body["episodeChannels"]) == sorted([CHANNEL, PRIVATE])
    assert all(c["episodes"] == 1 for c in body["episodeChannels"])
    assert len(body["episodes"]) == 2
    assert body["episodeStats"]["extractive"] == 2

    r = await client.get(f"/api/memory/episodes?guildId={GUILD}&channelId={CHANNEL}")
    (one,) = (await r.json())["episodes"]
    assert one["channel_name"] == "raids" and one["method"] == "extractive"
    assert one["message_count"] == 6 and sorted(one["source_ids"]) == sorted(m.id for m in messages)
    assert (one["started_at"], one["ended_at"]) == (messages[0].created_at, messages[-1].created_at)

    html = await (await client.get(f"/guilds/{GUILD}")).text()
    assert 'id="episodes"' in html and "#raids" in html
    assert "talked in #raids" in html

    page = await (await client.get(f"/facts/{one['id']}?guildId={GUILD}")).text()
    assert "Channel episodes" in page


async def test_episodes_json_refuses_bad_input(
    make_memory: Any, clock: FakeClock, aiohttp_client: Any
) -> None:
    mem = await engine(make_memory, clock)
    client = await client_for(aiohttp_client, mem)
    for query in ("", f"guildId={GUILD}&channelId=general", f"guildId={GUILD}&limit=many"):
        r = await client.get(f"/api/memory/episodes?{query}")
        assert r.status == 400
        body = await r.json()
        assert body["ok"] is False and body["status"] == 400
    r = await client.get(f"/api/memory/episodes?guildId={GUILD}")
    assert (await r.json())["episodes"] == []
