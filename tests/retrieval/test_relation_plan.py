"""Saving a fact's edges checks that both facts are active by looking the two
ids up, not by walking the guild's (guild_id, is_active) index: that walk
read every active fact of the guild for each edge (10 ms an edge at 100k
facts). An archived fact, or one of another guild, still gets no edge."""

from __future__ import annotations

from typing import Any

from memory.store.relations import active_ids, save_links
from tests.helpers import GUILD
from tests.retrieval.test_relations import CLOSE, edges, lore

NOW = "2026-11-29T00:00:00Z"


async def test_edges_go_only_between_active_facts_of_the_guild(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    first, second, archived = [await lore(mem, line) for line in CLOSE[:3]]
    await mem.db.write(
        lambda con: con.execute("UPDATE memory_facts SET is_active = 0 WHERE id = ?", (archived,))
    )
    assert await mem.db.read(active_ids, GUILD, [first, second, archived]) == {first, second}
    assert await mem.db.read(active_ids, "another guild", [first, second]) == set()
    links = {first: [(second, 0.9), (archived, 0.8)]}
    assert await mem.db.write(save_links, GUILD, links, NOW) == 1
    assert [(a, b) for a, b, _ in await edges(mem)] == [(min(first, second), max(first, second))]
    # Nothing for another guild's facts, and the fact's old edges are replaced.
    assert await mem.db.write(save_links, "another guild", {first: [(second, 0.9)]}, NOW) == 0
    assert await edges(mem) == []


async def test_the_active_check_looks_the_ids_up_on_sqlite(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    first, second = [await lore(mem, line) for line in CLOSE[:2]]
    statements: list[str] = []

    def save(con: Any) -> int:
        trace = getattr(con, "set_trace_callback", None)
        if trace is None:  # PostgreSQL: its planner has statistics
            return -1
        trace(statements.append)
        try:
            return int(save_links(con, GUILD, {first: [(second, 0.9)]}, NOW))
        finally:
            trace(None)

    if await mem.db.write(save) == -1:
        return
    reads = [s for s in statements if "FROM memory_facts" in s]
    assert reads

    def plans(con: Any) -> list[str]:
        return [
            " | ".join(str(r[3]) for r in con.execute("EXPLAIN QUERY PLAN " + s).fetchall())
            for s in reads
        ]

    for plan in await mem.db.read(plans):
        assert "facts_guild" not in plan and "SCAN memory_facts" not in plan, plan
        assert "INTEGER PRIMARY KEY" in plan, plan
