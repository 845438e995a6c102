"""The stale-vector notice: an edit made in a stand-alone dashboard (an engine
opened without ingest, as ``guildlore dashboard`` opens it) gets its vector
there, so the overview's notice clears itself — and when no worker of this
process is on it, the warning says what it means and what fills it in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from memory.config import MemoryConfig
from memory.engine import Memory
from memory.store import vectors as store_vectors
from tests.dashboard.http import csrf_header
from tests.dashboard_data import seed
from tests.helpers import GUILD, eventually


async def test_an_edit_in_the_stand_alone_dashboard_gets_its_vector_and_the_notice_clears(
    make_memory: Any,
    aiohttp_client: Any,
    local_embedder: Any,
    tmp_path: Path,
    database_url_for: Any,
) -> None:
    data = tmp_path / "data"
    seeded = await seed(make_memory, data_dir=data)
    assert await seeded.mem.settle(30)
    fid = await seeded.fact_id("nurse")
    # The dashboard's own process: same database, no ingest, no jobs.
    cfg = MemoryConfig.for_data_dir(data, database_url=database_url_for(data))
    dash = Memory(cfg, extractor=None, embedder=local_embedder)
    await dash.start(ingest=False)
    try:
        server = TestServer(create_app(dash, DashboardConfig()))
        await server.start_server(**runner_options(DashboardConfig()))
        client = await aiohttp_client(server)
        r = await client.patch(
            f"/api/memory/facts/{fid}",
            params={"guildId": GUILD},
            json={"text": "Alice works as a night nurse in Berlin."},
            headers=await csrf_header(client),
        )
        assert r.status == 200

        async def healthy() -> bool:
            body = await (await client.get("/api/memory/health")).json()
            return bool(body["healthy"] and body["warnings"] == [] and body["notices"] == [])

        # No `guildlore reindex`: the edited fact is embedded in this process.
        assert await eventually(healthy)
        model = local_embedder.model
        stored = await dash.db.read(
            lambda con: con.execute(
                "SELECT count(*) FROM memory_fact_vectors WHERE fact_id = ? AND model = ?",
                (fid, model),
            ).fetchone()[0]
        )
        assert stored == 1
        page = await (await client.get("/")).text()
        assert "Needs attention" not in page
    finally:
        await dash.close()


async def test_a_missing_vector_nobody_is_making_is_a_warning_that_says_what_to_do(
    make_memory: Any, local_embedder: Any
) -> None:
    seeded = await seed(make_memory)
    mem = seeded.mem
    assert await mem.settle(30)
    fid = await seeded.fact_id("nurse")
    # A vector lost behind this process's back (another process's edit).
    await mem.db.write(
        lambda con: (
            con.execute("DELETE FROM memory_fact_vectors WHERE fact_id = ?", (fid,)),
            store_vectors.delete_fact_vectors_index(con, [fid]),
        )
    )
    health = await mem.admin.health()
    (warning,) = health["warnings"]
    assert warning.startswith("1 active fact has no vector")
    assert "by their words only" in warning and "guildlore reindex" in warning
    assert "clears itself" in warning and health["notices"] == []
    report = await mem.admin.reindex(foreground=True)
    assert report.facts == 1
    health = await mem.admin.health()
    assert health["warnings"] == [] and health["ok"] is True
