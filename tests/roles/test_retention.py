"""``Memory.retention`` on its own: timers survive a restart, and one timer that
cannot run now does not hold the others back."""

from __future__ import annotations

from typing import Any

from memory.store.retention import RetentionTimer
from tests.conftest import FakeClock
from tests.helpers import ALICE, BOB, GUILD, ScriptedExtractor, echo_fact, msg


async def _two_members(mem: Any) -> None:
    await mem.guilds.set_setting(GUILD, "member_leave_policy", "forget:1d")
    for author, name in ((ALICE, "Alice"), (BOB, "Bob")):
        m = msg(f"{name} keeps bees in the garden", author=author, name=name)
        assert await (await mem.ingest_message(m)).wait()
    await mem.settle()


async def _subjects(mem: Any) -> set[str]:
    return {f.subject for f in await mem.facts.find(GUILD)}


async def test_a_timer_survives_a_restart(
    make_memory: Any, clock: FakeClock, tmp_path: Any
) -> None:
    data = tmp_path / "d"
    mem = await make_memory(extractor=ScriptedExtractor(fn=echo_fact), clock=clock, data_dir=data)
    await _two_members(mem)
    await mem.retention.member_left(GUILD, ALICE)
    await mem.close()

    clock.advance(days=2)
    again = await make_memory(extractor=ScriptedExtractor(fn=echo_fact), clock=clock, data_dir=data)
    done = await again.retention.run_due()

    assert done.forgotten == [(GUILD, ALICE)]
    assert await _subjects(again) == {BOB}


async def test_a_timer_that_cannot_run_now_waits_and_the_others_run(
    make_memory: Any, clock: FakeClock
) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(fn=echo_fact), clock=clock)
    await _two_members(mem)
    await mem.retention.member_left(GUILD, ALICE)
    await mem.retention.member_left(GUILD, BOB)
    clock.advance(days=2)

    async def discord_down_for_alice(timer: RetentionTimer) -> bool:
        if timer.user_id == ALICE:
            raise ConnectionError("discord unreachable")
        return True

    done = await mem.retention.run_due(discord_down_for_alice)

    assert done.forgotten == [(GUILD, BOB)]
    assert await _subjects(mem) == {ALICE}
    [left] = await mem.retention.timers()
    assert left.user_id == ALICE

    done = await mem.retention.run_due()
    assert done.forgotten == [(GUILD, ALICE)]
    assert await mem.retention.timers() == []
