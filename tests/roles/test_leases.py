"""Job leases: work that must run once across processes sharing a database,
and the per-guild jobs that run only where their guild's shard is held."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.jobs import Jobs
from bot.shards import ShardClaims, ShardsTaken, claim, lease_names
from memory.clock import iso
from memory.errors import InvalidInput
from memory.ownership import GuildOwnership
from memory.roles.leases import JobLeases
from memory.store import leases as store_leases
from memory.store.leases import process_holder
from tests.conftest import FakeClock
from tests.helpers import eventually
from tests.ingest.test_ownership import guild_on


async def two_processes(
    make_memory: Callable[..., Any], tmp_path: Path, clock: FakeClock
) -> tuple[Any, Any]:
    """Two engines on one database file, as two processes holding shard 0
    and shard 1 of 2 would have."""
    data = tmp_path / "data"
    first = await make_memory(
        data_dir=data, embeddings="none", clock=clock, ownership=GuildOwnership(2, frozenset({0}))
    )
    second = await make_memory(
        data_dir=data, embeddings="none", clock=clock, ownership=GuildOwnership(2, frozenset({1}))
    )
    # One process names every engine it opens alike; these stand for two.
    assert first.leases.holder == second.leases.holder == process_holder()
    second.leases.holder = "other-host:1:0a0b0c0d"
    return first, second


def test_holder_names_the_host_and_process() -> None:
    host, pid, rand = process_holder().split(":")
    assert host and int(pid) == os.getpid() and len(rand) == 8


async def test_acquire_renew_release(
    make_memory: Callable[..., Any], tmp_path: Path, clock: FakeClock
) -> None:
    a, b = await two_processes(make_memory, tmp_path, clock)
    assert a.leases.holder != b.leases.holder
    assert await a.leases.acquire("snapshot", 60)
    assert not await b.leases.acquire("snapshot", 60)
    # The holder acquires again: that renews it.
    assert await a.leases.acquire("snapshot", 60)
    clock.advance(seconds=50)
    assert await a.leases.renew("snapshot", 60)
    clock.advance(seconds=50)  # 100 s after the first take, 50 s after the renewal
    assert not await b.leases.acquire("snapshot", 60)
    held = await b.leases.all()
    assert [(x.name, x.holder) for x in held] == [("snapshot", a.leases.holder)]
    # Only the holder can give it up.
    assert not await b.leases.release("snapshot")
    assert await a.leases.release("snapshot")
    assert await b.leases.acquire("snapshot", 60)
    assert not await a.leases.renew("snapshot", 60)


async def test_an_expired_lease_is_taken_over(
    make_memory: Callable[..., Any], tmp_path: Path, clock: FakeClock
) -> None:
    """A holder that stops renewing (a crash) loses the lease when it expires."""
    a, b = await two_processes(make_memory, tmp_path, clock)
    assert await a.leases.acquire("journal_rollover", 30)
    clock.advance(seconds=29)
    assert not await b.leases.acquire("journal_rollover", 30)
    clock.advance(seconds=1)
    assert await b.leases.acquire("journal_rollover", 30)
    # The old holder finds out when it renews.
    assert not await a.leases.renew("journal_rollover", 30)
    assert not await a.leases.acquire("journal_rollover", 30)


async def test_two_holders_contend_one_wins(
    make_memory: Callable[..., Any], tmp_path: Path, clock: FakeClock
) -> None:
    a, b = await two_processes(make_memory, tmp_path, clock)
    for round_ in range(20):
        name = f"race-{round_}"
        got = await asyncio.gather(a.leases.acquire(name, 60), b.leases.acquire(name, 60))
        assert sorted(got) == [False, True]


async def test_a_lease_needs_a_positive_time(make_memory: Callable[..., Any]) -> None:
    mem = await make_memory(embeddings="none")
    leases = JobLeases(mem.db, mem.clock, holder="test:1:x")
    with pytest.raises(InvalidInput):
        await leases.acquire("x", 0)


def _job(jobs: Jobs, name: str) -> Any:
    assert jobs.scheduler is not None
    return {j.id: j for j in jobs.scheduler.get_jobs()}[name].func


async def test_run_once_jobs_run_in_the_lease_holder_only(
    make_memory: Callable[..., Any], tmp_path: Path, clock: FakeClock
) -> None:
    a, b = await two_processes(make_memory, tmp_path, clock)
    ja = Jobs(a, snapshot_interval_s=300, reindex_interval_min=0)
    jb = Jobs(b, snapshot_interval_s=300, reindex_interval_min=0)
    ja.start()
    jb.start()
    try:
        for name in ("snapshot", "action_log_prune", "journal_rollover"):
            await _job(ja, name)()
            await _job(jb, name)()
            assert ja.runs.get(name) == 1, name
            assert name not in jb.runs, name
            assert b.leases.skipped[name] == 1
        # The holder's next round renews; the other still skips.
        clock.advance(seconds=300)
        await _job(ja, "snapshot")()
        await _job(jb, "snapshot")()
        assert (ja.runs["snapshot"], jb.runs.get("snapshot")) == (2, None)
        # The holder stops (a crash: no release): the other takes over once it expires.
        clock.advance(seconds=300 * 1.5)
        await _job(jb, "snapshot")()
        assert jb.runs["snapshot"] == 1
        await _job(ja, "snapshot")()
        assert ja.runs["snapshot"] == 2
        assert a.leases.skipped["snapshot"] == 1
    finally:
        await ja.stop()
        await jb.stop()


async def test_per_guild_jobs_run_only_for_owned_guilds(
    make_memory: Callable[..., Any], tmp_path: Path, clock: FakeClock
) -> None:
    """Retention timers of guilds on both shards: each process runs its own."""
    a, b = await two_processes(make_memory, tmp_path, clock)
    g0, g1 = guild_on(0, 2), guild_on(1, 2)
    for g in (g0, g1):
        await a.guilds.set_setting(g, "member_leave_policy", "forget:1d")
        assert await a.retention.member_left(g, "444444444444444444") is not None
    clock.advance(days=1, minutes=1)
    ja, jb = Jobs(a, reindex_interval_min=0), Jobs(b, reindex_interval_min=0)
    await ja.retention()
    assert [t.guild_id for t in await a.retention.timers()] == [g1]
    await jb.retention()
    assert await a.retention.timers() == []


async def test_a_shard_is_claimed_by_one_process(
    make_memory: Callable[..., Any], tmp_path: Path, clock: FakeClock
) -> None:
    a, b = await two_processes(make_memory, tmp_path, clock)
    both = GuildOwnership(2, frozenset({0, 1}))
    assert lease_names(GuildOwnership()) == []
    assert await claim(a, GuildOwnership(2, frozenset({0})), 60) == ["shard:0/2"]
    with pytest.raises(ShardsTaken, match=r"shard:0/2 by .*:\d+:"):
        await claim(b, both, 0.2, margin_s=0)
    # The shard it did get (1) was given back with the refusal.
    held = {x.name: x.holder for x in await a.leases.all()}
    assert held == {"shard:0/2": a.leases.holder}
    # The first process crashes (no renewal): its claim expires, the shard moves.
    clock.advance(seconds=61)
    assert await claim(b, both, 60, margin_s=0) == ["shard:0/2", "shard:1/2"]


async def test_a_claim_taken_over_stops_the_process(
    make_memory: Callable[..., Any], tmp_path: Path, clock: FakeClock
) -> None:
    a, b = await two_processes(make_memory, tmp_path, clock)
    names = await claim(a, GuildOwnership(2, frozenset({1})), 0.3)
    lost = asyncio.Event()
    claims = ShardClaims(a, names, 0.3, lost.set)
    claims.start()
    # A stall longer than the lease: another process took the shard meanwhile.
    clock.advance(seconds=1)
    assert await b.leases.acquire("shard:1/2", 60)
    async with asyncio.timeout(10):
        await lost.wait()
    await claims.release()
    assert [x.holder for x in await b.leases.all()] == [b.leases.holder]


async def test_claims_are_renewed_and_released(
    make_memory: Callable[..., Any], tmp_path: Path, clock: FakeClock
) -> None:
    a, b = await two_processes(make_memory, tmp_path, clock)
    names = await claim(a, GuildOwnership(2, frozenset({0})), 0.3)
    claims = ShardClaims(a, names, 0.3, lambda: None)
    claims.start()
    assert await eventually(lambda: claims.renewals >= 2)
    assert not await b.leases.acquire("shard:0/2", 60)
    await claims.release()
    assert await b.leases.acquire("shard:0/2", 60)


async def test_database_rewrites_take_turns_across_processes(
    make_memory: Callable[..., Any],
) -> None:
    """The rewrite after an erase takes the ``compaction`` lease: put off while
    another process rewrites, and an erase that waits for its rewrite waits
    for the other's to end."""
    mem = await make_memory(embeddings="none")
    other = "other-host:1:0a0b0c0d"
    now = datetime.now(UTC)
    until = now + timedelta(seconds=600)
    assert await mem.db.write(store_leases.acquire, "compaction", other, iso(now), iso(until))
    mem.compactor.request()
    assert await mem.compactor.flush() is None
    assert (mem.compactor.deferred, mem.compactor.runs) == (1, 0)

    async def other_finishes() -> None:
        await asyncio.sleep(0.3)
        await mem.db.write(store_leases.release, "compaction", other)

    finishing = asyncio.create_task(other_finishes())
    await mem.compactor.run_now()
    await finishing
    assert mem.compactor.runs == 1
    assert [x.name for x in await mem.leases.all()] == []
