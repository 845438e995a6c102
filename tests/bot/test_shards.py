"""Several processes on one database: two ``guildlore run`` processes holding
shard 0 and shard 1 of 2, and a ``guildlore dashboard`` process.

Everything is the real thing: the processes are real subprocesses, discord.py
connects (sharded) to a local stand-in for Discord (tests/fakegateway.py,
through ``discord.api_base_url``), extraction goes to the fake OpenAI server
(tests/fakeopenai.py) through the real client, and the dashboard answers
over HTTP. Each bot process uses its own extraction model name, so the fake
OpenAI server's log tells which process extracted which message.

The database location comes from the ``database`` fixture alone: a SQLite
file, or one PostgreSQL database (the test runs on each backend).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from bot.commands.dashboard import READY_PREFIX
from memory import Memory, MemoryConfig
from tests.fakegateway import FakeDiscord, FakeGuild
from tests.fakeopenai import FakeOpenAI, echo_facts_reply
from tests.helpers import eventually
from tests.processes import Proc

ROOT = Path(__file__).resolve().parents[2]
COUNT = 2
# Discord's rule: a guild is on shard (id >> 22) % count.
GUILD_0 = str((1000 * COUNT + 0) << 22 | 4242)
GUILD_1 = str((1001 * COUNT + 1) << 22 | 4242)
CHANNEL_0 = "700000000000000010"
CHANNEL_1 = "700000000000000011"
ALICE = "444444444444444444"
BOB = "555555555555555555"
LEASE_S = 3.0  # a killed process's shard claim expires this fast here

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class DatabaseTarget:
    """Where every process keeps its memory: the settings that name it, and
    the engine config the test's own checking engine opens."""

    env: dict[str, str]
    config: MemoryConfig


@pytest.fixture
def database(tmp_path: Path, database_url_for: Callable[[Path], str | None]) -> DatabaseTarget:
    """A SQLite file, or a PostgreSQL database (``store_backend``)."""
    db = tmp_path / "shared" / "guildlore.sqlite3"
    journal = tmp_path / "shared" / "memory_journal"
    url = database_url_for(tmp_path / "shared")
    env = {"GUILDLORE_DB_PATH": str(db), "GUILDLORE_JOURNAL_DIR": str(journal)}
    if url is not None:
        env["GUILDLORE_DATABASE_URL"] = url
    return DatabaseTarget(
        env=env, config=MemoryConfig(db_path=db, journal_dir=journal, database_url=url)
    )


class Extraction:
    """The fake OpenAI server answering like a model (one fact per message),
    except that it holds the first extraction of a message containing
    ``hold_word`` until ``release`` (a process killed meanwhile never gets
    its answer)."""

    def __init__(self, hold_word: str) -> None:
        self.hold_word = hold_word
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, body: dict[str, Any]) -> str:
        if self.hold_word in json.dumps(body) and not self.held.is_set():
            self.held.set()
            await self.release.wait()
        return echo_facts_reply(body)


@pytest_asyncio.fixture
async def world(
    tmp_path: Path, database: DatabaseTarget
) -> AsyncIterator[tuple[FakeDiscord, FakeOpenAI, Extraction, Callable[..., Awaitable[Proc]]]]:
    guilds = [
        FakeGuild(GUILD_0, "Shard Zero Guild", [CHANNEL_0]),
        FakeGuild(GUILD_1, "Shard One Guild", [CHANNEL_1]),
    ]
    extraction = Extraction("canoe")
    started: list[Proc] = []
    async with FakeDiscord(guilds) as discord_, FakeOpenAI(chat_handler=extraction) as openai_:

        async def start(*args: str, model: str = "extract", name: str = "") -> Proc:
            env = {
                **os.environ,
                **database.env,
                "PYTHONPATH": str(ROOT),
                "DISCORD_TOKEN": "fake.discord.token",
                "GUILDLORE_DISCORD_API_BASE_URL": discord_.base_url,
                "GUILDLORE_DISCORD_SYNC_COMMANDS": "false",
                "GUILDLORE_DISCORD_SHARD_LEASE_S": str(LEASE_S),
                "GUILDLORE_DASHBOARD_ENABLED": "false",
                "GUILDLORE_LLM_BASE_URL": openai_.base_url,
                "OPENAI_API_KEY": "test",
                "GUILDLORE_LLM_EXTRACTOR": "llm",
                "GUILDLORE_LLM_EXTRACT_MODEL": model,
                "GUILDLORE_LLM_MAX_RETRIES": "0",
                "GUILDLORE_EMBEDDING_PROVIDER": "none",
                "GUILDLORE_INGEST_WORKERS": "1",
                "GUILDLORE_VOICE_ENABLED": "false",
            }
            env.pop("GUILDLORE_CONFIG", None)
            if "GUILDLORE_DATABASE_URL" in env:
                # Processes on PostgreSQL may be on several hosts: no shared folder.
                host = tmp_path / "hosts" / (name or args[0]).replace(" ", "_")
                env["GUILDLORE_JOURNAL_DIR"] = str(host / "memory_journal")
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bot",
                *args,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                cwd=tmp_path,
            )
            p = Proc(name or " ".join(args), proc)
            started.append(p)
            return p

        try:
            yield discord_, openai_, extraction, start
        finally:
            extraction.release.set()
            for p in started:
                if p.proc.returncode is None:
                    p.proc.kill()
                    await p.proc.wait()


@pytest_asyncio.fixture
async def checker(database: DatabaseTarget) -> AsyncIterator[Memory]:
    """The test's own engine on the shared database (no ingest): it reads what
    the processes wrote."""
    mem = await Memory.open(database.config, ingest=False)
    try:
        yield mem
    finally:
        await mem.close()


async def state_of(mem: Memory, guild: str, message_id: str) -> str | None:
    stored = await mem.get_message(guild, message_id)
    return None if stored is None else stored.state


async def facts_with(mem: Memory, guild: str, word: str) -> list[str]:
    return [f.fact for f in await mem.facts.find(guild, limit=200) if word in f.fact.lower()]


def extracted_by(openai_: FakeOpenAI, word: str) -> set[str]:
    """The extraction models of the requests that carried ``word``."""
    return {
        str(r.body.get("model"))
        for r in openai_.chat_requests()
        if word in json.dumps(r.body) and "memory_decisions" not in json.dumps(r.body)
    }


async def search(base: str, guild: str, q: str) -> list[str]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            f"{base}api/memory/search", params={"q": q, "guildId": guild, "scope": "all"}
        ) as r,
    ):
        assert r.status == 200, await r.text()
        body = await r.json()
    assert body["ok"] is True
    return [json.dumps(hit).lower() for hit in body["results"]]


async def journal_lines(base: str) -> list[str]:
    """The dashboard's journal: the content of every line of its newest day."""
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}journal", params={"format": "json"}) as r:
            assert r.status == 200, await r.text()
            files = (await r.json())["files"]
        if not files:
            return []
        async with http.get(f"{base}journal/{files[0]['day']}", params={"format": "json"}) as r:
            assert r.status == 200, await r.text()
            return [e["content"] for e in (await r.json())["entries"]]


async def test_two_shard_processes_and_a_dashboard_share_one_database(
    world: Any, checker: Memory
) -> None:
    discord_, openai_, extraction, start = world
    shard_args = ("--shard-count", str(COUNT))
    zero = await start("run", "--shard-ids", "0", *shard_args, model="extract-zero", name="zero")
    one = await start("run", "--shard-ids", "1", *shard_args, model="extract-one", name="one")
    board = await start("dashboard", "--port", "0", name="dashboard")
    for p in (zero, one):
        await p.line_with("logged in as")
    base = (await board.line_with(READY_PREFIX)).split(READY_PREFIX, 1)[1]
    # Each process identified as its own shard and got only that shard's guild.
    assert sorted((i.shard_id, i.shard_count) for i in discord_.identified) == [(0, 2), (1, 2)]
    assert "in 1 guilds" in await zero.line_with("logged in as")

    bike = await discord_.send_message(
        GUILD_0, CHANNEL_0, ALICE, "I keep my bicycle in the blue garage", author_name="Alice"
    )
    kayak = await discord_.send_message(
        GUILD_1, CHANNEL_1, BOB, "I keep my kayak in the red boathouse", author_name="Bob"
    )
    assert await eventually(
        lambda: _all_done(checker, [(GUILD_0, bike), (GUILD_1, kayak)]), timeout=60
    ), zero.log() + one.log()

    # Ingested once each, by the process holding the guild's shard.
    assert extracted_by(openai_, "bicycle") == {"extract-zero"}
    assert extracted_by(openai_, "kayak") == {"extract-one"}
    assert len(await facts_with(checker, GUILD_0, "bicycle")) == 1
    assert len(await facts_with(checker, GUILD_1, "kayak")) == 1
    assert await facts_with(checker, GUILD_0, "kayak") == []
    assert await facts_with(checker, GUILD_1, "bicycle") == []

    # The dashboard process answers from both guilds, each from its own only.
    assert any("bicycle" in h for h in await search(base, GUILD_0, "bicycle garage"))
    assert any("kayak" in h for h in await search(base, GUILD_1, "kayak boathouse"))
    assert not any("kayak" in h for h in await search(base, GUILD_0, "kayak boathouse"))
    assert not any("bicycle" in h for h in await search(base, GUILD_1, "bicycle garage"))
    # Its journal holds both processes' lines (on PostgreSQL, read from the
    # database: the dashboard's host has no journal file of its own).
    lines = await journal_lines(base)
    assert any("bicycle" in c for c in lines) and any("kayak" in c for c in lines), lines

    # Shard 0's process dies with a message accepted (its inbox row written)
    # and its extraction still in flight.
    canoe = await discord_.send_message(
        GUILD_0, CHANNEL_0, ALICE, "I keep my canoe in the green shed", author_name="Alice"
    )
    async with asyncio.timeout(60):
        await extraction.held.wait()
    assert await state_of(checker, GUILD_0, canoe) == "pending"
    assert await zero.stop(signal.SIGKILL) == -signal.SIGKILL
    await discord_.wait_disconnected(0, COUNT)
    # Nobody else takes it: the other process does not own that guild, not
    # even when it restarts and replays its own unfinished rows.
    assert await one.stop() == 0, one.log()
    one = await start("run", "--shard-ids", "1", *shard_args, model="extract-one", name="one")
    await one.line_with("logged in as")
    assert await state_of(checker, GUILD_0, canoe) == "pending"
    assert extracted_by(openai_, "canoe") == {"extract-zero"}

    # Restarted, it waits out its old claim, replays the row and processes it once.
    again = await start("run", "--shard-ids", "0", *shard_args, model="extract-again")
    assert await eventually(lambda: _all_done(checker, [(GUILD_0, canoe)]), timeout=60), again.log()
    await again.line_with("replayed 1 unfinished messages")
    assert len(await facts_with(checker, GUILD_0, "canoe")) == 1
    assert extracted_by(openai_, "canoe") == {"extract-zero", "extract-again"}
    assert await checker.inbox.unfinished_counts([GUILD_0, GUILD_1]) == {}
    # The dashboard sees what the restarted process wrote.
    assert any("canoe" in h for h in await search(base, GUILD_0, "canoe green shed"))

    # A delete on Discord reaches the process holding the guild, which erases it.
    await discord_.delete_message(GUILD_0, CHANNEL_0, bike)
    assert await eventually(lambda: _gone(checker, GUILD_0, bike), timeout=60), again.log()
    assert await facts_with(checker, GUILD_0, "bicycle") == []
    assert not any("bicycle" in h for h in await search(base, GUILD_0, "bicycle garage"))
    assert len(await facts_with(checker, GUILD_1, "kayak")) == 1
    lines = await journal_lines(base)
    assert not any("bicycle" in c for c in lines) and any("kayak" in c for c in lines), lines

    extraction.release.set()
    for p in (again, one, board):
        assert await p.stop() == 0, p.log()
    # Each gave its shard claim back on the way out.
    assert [x.name for x in await checker.leases.all() if x.name.startswith("shard:")] == []


async def _gone(mem: Memory, guild: str, message_id: str) -> bool:
    return await mem.get_message(guild, message_id) is None


async def _all_done(mem: Memory, rows: list[tuple[str, str]]) -> bool:
    return all([await state_of(mem, g, m) == "done" for g, m in rows])
