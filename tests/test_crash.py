"""A child process ingesting is SIGKILLed mid-stream; nothing accepted is lost
and everything is processed exactly once after restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from memory.store import messages as store_messages
from tests.helpers import GUILD, ScriptedExtractor, echo_fact, eventually

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from memory.config import MemoryConfig, EmbeddingConfig
    from memory.engine import Memory
    from tests.helpers import ScriptedExtractor, echo_fact, msg

    async def main():
        cfg = MemoryConfig.for_data_dir(Path(sys.argv[1]),
                                        embedding=EmbeddingConfig(provider="none"))
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
    make_memory: Any, tmp_path: Path
) -> None:
    data = tmp_path / "d"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # Blocking calls are fine here: nothing runs on the loop until the child is dead.
    proc = subprocess.Popen(  # noqa: ASYNC220
        [sys.executable, "-c", CHILD, str(data)],
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
    assert await mem.drain(10)
    states = await mem.db.read(store_messages.message_states, acked)
    assert set(states) == set(acked), "every acknowledged message is in `messages`"
    assert {s for s, _ in states.values()} == {"done"}

    journal = "".join(p.read_text() for p in mem.journal.daily_files())
    for mid in acked:
        n = int(mid) - 10**15
        assert journal.count(f"I keep note number {n:05d} in my garden shed") == 1, mid

    facts = await mem.facts.find(GUILD, limit=500, active=None)
    texts = [f.fact for f in facts]
    assert len(texts) == len(set(texts))
    for f in facts:
        events = [h.event for h in await mem.facts.history(GUILD, f.id)]
        assert events.count("add") == 1 and "update" not in events, (f.fact, events)
