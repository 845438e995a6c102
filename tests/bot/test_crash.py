"""A child process ingesting is SIGKILLed mid-stream; nothing accepted is lost
and everything is processed exactly once after restart."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory.config import MemoryConfig
from memory.store import messages as store_messages
from tests.helpers import (
    GUILD,
    ScriptedExtractor,
    echo_fact,
    eventually,
    inspect_db,
    journal_text,
)

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from memory.config import MemoryConfig, EmbeddingConfig
    from memory.engine import Memory
    from tests.helpers import ScriptedExtractor, echo_fact, msg

    async def main():
        cfg = MemoryConfig.for_data_dir(Path(sys.argv[1]),
                                        embedding=EmbeddingConfig(provider="none"),
                                        database_url=sys.argv[2] or None)
        mem = await Memory.open(cfg, extractor=ScriptedExtractor(echo_fact, delay_s=0.02))
        for i in range(100000):
            out = await mem.ingest_message(
                msg(f"I keep note number {i:05d} in my garden shed", id=str(10**15 + i)))
            print(out.message_id, out.status, flush=True)
            await asyncio.sleep(0.002)

    asyncio.run(main())
    """
)


async def test_sigkill_mid_stream_loses_nothing_and_processes_once(
    make_memory: Any, tmp_path: Path, database_url_for: Callable[[Path], str | None]
) -> None:
    data = tmp_path / "d"
    url = database_url_for(data)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # Blocking calls are fine here: nothing runs on the loop until the child is dead.
    proc = subprocess.Popen(  # noqa: ASYNC220
        [sys.executable, "-c", CHILD, str(data), url or ""],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    acked: list[str] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while len(acked) < 150 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        mid, status = line.split()
        assert status == "queued"
        acked.append(mid)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert len(acked) >= 150, proc.stderr.read() if proc.stderr else ""

    ext = ScriptedExtractor(echo_fact)
    mem = await make_memory(extractor=ext, data_dir=data, embeddings="none")
    await eventually(lambda: mem.queue.idle() and mem.queue.stats.replayed > 0)
    assert await mem.drain(30)
    states = await mem.db.read(store_messages.message_states, acked)
    assert set(states) == set(acked), "every acknowledged message is in `messages`"
    assert {s for s, _ in states.values()} == {"done"}

    journal = await journal_text(mem)
    for mid in acked:
        n = int(mid) - 10**15
        assert journal.count(f"I keep note number {n:05d} in my garden shed") == 1, mid

    facts = await mem.facts.find(GUILD, limit=500, active=None)
    texts = [f.fact for f in facts]
    assert len(texts) == len(set(texts))
    for f in facts:
        events = [h.event for h in await mem.facts.history(GUILD, f.id)]
        assert events.count("add") == 1 and "update" not in events, (f.fact, events)


SAMPLE = ROOT / "bot" / "data" / "sample_guild.json"


def _facts_without_vector(db: MemoryConfig) -> tuple[int, int]:
    """(active facts, active facts with no vector of any model)."""
    con = inspect_db(db)
    try:
        active, missing = con.execute(
            "SELECT count(*), sum(CASE WHEN NOT EXISTS (SELECT 1 FROM memory_fact_vectors v "
            "WHERE v.fact_id = f.id) THEN 1 ELSE 0 END) FROM memory_facts f WHERE f.is_active = 1"
        ).fetchone()
    finally:
        con.close()
    return int(active), int(missing or 0)


def _copy_database(url: str, to_url: str) -> None:
    """Make ``to_url``'s database a copy of ``url``'s (PostgreSQL)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    source, target = conninfo_to_dict(url)["dbname"], conninfo_to_dict(to_url)["dbname"]
    with psycopg.connect(url, dbname="postgres", autocommit=True) as con:
        con.execute(f'DROP DATABASE "{target}" WITH (FORCE)')
        # A template must have no session: the killed process's may not have
        # ended yet.
        deadline = time.monotonic() + 30
        while True:
            con.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (source,),
            )
            try:
                con.execute(f'CREATE DATABASE "{target}" TEMPLATE "{source}"')
                return
            except psycopg.errors.ObjectInUse:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


async def _fake_server(*flags: str) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.fakeopenai", *flags, stdout=asyncio.subprocess.PIPE, cwd=ROOT
    )
    assert proc.stdout is not None
    url = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
    return proc, url


async def test_sigkill_mid_import_then_every_fact_gets_its_vector(
    make_memory: Any, tmp_path: Path, database_url_for: Callable[[Path], str | None]
) -> None:
    """Facts written before the kill whose vectors were still queued: the next
    start and the next import both embed them."""
    import openai

    from memory.config import EmbeddingConfig
    from memory.engine import Memory

    data = tmp_path / "d"
    copy = tmp_path / "copy"
    url = database_url_for(data)
    db = MemoryConfig.for_data_dir(data, database_url=url)
    # Slow embeddings keep written facts waiting for their vectors.
    slow, fake_url = await _fake_server("--latency", "1.5")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OPENAI_API_KEY": "test",
        "OPENAI_BASE_URL": fake_url,
    }
    if url:
        env["GUILDLORE_DATABASE_URL"] = url
    args = [sys.executable, "-m", "bot", "import", str(SAMPLE), "--data-dir", str(data)]
    args += ["--json", "--extractor", "rules", "--embeddings", "openai"]
    proc = await asyncio.create_subprocess_exec(
        *args, env=env, cwd=ROOT, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.returncode is None, "the import ended before it could be killed"
            if url or db.db_path.exists():
                try:
                    _, missing = _facts_without_vector(db)
                except Exception:  # the schema is still being created
                    missing = 0
                if missing >= 3:
                    break
            await asyncio.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    finally:
        slow.terminate()
        await slow.wait()
    active, missing = _facts_without_vector(db)
    assert active > 0 and missing > 0, "the kill must leave facts without vectors"
    # On PostgreSQL the folder may hold nothing yet (no file is the database).
    data.mkdir(parents=True, exist_ok=True)
    shutil.copytree(data, copy)
    copy_url = database_url_for(copy)
    if url and copy_url:
        _copy_database(url, copy_url)
    # The doctor counts facts without a vector, in the file or in PostgreSQL.
    doctor = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "bot", "doctor", "--offline", "--data-dir", str(data)],
        env={**env, "GUILDLORE_EMBEDDING_PROVIDER": "openai"},
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    report = (await asyncio.wait_for(doctor.communicate(), 120))[0].decode()
    assert f"warn  fact vectors: {missing} active facts have no vector" in report, report
    assert "guildlore reindex" in report

    fast, fake_url = await _fake_server()
    try:
        # The next start of the engine embeds them ...
        client = openai.AsyncOpenAI(api_key="test", base_url=fake_url, max_retries=0)
        cfg = MemoryConfig.for_data_dir(
            data, embedding=EmbeddingConfig(provider="openai"), database_url=url
        )
        mem = await Memory.open(cfg, embedding_client=client)
        try:
            assert await mem.settle(timeout=60)
        finally:
            await mem.close()
            await client.close()
        active, missing = _facts_without_vector(db)
        assert active > 0 and missing == 0

        # ... and so does the next import.
        rerun = await asyncio.create_subprocess_exec(
            *[a if a != str(data) else str(copy) for a in args],
            env={**env, "OPENAI_BASE_URL": fake_url}
            | ({"GUILDLORE_DATABASE_URL": copy_url} if copy_url else {}),
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(rerun.communicate(), 300)
        assert rerun.returncode == 0, err.decode()[-2000:]
        active, missing = _facts_without_vector(
            MemoryConfig.for_data_dir(copy, database_url=copy_url)
        )
        assert active > 0 and missing == 0
    finally:
        fast.terminate()
        await fast.wait()
