"""The composition root (bot/runtime.py): a resource that fails to open closes
every resource opened before it. Real settings, real clients, a real engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot import runtime
from bot.settings import Settings, load_settings
from memory import Clients, GuildloreError, Memory
from tests.fakeopenai import FakeOpenAI


class Recorded:
    """``runtime.settings_clients``, keeping what it built for the test to inspect."""

    def __init__(self) -> None:
        self.made: list[Clients] = []

    def __call__(self, settings: Settings) -> Clients:
        clients = runtime.settings_clients(settings)
        self.made.append(clients)
        return clients


def _settings(data: Path, fake_openai: FakeOpenAI) -> Settings:
    return load_settings(
        env={"GUILDLORE_LLM_BASE_URL": fake_openai.base_url, "GUILDLORE_VOICE_ENABLED": "false"},
        overrides={"data_dir": data, "dashboard_enabled": False},
    )


async def test_clients_are_closed_when_the_engine_cannot_open(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    data = tmp_path / "data"
    settings = _settings(data, fake_openai)
    # A folder where the database file should be: SQLite cannot open it.
    settings.resolved_db_path.mkdir(parents=True)
    recorded = Recorded()
    with pytest.raises(GuildloreError, match="cannot open database"):
        await runtime.main(settings, fake_gateway=True, clients_factory=recorded)
    (clients,) = recorded.made
    assert clients.openai is not None and clients.openai.is_closed()


async def test_engine_and_clients_are_closed_when_the_dashboard_cannot_listen(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    settings = _settings(tmp_path / "data", fake_openai)
    recorded = Recorded()
    engines: list[Memory] = []

    async def port_in_use(memory: Memory, _settings: Any) -> Any:
        engines.append(memory)
        raise OSError(98, "Address already in use")

    code = await runtime.main(
        settings, fake_gateway=True, dashboard_starter=port_in_use, clients_factory=recorded
    )
    assert code == 1
    (clients,) = recorded.made
    assert clients.openai is not None and clients.openai.is_closed()
    (memory,) = engines
    assert not memory.db.is_open, "the engine was closed"
