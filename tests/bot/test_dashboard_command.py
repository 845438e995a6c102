"""``guildlore dashboard``: the dashboard alone against the database, seeing
what other processes write there."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.cli import main
from bot.commands.dashboard import READY_PREFIX, serve
from bot.settings import load_settings
from tests.helpers import GUILD, OTHER_GUILD, msg


async def _search(base: str, guild: str, q: str) -> list[str]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            f"{base}api/memory/search", params={"q": q, "guildId": guild, "scope": "all"}
        ) as r,
    ):
        assert r.status == 200
        body = await r.json()
    return [str(h.get("text") or h) for h in body["results"]]


async def test_serves_the_database_and_follows_other_writers(
    tmp_path: Path, make_memory: Callable[..., Any], capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    bot = await make_memory(data_dir=data, embeddings="none")
    await bot.ingest_message(msg("The harbour lighthouse is painted yellow", guild=GUILD))
    await bot.settle()
    settings = load_settings(
        env={"GUILDLORE_EMBEDDING_PROVIDER": "none", "GUILDLORE_LLM_EXTRACTOR": "rules"},
        overrides={
            "data_dir": data,
            "dashboard_port": 0,
            "database_url": bot.config.database_url,  # None on SQLite: the file
        },
    )
    stop = asyncio.Event()
    server = asyncio.create_task(serve(settings, stop))
    try:
        line = ""
        for _ in range(500):
            line = capsys.readouterr().out
            if READY_PREFIX in line:
                break
            await asyncio.sleep(0.02)
        base = line.split(READY_PREFIX, 1)[1].strip()
        assert any("lighthouse" in h for h in await _search(base, GUILD, "lighthouse yellow"))
        assert await _search(base, OTHER_GUILD, "lighthouse yellow") == []
        # Written by the other engine while the dashboard runs: it shows up.
        await bot.ingest_message(msg("The old windmill has blue sails", guild=GUILD))
        await bot.settle()
        assert any("windmill" in h for h in await _search(base, GUILD, "windmill blue sails"))
    finally:
        stop.set()
        assert await asyncio.wait_for(server, 30) == 0


def test_refuses_an_open_non_loopback_bind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GUILDLORE_DASHBOARD_HOST", "0.0.0.0")
    assert main(["dashboard", "--data-dir", str(tmp_path)]) == 2
    assert "DASHBOARD_TOKEN" in capsys.readouterr().err
