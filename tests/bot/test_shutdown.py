"""SIGTERM to a running ``guildlore run``: the ingest queue drains and the process exits 0.

The process runs with the test-only fake gateway (``GUILDLORE_FAKE_GATEWAY=1``,
see bot/runtime.py): messages arrive as JSON lines on stdin instead of from
Discord; everything behind that — settings, engine, LLM extractor, dashboard,
scheduler, signal handling, shutdown order — is the real thing. Extraction goes
to the fake OpenAI server with a delay, so messages are still being processed
when the signal arrives.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.runtime import FAKE_READY_LINE
from memory.db.sqlite.driver import connect
from tests.fakeopenai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
GUILD = "111111111111111111"
CHANNELS = ["333333333333333301", "333333333333333302", "333333333333333303"]

pytestmark = pytest.mark.slow


def _states(db: Path, ids: list[str]) -> dict[str, str]:
    con = connect(db, read_only=True)
    try:
        marks = ",".join("?" * len(ids))
        rows = con.execute(f"SELECT id, state FROM messages WHERE id IN ({marks})", ids)
        return {str(r[0]): str(r[1]) for r in rows.fetchall()}
    finally:
        con.close()


async def _line(stream: Any, timeout: float = 60.0) -> str:
    raw = await asyncio.wait_for(stream.readline(), timeout)
    return str(raw.decode().rstrip("\n")) if raw else "(end of output)"


async def test_sigterm_drains_the_queue_and_exits_zero(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.latency_s = 0.6
    data = tmp_path / "data"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "GUILDLORE_FAKE_GATEWAY": "1",
        "GUILDLORE_LLM_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": "test",
        "GUILDLORE_LLM_EXTRACTOR": "llm",
        "GUILDLORE_LLM_MAX_RETRIES": "0",
        "GUILDLORE_EMBEDDING_PROVIDER": "none",
        "GUILDLORE_INGEST_WORKERS": "1",
        "GUILDLORE_INGEST_DRAIN_TIMEOUT_S": "60",
        "GUILDLORE_DASHBOARD_PORT": "0",
    }
    env.pop("DISCORD_TOKEN", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "run",
        "--data-dir",
        str(data),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stderr_task = asyncio.create_task(proc.stderr.read())

    async def log_so_far() -> str:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        return (await stderr_task).decode()

    try:
        first = await _line(proc.stdout)
        assert first == FAKE_READY_LINE, await log_so_far()
        ids = [str(900_000_000_000_000_000 + i) for i in range(9)]
        for i, mid in enumerate(ids):
            line = {
                "id": mid,
                "guild_id": GUILD,
                "channel_id": CHANNELS[i % 3],
                "author_id": "444444444444444444",
                "author_name": "Alice",
                "content": f"I keep notebook number {i} in my garden shed",
            }
            proc.stdin.write((json.dumps(line) + "\n").encode())
        await proc.stdin.drain()
        for mid in ids:
            assert await _line(proc.stdout) == f"accepted {mid} queued"

        # Accepted means persisted; with one slow worker, most are not processed yet.
        before = _states(data / "guildlore.sqlite3", ids)
        assert set(before) == set(ids)
        assert sum(s != "done" for s in before.values()) >= 3

        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 90)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    log = (await stderr_task).decode()
    assert code == 0, log
    assert "SIGTERM received" in log
    assert "ingest queue drained" in log
    after = _states(data / "guildlore.sqlite3", ids)
    assert after == {mid: "done" for mid in ids}, log
    # Every message went through the (slow) extractor before the process exited.
    prompts = " ".join(json.dumps(r.body) for r in fake_openai.chat_requests())
    for i in range(len(ids)):
        assert f"notebook number {i} " in prompts
    assert (data / "memory_journal").is_dir()
