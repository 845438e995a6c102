"""Consolidation from the outside: the daily job, ``guildlore consolidate``
(dry run, run, undo) and the dashboard's runs page with its undo button."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from bot.cli import main as cli_main
from bot.jobs import Jobs
from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from memory.config import EmbeddingConfig, MemoryConfig
from memory.engine import Memory
from tests.conftest import FakeClock
from tests.dashboard.http import form_token
from tests.helpers import GUILD
from tests.roles.test_consolidation import seed


def facts_dump(db: Path) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return sorted(tuple(r) for r in con.execute("SELECT * FROM memory_facts"))
    finally:
        con.close()


async def _seeded(data: Path) -> None:
    cfg = MemoryConfig.for_data_dir(data, embedding=EmbeddingConfig(provider="none"))
    # The CLI runs on the system clock: the rows must be recent for it.
    clock = FakeClock(datetime.now(UTC) - timedelta(hours=1))
    mem = await Memory.open(cfg, clock=clock, ingest=False)
    try:
        await seed(mem, clock)
    finally:
        await mem.close()


def test_the_cli_previews_runs_and_undoes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    asyncio.run(_seeded(data))
    monkeypatch.setenv("GUILDLORE_EMBEDDING_PROVIDER", "none")
    db = data / "guildlore.sqlite3"
    before = facts_dump(db)
    assert cli_main(["consolidate", "--data-dir", str(data), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"guild {GUILD}, run 1 (dry run)" in out and "would change 2" in out
    assert "merge: fact 2 -> fact 1 (exact duplicate after normalisation)" in out
    assert facts_dump(db) == before
    assert cli_main(["consolidate", "--data-dir", str(data), "--guild", GUILD]) == 0
    out = capsys.readouterr().out
    assert "run 2:" in out and "changed 2" in out
    assert facts_dump(db) != before
    assert cli_main(["consolidate", "--data-dir", str(data), "--guild", GUILD, "--undo", "2"]) == 0
    assert "Run 2 undone: 3 facts restored." in capsys.readouterr().out
    assert facts_dump(db) == before
    assert cli_main(["consolidate", "--data-dir", str(data), "--guild", GUILD, "--undo", "2"]) == 1
    assert "undone already" in capsys.readouterr().err
    assert cli_main(["consolidate", "--data-dir", str(data), "--undo", "2"]) == 2


async def test_the_daily_job_consolidates(make_memory: Any, clock: FakeClock) -> None:
    mem = await make_memory(clock=clock, embeddings="none")
    await seed(mem, clock)
    jobs = Jobs(mem, reindex_interval_min=0)
    jobs.start()
    assert jobs.scheduler is not None
    job = {j.id: j for j in jobs.scheduler.get_jobs()}["consolidation"]
    await job.func()
    await jobs.stop()
    assert jobs.runs["consolidation"] == 1
    (run,) = await mem.consolidation.runs(GUILD)
    assert len(run.report["applied"]) == 2 and not run.dry_run


async def test_the_dashboard_lists_runs_and_undoes_one(
    make_memory: Any, clock: FakeClock, aiohttp_client: Any
) -> None:
    mem = await make_memory(clock=clock, embeddings="none")
    ids = await seed(mem, clock)
    await mem.consolidation.run(GUILD, dry_run=True)
    done = await mem.consolidation.run(GUILD)
    config = DashboardConfig()
    server = TestServer(create_app(mem, config))
    await server.start_server(**runner_options(config))
    client = await aiohttp_client(server)
    page = await (await client.get("/consolidation", params={"guildId": GUILD})).text()
    assert 'id="run-1"' in page and 'id="run-2"' in page and "dry run" in page
    assert f'action="/consolidation/{done.run_id}/undo"' in page
    assert 'action="/consolidation/1/undo"' not in page  # a dry run has nothing to undo
    assert f"/facts/{ids['alice likes  hiking']}?" in page
    token = await form_token(client, f"/consolidation?guildId={GUILD}")
    r = await client.post(
        f"/consolidation/{done.run_id}/undo",
        data={"csrf_token": token, "guildId": GUILD},
        allow_redirects=False,
    )
    assert r.status == 303, await r.text()
    dup = await mem.facts.get(GUILD, ids["alice likes  hiking"])
    assert dup is not None and dup.is_active
    page = await (await client.get("/consolidation", params={"guildId": GUILD})).text()
    assert f'action="/consolidation/{done.run_id}/undo"' not in page and "undone" in page
    # Undoing again is refused with the reason, not a crash.
    r = await client.post(
        f"/consolidation/{done.run_id}/undo", data={"csrf_token": token, "guildId": GUILD}
    )
    assert r.status == 400 and "undone already" in await r.text()
