"""A child process is SIGKILLed after it received a Discord delete and before
it applied it; the next start applies it, exactly once, and leaves no byte of
the deleted text behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory.config import MemoryConfig
from tests.helpers import GUILD, ScriptedExtractor, echo_fact, fts_count, inspect_db
from tests.roles.test_lifecycle import all_text, journal_text, marks_deletions

ROOT = Path(__file__).resolve().parents[2]
N = 12
APPLIED = range(0, 4)  # deleted before the kill
RECEIVED = range(4, 7)  # received, not applied, when the kill comes


def secret(i: int) -> str:
    return f"quokkasecret{i:03d}x"


CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from memory.config import MemoryConfig
    from memory.engine import Memory
    from tests.helpers import GUILD, ScriptedExtractor, echo_fact, msg

    async def main():
        cfg = MemoryConfig.for_data_dir(Path(sys.argv[1]), database_url=sys.argv[5] or None)
        mem = await Memory.open(cfg, extractor=ScriptedExtractor(echo_fact))
        n, applied, received = int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4].split(",")
        ids = [str(10**15 + i) for i in range(n)]
        for i, mid in enumerate(ids):
            await mem.ingest_message(msg(f"I hid a quokkasecret{i:03d}x in my shed", id=mid))
        await mem.settle()
        for i, mid in enumerate(ids):
            hits = await mem.search(GUILD, f"quokkasecret{i:03d}x", scope="all")
            await mem.traces.record(GUILD, "c1", mid, retrieved=hits)
        for i in applied:
            await mem.delete_messages(GUILD, [ids[int(i)]])
        await mem.lifecycle.receive_delete(GUILD, [ids[int(i)] for i in received])
        print("received", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


def rows(db: MemoryConfig, sql: str) -> list[Any]:
    con = inspect_db(db)
    try:
        return [tuple(r) for r in con.execute(sql).fetchall()]
    finally:
        con.close()


def fts_rows(db: MemoryConfig, word: str) -> int:
    con = inspect_db(db)
    try:
        return fts_count(con, "messages_fts", word)
    finally:
        con.close()


async def test_sigkill_between_receiving_a_delete_and_applying_it(
    make_memory: Any, tmp_path: Path, database_url_for: Callable[[Path], str | None]
) -> None:
    data = tmp_path / "d"
    url = database_url_for(data)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [",".join(str(i) for i in APPLIED), ",".join(str(i) for i in RECEIVED), url or ""]
    # Blocking calls are fine here: nothing runs on the loop until the child is dead.
    proc = subprocess.Popen(  # noqa: ASYNC220
        [sys.executable, "-c", CHILD, str(data), str(N), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    line = ""
    while time.monotonic() < deadline and not line:
        line = proc.stdout.readline().strip()
        if not line and proc.poll() is not None:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert line == "received", proc.stderr.read() if proc.stderr else ""

    db = MemoryConfig.for_data_dir(data, database_url=url)
    # The kill came between the two halves: the delete is recorded, the
    # messages and what they hold up are still there.
    assert rows(db, "SELECT kind FROM lifecycle_events WHERE kind = 'delete'") == [("delete",)]
    stored = {r[0] for r in rows(db, "SELECT content FROM messages")}
    assert all(any(secret(i) in c for c in stored) for i in RECEIVED)
    traced = rows(db, "SELECT count(*) FROM memory_traces WHERE message_id IS NOT NULL")[0][0]
    assert traced > 0

    mem = await make_memory(extractor=ScriptedExtractor(echo_fact), data_dir=data)
    assert await mem.settle(30)
    gone = [*APPLIED, *RECEIVED]
    ids = [str(10**15 + i) for i in gone]
    for mid in ids:
        assert await mem.get_message(GUILD, mid) is None
    text = await all_text(mem)
    for i in range(N):
        assert (secret(i) in text) == (i not in gone), i
    marks = ",".join(f"'{m}'" for m in ids)
    assert rows(db, f"SELECT count(*) FROM memory_traces WHERE message_id IN ({marks})") == [(0,)]
    seqs = "SELECT seq FROM messages"
    assert rows(db, f"SELECT count(*) FROM message_vectors WHERE message_seq NOT IN ({seqs})") == [
        (0,)
    ]
    assert fts_rows(db, secret(RECEIVED[0])) == 0
    assert fts_rows(db, secret(N - 1)) == 1
    marks = len(gone) if marks_deletions(mem) else 0
    assert (await journal_text(mem)).count("[deleted]") == marks
    # Exactly once: one retract per fact, and the action log counts each message once.
    retracts = rows(
        db, "SELECT fact_id, count(*) FROM fact_history WHERE event = 'retract' GROUP BY 1"
    )
    assert len(retracts) == len(gone) and {n for _, n in retracts} == {1}
    logged = rows(db, "SELECT detail FROM action_log WHERE kind = 'memory_message_deleted'")
    assert sum(json.loads(d)["messages"] for (d,) in logged) == len(gone)
    assert rows(db, "SELECT count(*) FROM lifecycle_events") == [(0,)]
    await mem.close()

    # The raw bytes too: the database file, its WAL, the journals, MEMORY.md.
    for path in [p for p in data.rglob("*") if p.is_file()]:
        blob = path.read_bytes()
        for i in gone:
            assert secret(i).encode() not in blob, (path, i)

    # A second start has nothing left to apply.
    again = await make_memory(extractor=ScriptedExtractor(echo_fact), data_dir=data)
    assert await again.settle(30)
    logged_again = rows(db, "SELECT detail FROM action_log WHERE kind = 'memory_message_deleted'")
    assert logged_again == logged
    assert (await journal_text(again)).count("[deleted]") == marks
