"""The action log: every kind of the observability contract is written, and the
log is pruned by age and by row count so it cannot grow forever."""

from __future__ import annotations

from typing import Any

from memory.config import ActionLogConfig


async def _messages(mem: Any) -> list[str]:
    return [e.message for e in reversed(await mem.action_log(limit=500))]


async def test_prune_drops_rows_older_than_the_keep_days(make_memory: Any, clock: Any) -> None:
    mem = await make_memory(
        embeddings="none", clock=clock, action_log=ActionLogConfig(keep_days=7, max_rows=0)
    )
    await mem.log_action("bot_error", "old one")
    clock.advance(days=3)
    await mem.log_action("bot_error", "old two")
    clock.advance(days=5)
    await mem.log_action("bot_error", "recent")
    clock.advance(days=1)
    # "old one" is 9 days old, "old two" 6 days, "recent" 1 day.
    assert await mem.prune_action_log() == 1
    assert await _messages(mem) == ["old two", "recent"]
    clock.advance(days=2)
    assert await mem.prune_action_log() == 1
    assert await _messages(mem) == ["recent"]


async def test_prune_keeps_the_newest_rows_up_to_the_cap(make_memory: Any, clock: Any) -> None:
    mem = await make_memory(
        embeddings="none", clock=clock, action_log=ActionLogConfig(keep_days=0, max_rows=3)
    )
    for i in range(7):
        await mem.log_action("bot_error", f"row {i}")
    assert await mem.prune_action_log() == 4
    assert await _messages(mem) == ["row 4", "row 5", "row 6"]
    assert await mem.prune_action_log() == 0


async def test_prune_deletes_a_large_backlog_in_chunks(make_memory: Any, clock: Any) -> None:
    mem = await make_memory(
        embeddings="none",
        clock=clock,
        action_log=ActionLogConfig(keep_days=1, max_rows=0, prune_chunk=100),
    )
    await mem.db.write(
        lambda con: con.executemany(
            "INSERT INTO action_log (kind, message, created_at) VALUES ('bot_error', ?, ?)",
            [(f"old {i}", "2020-01-01T00:00:00.000Z") for i in range(1050)],
        )
    )
    await mem.log_action("bot_error", "today")
    assert await mem.prune_action_log() == 1050
    assert await _messages(mem) == ["today"]


async def test_zero_settings_keep_everything(make_memory: Any, clock: Any) -> None:
    mem = await make_memory(
        embeddings="none", clock=clock, action_log=ActionLogConfig(keep_days=0, max_rows=0)
    )
    await mem.log_action("bot_error", "ancient")
    clock.advance(days=4000)
    assert await mem.prune_action_log() == 0
    assert await _messages(mem) == ["ancient"]
