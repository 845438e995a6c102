"""Fixtures of the dashboard's tests: a seeded engine and clients of the real aiohttp app."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from tests.dashboard.http import Client, MakeClient
from tests.dashboard_data import Seeded, seed


@pytest.fixture
async def seeded(make_memory: Any) -> Seeded:
    return await seed(make_memory)


@pytest.fixture
async def make_client(aiohttp_client: Any, seeded: Seeded) -> MakeClient:
    async def factory(**cfg: Any) -> Client:
        config = DashboardConfig(**cfg)
        server = TestServer(create_app(seeded.mem, config))
        await server.start_server(**runner_options(config))
        client: Client = await aiohttp_client(server)
        return client

    return factory


@pytest.fixture
async def client(make_client: MakeClient) -> Client:
    return await make_client()
