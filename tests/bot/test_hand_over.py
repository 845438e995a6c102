"""A clean stop hands over: the run-once jobs' leases are given back (another
process's next round runs them, instead of waiting up to an hour and a half
for them to expire), and ingest stops before the shard claims go."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.jobs import Jobs
from tests.conftest import FakeClock
from tests.helpers import GUILD, ScriptedExtractor, echo_fact, eventually, msg
from tests.roles.test_leases import _job, two_processes

RUN_ONCE = ("snapshot", "action_log_prune", "journal_rollover")


async def test_a_clean_stop_gives_the_job_leases_back(
    make_memory: Callable[..., Any], tmp_path: Path, clock: FakeClock
) -> None:
    a, b = await two_processes(make_memory, tmp_path, clock)
    ja = Jobs(a, snapshot_interval_s=300, reindex_interval_min=0)
    jb = Jobs(b, snapshot_interval_s=300, reindex_interval_min=0)
    ja.start()
    jb.start()
    try:
        for name in RUN_ONCE:
            await _job(ja, name)()
            await _job(jb, name)()
            assert name not in jb.runs, name  # a holds it
        # b holds a lease of its own, which a's stop leaves alone.
        assert await b.leases.acquire("reindex", 60)
        await ja.stop()
        held = {x.name: x.holder for x in await b.leases.all()}
        assert held == {"reindex": b.leases.holder}
        # No time passes: b's next round of each job runs at once.
        for name in RUN_ONCE:
            await _job(jb, name)()
            assert jb.runs.get(name) == 1, name
    finally:
        await ja.stop()
        await jb.stop()


async def test_ingest_stops_for_good_before_the_engine_closes(
    make_memory: Callable[..., Any], tmp_path: Path
) -> None:
    """What the runtime does before it gives its shard claims back: after
    ``stop_ingest`` nothing is taken or processed here — a message still
    being extracted stays unfinished in the inbox, for the process that takes
    the shard over, which processes it once — and ``close`` still works."""
    data = tmp_path / "shared"
    slow = ScriptedExtractor(fn=echo_fact, delay_s=30)
    mem = await make_memory(extractor=slow, embeddings="none", data_dir=data)
    outcome = await mem.ingest_message(msg("I keep bees on the roof"))
    assert await eventually(lambda: bool(slow.calls))  # being extracted
    assert not await mem.stop_ingest(0.1)  # not drained: the extraction was cut off
    assert await mem.stop_ingest(0.1)  # once is enough; again is harmless
    late = await mem.ingest_message(msg("I keep goats in the yard"))
    assert late.status == "rejected"
    stored = await mem.get_message(GUILD, outcome.message_id)
    assert stored is not None and stored.state == "pending"
    await mem.close()

    taker = await make_memory(
        extractor=ScriptedExtractor(fn=echo_fact), embeddings="none", data_dir=data
    )
    assert await eventually(lambda: _done(taker, outcome.message_id))
    assert [f.fact for f in await taker.facts.find(GUILD)] == [
        "Alice said I keep bees on the roof."
    ]


async def _done(mem: Any, message_id: str) -> bool:
    stored = await mem.get_message(GUILD, message_id)
    return stored is not None and stored.state == "done"
