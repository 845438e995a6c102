"""A guild's ``embedding_model`` setting: checked against the configured providers,
and the re-index it starts fails loudly but safely.

Through the real dashboard app (``PATCH /api/settings``), a real engine on
``tmp_path`` with the offline MiniLM, and the fake OpenAI server through the
real ``openai`` client for the remote provider.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from memory.config import EmbeddingConfig, MemoryConfig
from memory.embed.local import LOCAL_MODEL_ID
from memory.engine import Memory
from memory.errors import InvalidInput
from memory.extract.rules.extractor import RuleExtractor
from tests.fakeopenai import FakeOpenAI, Fault
from tests.helpers import GUILD, msg

TOKEN = "correct-horse-battery-staple-42"
Client = TestClient[web.Request, web.Application]
HEADERS = {"X-Guildlore-Token": TOKEN}


@pytest.fixture
async def remote_memory(
    tmp_path: Path, fake_openai: FakeOpenAI, local_embedder: Any
) -> AsyncIterator[Memory]:
    """An engine whose provider is the OpenAI-compatible fake (the local model also ships)."""
    cfg = MemoryConfig.for_data_dir(
        tmp_path / "remote", embedding=EmbeddingConfig(provider="openai")
    )
    mem = Memory(
        cfg,
        extractor=RuleExtractor(),
        embedding_client=fake_openai.client(),
        embedder=local_embedder,
    )
    await mem.start()
    yield mem
    await mem.close()


@pytest.fixture
async def serve(aiohttp_client: Any) -> Callable[[Memory], Awaitable[Client]]:
    async def start(mem: Memory) -> Client:
        config = DashboardConfig(token=TOKEN)
        server = TestServer(create_app(mem, config))
        await server.start_server(**runner_options(config))
        client: Client = await aiohttp_client(server)
        return client

    return start


async def patch(client: Client, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    r = await client.patch("/api/settings", params={"guildId": GUILD}, json=body, headers=HEADERS)
    return r.status, await r.json()


def assert_refused(status: int, body: dict[str, Any], *needles: str) -> None:
    assert status == 400, body
    assert body == {"ok": False, "error": body["error"], "status": 400}
    for needle in needles:
        assert needle in body["error"], (needle, body["error"])


async def test_without_a_remote_provider_only_the_local_model_is_accepted(
    make_memory: Any, serve: Any
) -> None:
    mem = await make_memory()
    client = await serve(mem)
    status, body = await patch(client, {"embedding_model": "bogus-embedder-9000"})
    assert_refused(status, body, "bogus-embedder-9000", LOCAL_MODEL_ID)
    status, body = await patch(client, {"embedding_model": "local:some-other-model"})
    assert_refused(status, body, "local:some-other-model", LOCAL_MODEL_ID)
    # All or nothing: a bad model leaves the other keys of the request unapplied.
    status, body = await patch(client, {"reply_mode": "off", "embedding_model": "bogus"})
    assert_refused(status, body, "bogus")
    assert (await mem.guilds.settings(GUILD)).reply_mode == "mention_or_reply"
    assert (await mem.guilds.raw_settings(GUILD)).get("embedding_model") is None

    status, body = await patch(client, {"embedding_model": LOCAL_MODEL_ID})
    assert status == 200, body
    status, body = await patch(client, {"embedding_model": None})
    assert status == 200, body
    # The engine refuses it whoever asks (the bot's /memory settings command too).
    with pytest.raises(InvalidInput, match="bogus"):
        await mem.guilds.set_setting(GUILD, "embedding_model", "bogus")


async def test_with_a_remote_provider_its_listed_models_are_accepted(
    remote_memory: Memory, serve: Any, fake_openai: FakeOpenAI
) -> None:
    client = await serve(remote_memory)
    status, body = await patch(client, {"embedding_model": "text-embedding-9-imaginary"})
    assert_refused(status, body, "text-embedding-9-imaginary", "text-embedding-3-small")
    assert (await remote_memory.guilds.raw_settings(GUILD)).get("embedding_model") is None
    for model in ("text-embedding-3-small", LOCAL_MODEL_ID):
        status, body = await patch(client, {"embedding_model": model})
        assert status == 200, body
        assert (await remote_memory.guilds.raw_settings(GUILD))["embedding_model"] == model


async def test_a_failing_reindex_is_logged_and_recorded_not_left_unretrieved(
    remote_memory: Memory, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    unretrieved: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: unretrieved.append(context))
    try:
        await remote_memory.guilds.set_setting(GUILD, "embedding_model", LOCAL_MODEL_ID)
        m = msg("I work as a nurse in Berlin and I love hiking.")
        assert (await remote_memory.ingest_message(m)).status == "queued"
        assert await remote_memory.settle()
        # The provider accepts the model, then fails every embedding call of the re-index.
        fake_openai.fail_next("embeddings", Fault.status(500), times=50)
        await remote_memory.guilds.set_setting(GUILD, "embedding_model", "text-embedding-3-small")
        for _ in range(400):
            failures = await remote_memory.admin.action_log(kind="memory_embedding_error")
            if failures:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the failed re-index was not recorded in the action log")
        assert failures[0].guild_id == GUILD and "reindex" in failures[0].message
        assert remote_memory.embeddings.stats.errors >= 1
        assert any(r.levelname == "ERROR" and "re-index" in r.getMessage() for r in caplog.records)
        gc.collect()
        await asyncio.sleep(0)
        # The re-index's own task, by its name: a collection may also find an
        # earlier test's leftovers (an HTTP client's task of a closed loop),
        # which say nothing about this one.
        ours = [
            c
            for c in unretrieved
            if "exception was never retrieved" in c["message"]
            and isinstance(c.get("future"), asyncio.Task)
            and c["future"].get_name().startswith("reindex-")
        ]
        assert not ours, ours
        tasks = [t for t in asyncio.all_tasks() if t.get_name() == f"reindex-{GUILD}"]
        assert all(not t.done() or t.exception() is None for t in tasks)
    finally:
        loop.set_exception_handler(None)
