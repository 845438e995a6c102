"""PostgreSQL killed and restarted under a running ``guildlore run``.

Everything is the real thing: a PostgreSQL server of this test's own (the
pgserver wheel's, on a temporary data directory) that the test kills with
SIGKILL and starts again; a real ``guildlore run`` subprocess connected
through discord.py to the local stand-in for Discord (tests/fakegateway.py);
extraction by the fake OpenAI server (one fact per message); the dashboard's
health and ``/metrics`` over HTTP.

What must hold: every message sent before, during and after the outage is
stored once and has its one fact; health says the database is unreachable
while it is; a database that stays away past ``database.unreachable_exit_s``
ends the process with a non-zero code and one line that says why.

No fixed sleeps: every wait is on a condition, with a generous deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest
import pytest_asyncio

from tests import pg
from tests.fakegateway import FakeDiscord, FakeGuild
from tests.fakeopenai import FakeOpenAI, echo_facts_reply
from tests.helpers import eventually
from tests.processes import Proc

ROOT = Path(__file__).resolve().parents[2]
GUILD = "1111111111111111111"
CHANNEL = "700000000000000020"
ALICE = "444444444444444444"
# Words no other message shares, so each message's fact is found by its word.
WORDS = [f"zq{n:02d}x" for n in range(60)]
WAIT_S = 120.0  # generous: the machine may be loaded

pytestmark = pytest.mark.slow


class KillableServer:
    """A PostgreSQL server of the test's own that it may kill and start again
    (the URL stays the same: the same socket directory)."""

    def __init__(self) -> None:
        self.parent = pg.data_parent()
        self.server = pg.start_server(self.parent / "data")

    def url(self, database: str) -> str:
        return pg.url(self.server, database)

    def kill(self) -> None:
        """SIGKILL the postmaster (its backends end when they see it gone)."""
        pid = self.server.get_pid()
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + WAIT_S
        while _alive(pid):
            if time.monotonic() > deadline:
                raise AssertionError("the killed postmaster did not go away")
            time.sleep(0.05)

    def restart(self) -> None:
        """Start it again (crash recovery). A start may fail while backends of
        the killed server still hold its shared memory: try again."""
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                self.server.ensure_postgres_running()
                with contextlib.closing(_connect(self.url("postgres"))) as con:
                    con.execute("SELECT 1")
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.restart()  # pgserver stops only a running server
            pg.stop_server(self.server)
        pg.remove_data(self.parent)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=5)


@pytest.fixture
def server() -> Iterator[KillableServer]:
    try:
        s = KillableServer()
    except pg.PgServerError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def database_url(server: KillableServer) -> str:
    return server.url(pg.create_database(server.server))


@dataclass
class World:
    discord: FakeDiscord
    openai: FakeOpenAI
    url: str
    tmp: Path
    started: list[Proc] = field(default_factory=list)

    async def start(self, command: str = "run", **env: str) -> tuple[Proc, str]:
        """``guildlore run`` (or ``dashboard``) on the database; (process,
        dashboard base URL)."""
        full = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "GUILDLORE_DATABASE_URL": self.url,
            "GUILDLORE_DATA_DIR": str(self.tmp / "data"),
            "DISCORD_TOKEN": "fake.discord.token",
            "GUILDLORE_DISCORD_API_BASE_URL": self.discord.base_url,
            "GUILDLORE_DISCORD_SYNC_COMMANDS": "false",
            "GUILDLORE_DASHBOARD_PORT": "0",
            "GUILDLORE_LLM_BASE_URL": self.openai.base_url,
            "OPENAI_API_KEY": "test",
            "GUILDLORE_LLM_EXTRACTOR": "llm",
            "GUILDLORE_LLM_MAX_RETRIES": "0",
            "GUILDLORE_EMBEDDING_PROVIDER": "none",
            "GUILDLORE_VOICE_ENABLED": "false",
            **env,
        }
        full.pop("GUILDLORE_CONFIG", None)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            command,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=full,
            cwd=self.tmp,
        )
        p = Proc("guildlore run", proc)
        self.started.append(p)
        listening = await p.line_with("dashboard listening on")
        port = re.search(r"'127\.0\.0\.1', (\d+)\)", listening)
        assert port, listening
        if command == "run":
            await p.line_with("logged in as")
        return p, f"http://127.0.0.1:{port.group(1)}/"


@pytest_asyncio.fixture
async def world(tmp_path: Path, database_url: str) -> AsyncIterator[World]:
    guilds = [FakeGuild(GUILD, "Outage Guild", [CHANNEL])]
    async with FakeDiscord(guilds) as discord_, FakeOpenAI(chat_handler=echo_facts_reply) as ai:
        w = World(discord_, ai, database_url, tmp_path)
        try:
            yield w
        finally:
            for p in w.started:
                if p.proc.returncode is None:
                    p.proc.kill()
                    await p.proc.wait()


async def send(world: World, words: list[str]) -> list[str]:
    ids = []
    for word in words:
        text = f"I keep the {word} lantern in the north tower"
        ids.append(
            await world.discord.send_message(GUILD, CHANNEL, ALICE, text, author_name="Alice")
        )
    return ids


def stored(url: str, words: list[str]) -> dict[str, tuple[int, list[str], int]]:
    """Per word: (message rows with it, their states, active facts with it),
    read straight from the database."""
    out: dict[str, tuple[int, list[str], int]] = {}
    with contextlib.closing(_connect(url)) as con:
        for word in words:
            states = [
                r[0]
                for r in con.execute(
                    "SELECT state FROM messages WHERE content LIKE %s", (f"%{word}%",)
                ).fetchall()
            ]
            facts = con.execute(
                "SELECT count(*) FROM memory_facts WHERE fact LIKE %s AND is_active = 1",
                (f"%{word}%",),
            ).fetchone()[0]
            out[word] = (len(states), states, int(facts))
    return out


def all_in_memory_once(url: str, words: list[str]) -> bool:
    try:
        found = stored(url, words)
    except Exception:  # the server is still starting
        return False
    return all(n == 1 and states == ["done"] and facts == 1 for n, states, facts in found.values())


async def health(base: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(f"{base}api/memory/health") as r:
        body = await r.json()
        assert r.status == 200, body
    return dict(body)


async def metrics(base: str) -> str:
    async with aiohttp.ClientSession() as http, http.get(f"{base}metrics") as r:
        assert r.status == 200, await r.text()
        return await r.text()


def _metric(text: str, name: str) -> float | None:
    m = re.search(rf"^guildlore_{name} (\S+)$", text, re.MULTILINE)
    return float(m.group(1)) if m else None


async def database_reachable(base: str) -> bool | None:
    try:
        return bool((await health(base))["database_connection"]["reachable"])
    except (aiohttp.ClientError, KeyError, AssertionError):
        return None


async def test_a_postgresql_restart_loses_no_message_and_health_shows_it(
    world: World, server: KillableServer
) -> None:
    proc, base = await world.start()
    before, flight, during, after = WORDS[:10], WORDS[10:20], WORDS[20:30], WORDS[30:40]
    await send(world, before)
    assert await eventually(lambda: all_in_memory_once(world.url, before), WAIT_S), proc.log()
    assert (await health(base))["database_connection"]["reachable"] is True

    # Killed while messages arrive: some are being acknowledged, extracted or
    # written when the server dies.
    await send(world, flight[:5])
    await asyncio.to_thread(server.kill)
    await send(world, flight[5:] + during)
    # Health sees the outage while it lasts (the dashboard answers without the database).
    assert await eventually(lambda: _is(database_reachable(base), False), WAIT_S), proc.log()
    down = await health(base)
    assert down["healthy"] is False
    assert down["database_connection"]["unreachable_since"], down
    assert any("database is unreachable" in w for w in down["warnings"]), down
    text = await metrics(base)
    assert _metric(text, "database_reachable") == 0, text
    # 0.0 right at the outage's start (a loaded machine gets here fast enough).
    unreachable_s = _metric(text, "database_unreachable_seconds")
    assert unreachable_s is not None and unreachable_s >= 0, text

    await asyncio.to_thread(server.restart)
    await send(world, after)
    everything = before + flight + during + after
    assert await eventually(lambda: all_in_memory_once(world.url, everything), WAIT_S), (
        json.dumps(stored(world.url, everything)) + "\n" + proc.log()
    )
    assert await eventually(lambda: _is(database_reachable(base), True), WAIT_S), proc.log()
    up = await health(base)
    assert up["healthy"] is True, up
    assert up["database_connection"]["reconnects"] >= 1, up
    text = await metrics(base)
    assert _metric(text, "database_reachable") == 1, text
    assert (_metric(text, "database_reconnects_total") or 0) >= 1, text
    # Nothing is stored twice: one row per message id, one fact per message.
    with contextlib.closing(_connect(world.url)) as con:
        rows = con.execute("SELECT count(*), count(DISTINCT id) FROM messages").fetchone()
    assert rows[0] == rows[1] == len(everything)
    assert await proc.stop() == 0, proc.log()


async def test_a_database_that_stays_away_ends_the_process_non_zero(
    world: World, server: KillableServer
) -> None:
    proc, base = await world.start(GUILDLORE_DATABASE_UNREACHABLE_EXIT_S="3")
    board, _ = await world.start("dashboard", GUILDLORE_DATABASE_UNREACHABLE_EXIT_S="3")
    await send(world, WORDS[30:32])
    assert await eventually(lambda: all_in_memory_once(world.url, WORDS[30:32]), WAIT_S)
    await asyncio.to_thread(server.kill)
    for p in (proc, board):
        code = await p.wait(WAIT_S)
        # 75: try again later — a supervisor starts it again.
        assert code == 75, p.log()
        why = [line for line in p.lines if "exiting with status" in line]
        assert len(why) == 1, p.log()
        assert "database unreachable since" in why[0], why
        assert "database.unreachable_exit_s = 3" in why[0], why
        assert not any("Traceback" in line for line in p.lines), p.log()


async def _is(value: Any, expected: Any) -> bool:
    return (await value) is expected


SAMPLE = ROOT / "bot" / "data" / "sample_guild.json"


async def _import(url: str, data: Path, **env: str) -> asyncio.subprocess.Process:
    full = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "GUILDLORE_DATABASE_URL": url,
        **env,
    }
    full.pop("GUILDLORE_CONFIG", None)
    args = [sys.executable, "-m", "bot", "import", str(SAMPLE), "--data-dir", str(data)]
    args += ["--json", "--extractor", "rules", "--embeddings", "none"]
    return await asyncio.create_subprocess_exec(
        *args,
        env=full,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


def _count(url: str, sql: str) -> int:
    try:
        with contextlib.closing(_connect(url)) as con:
            return int(con.execute(sql).fetchone()[0])
    except Exception:  # the schema is still being created
        return 0


def _memory_of(url: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(message id and state, subject and text of every active fact), sorted."""
    with contextlib.closing(_connect(url)) as con:
        messages = con.execute("SELECT id, state FROM messages ORDER BY id").fetchall()
        facts = con.execute(
            "SELECT subject, fact FROM memory_facts WHERE is_active = 1 ORDER BY subject, fact"
        ).fetchall()
    return [tuple(m) for m in messages], [tuple(f) for f in facts]


async def test_postgresql_killed_during_an_import_one_line_and_a_rerun_completes_it(
    tmp_path: Path, server: KillableServer, database_url: str
) -> None:
    proc = await _import(database_url, tmp_path / "d", GUILDLORE_DATABASE_UNREACHABLE_EXIT_S="3")
    try:
        assert await eventually(
            lambda: (
                proc.returncode is not None
                or _count(database_url, "SELECT count(*) FROM messages") >= 40
            ),
            WAIT_S,
        )
        assert proc.returncode is None, "the import ended before the server could be killed"
        await asyncio.to_thread(server.kill)
        out, err = await asyncio.wait_for(proc.communicate(), WAIT_S)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    lines = err.decode().splitlines()
    assert proc.returncode == 1, "\n".join(lines[-40:])
    gone = [line for line in lines if "the database went away during the import" in line]
    assert len(gone) == 1, "\n".join(lines[-40:])
    assert "run the import again; it resumes" in gone[0].lower(), gone
    assert not any("Traceback" in line for line in lines), "\n".join(lines[-40:])

    # The server back, the same import again completes the memory ...
    await asyncio.to_thread(server.restart)
    again = await _import(database_url, tmp_path / "d")
    out, err = await asyncio.wait_for(again.communicate(), WAIT_S * 2)
    assert again.returncode == 0, err.decode()[-3000:]
    # ... exactly as a clean import into a fresh database does.
    clean_url = server.url(pg.create_database(server.server))
    clean = await _import(clean_url, tmp_path / "clean")
    _, err = await asyncio.wait_for(clean.communicate(), WAIT_S * 2)
    assert clean.returncode == 0, err.decode()[-3000:]
    resumed, fresh = _memory_of(database_url), _memory_of(clean_url)
    assert resumed[0] == fresh[0]  # every message once, finished the same way
    assert {state for _, state in resumed[0]} <= {"done", "skipped"}
    assert resumed[1] == fresh[1]  # the same facts, none twice
