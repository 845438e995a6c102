"""A budget's count reads the guild's pins first and each pinned fact by its
id: SQLite's planner (no statistics) otherwise walked every current fact of
the guild looking for a pin of each (100 ms a write at 100k facts)."""

from __future__ import annotations

from typing import Any

from memory.store import budgets as store_budgets
from memory.store.budgets import Scope
from memory.store.facts import upsert_fact
from tests.helpers import ALICE, GUILD

NOW = "2026-11-29T00:00:00.000Z"


def _facts(con: Any) -> list[int]:
    return [
        upsert_fact(
            con,
            guild_id=GUILD,
            channel_id=None,
            subject=ALICE,
            fact=f"fact number {i}",
            fact_type="other",
            evidence=None,
            source_message_id=None,
            confidence=0.6,
            now=NOW,
            actor="test",
        ).fact.id
        for i in range(4)
    ]


async def test_pinned_facts_are_left_out_of_the_count(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    ids = await mem.db.write(_facts)
    scope = Scope(GUILD, "guild")
    before = await mem.db.read(store_budgets.count, scope)
    await mem.db.write(store_budgets.pin, GUILD, ids[0], "test", NOW)
    assert await mem.db.read(store_budgets.count, scope) == before - 1


async def test_the_pinned_count_starts_from_the_pins_on_sqlite(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    ids = await mem.db.write(_facts)
    await mem.db.write(store_budgets.pin, GUILD, ids[0], "test", NOW)
    statements: list[str] = []

    def count(con: Any) -> int:
        trace = getattr(con, "set_trace_callback", None)
        if trace is None:  # PostgreSQL: its planner has statistics
            return -1
        trace(statements.append)
        try:
            return int(store_budgets.count(con, Scope(GUILD, "guild")))
        finally:
            trace(None)

    if await mem.db.read(count) == -1:
        return
    pinned = [s for s in statements if "memory_pins" in s]
    assert len(pinned) == 1

    def plan(con: Any) -> list[str]:
        return [str(r[3]) for r in con.execute("EXPLAIN QUERY PLAN " + pinned[0]).fetchall()]

    steps = await mem.db.read(plan)
    assert steps[0].startswith("SEARCH p USING") and "memory_pins_guild" in steps[0], steps
    assert "INTEGER PRIMARY KEY" in steps[1], steps
