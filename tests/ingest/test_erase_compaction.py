"""The rewrite of the database file after an erase is debounced: a burst of
Discord deletes costs one VACUUM, a pending one runs at settle and at close,
and one a crash kept from running runs at the next start."""

from __future__ import annotations

from typing import Any

from memory.store import lifecycle_events as store_events
from tests.helpers import (
    GUILD,
    ScriptedExtractor,
    database_url,
    echo_fact,
    eventually,
    every_cell_text,
    inspect_db,
    msg,
)
from tests.roles.test_lifecycle import SECRET, count


async def _stored(mem: Any, n: int) -> list[str]:
    ids = []
    for i in range(n):
        m = msg(f"I keep a {SECRET} number {i} in my garden")
        assert await (await mem.ingest_message(m)).wait()
        ids.append(m.id)
    await mem.settle()
    return ids


def _on_disk(mem: Any) -> bool:
    """Whether the erased text is still stored: in the SQLite file or its WAL
    byte for byte; on PostgreSQL, in any table."""
    if database_url(mem):
        con = inspect_db(mem)
        try:
            return any(SECRET in text for text in every_cell_text(con))
        finally:
            con.close()
    files = [p for p in mem.config.db_path.parent.rglob("*") if p.is_file()]
    return any(SECRET.encode() in p.read_bytes() for p in files)


async def test_a_burst_of_deletes_costs_one_rewrite(make_memory: Any) -> None:
    mem = await make_memory(
        extractor=ScriptedExtractor(fn=echo_fact), embeddings="none", compaction_delay_s=3600
    )
    ids = await _stored(mem, 6)
    runs = mem.compactor.runs

    for mid in ids:
        report = await mem.delete_messages(GUILD, [mid])
        assert report.messages == 1
        # Durable at once: gone from every query before the rewrite.
        assert await mem.get_message(GUILD, mid) is None
    assert mem.compactor.runs == runs and mem.compactor.pending
    await mem.compactor.flush()

    assert mem.compactor.runs == runs + 1
    assert not mem.compactor.pending
    assert not _on_disk(mem)
    assert await mem.db.read(store_events.compaction_owed) is None


async def test_the_rewrite_runs_by_itself_after_the_delay(make_memory: Any) -> None:
    mem = await make_memory(
        extractor=ScriptedExtractor(fn=echo_fact), embeddings="none", compaction_delay_s=0.05
    )
    [mid] = await _stored(mem, 1)
    runs = mem.compactor.runs

    await mem.delete_messages(GUILD, [mid])
    await eventually(lambda: not mem.compactor.pending)

    assert mem.compactor.runs == runs + 1
    assert not _on_disk(mem)


async def test_a_pending_rewrite_runs_at_settle_and_at_close(make_memory: Any) -> None:
    mem = await make_memory(
        extractor=ScriptedExtractor(fn=echo_fact), embeddings="none", compaction_delay_s=3600
    )
    ids = await _stored(mem, 2)
    runs = mem.compactor.runs

    await mem.delete_messages(GUILD, [ids[0]])
    assert mem.compactor.pending and mem.compactor.runs == runs
    await mem.settle()
    assert mem.compactor.runs == runs + 1 and not mem.compactor.pending

    await mem.delete_messages(GUILD, [ids[1]])
    assert mem.compactor.pending
    await mem.close()
    assert not _on_disk(mem)


async def test_a_rewrite_owed_before_a_crash_runs_at_the_next_start(
    make_memory: Any, tmp_path: Any
) -> None:
    data = tmp_path / "d"
    mem = await make_memory(extractor=ScriptedExtractor(fn=echo_fact), data_dir=data)
    # What a run killed between an erase's commit and the rewrite leaves.
    await mem.db.write(store_events.owe_compaction, "2026-11-22T12:00:00.000Z")
    await mem.close()
    assert count(mem, "SELECT count(*) FROM lifecycle_events WHERE kind = 'compact'") == 1

    again = await make_memory(extractor=ScriptedExtractor(fn=echo_fact), data_dir=data)
    assert again.compactor.pending
    await again.settle()
    assert again.compactor.runs == 1
    assert count(again, "SELECT count(*) FROM lifecycle_events") == 0
