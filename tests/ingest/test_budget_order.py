"""A budget's count and its lowest-value facts, read through the index of
current facts in confidence order (m020), are exactly what ordering every
fact of the scope by value gives: ties on confidence broken by sources, then
the last observation, then id; pinned and canon facts never counted."""

from __future__ import annotations

import random
from typing import Any

from memory.models import LORE_SUBJECT
from memory.store import budgets as store_budgets
from memory.store.budgets import Scope
from memory.store.fact_time import add_source
from memory.store.facts import upsert_fact
from tests.helpers import ALICE, BOB, GUILD, OTHER_GUILD


def _write(con: Any) -> list[dict[str, Any]]:
    rng = random.Random(7)
    rows: list[dict[str, Any]] = []
    for i in range(90):
        subject = (ALICE, BOB, LORE_SUBJECT)[i % 3]
        when = f"2024-0{1 + i % 9}-1{i % 10}T10:00:00.000Z"
        up = upsert_fact(
            con,
            guild_id=GUILD,
            channel_id=None,
            subject=subject,
            fact=f"fact number {i}",
            fact_type="canon" if i % 17 == 0 else "other",
            evidence=None,
            source_message_id=None,
            confidence=rng.choice((0.5, 0.6, 0.6, 0.7)),
            now=when,
            actor="test",
            observed_at=when,
        )
        sources = rng.randrange(3)
        for k in range(sources):
            add_source(con, GUILD, up.fact.id, f"9{i:03d}{k}", when)
        pinned = i % 11 == 0
        if pinned:
            store_budgets.pin(con, GUILD, up.fact.id, "operator", when)
        rows.append(
            {
                "fact": up.fact,
                "sources": sources,
                "counted": not pinned and i % 17 != 0,
            }
        )
    # Another guild's facts never count.
    for i in range(10):
        upsert_fact(
            con,
            guild_id=OTHER_GUILD,
            channel_id=None,
            subject=ALICE,
            fact=f"elsewhere {i}",
            fact_type="other",
            evidence=None,
            source_message_id=None,
            confidence=0.1,
            now="2024-01-01T00:00:00.000Z",
            actor="test",
        )
    return rows


def _value(row: dict[str, Any]) -> tuple[Any, ...]:
    f = row["fact"]
    return (f.confidence, row["sources"], f.last_observed_at or f.updated_at, f.id)


async def test_count_and_lowest_value_match_ordering_every_fact(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    rows = await mem.db.write(_write)
    scopes = {
        Scope(GUILD, "guild"): lambda r: True,
        Scope(GUILD, "member", ALICE): lambda r: r["fact"].subject == ALICE,
        Scope(GUILD, "lore"): lambda r: r["fact"].subject == LORE_SUBJECT,
    }
    for scope, inside in scopes.items():
        counted = sorted((r for r in rows if r["counted"] and inside(r)), key=_value)
        n = await mem.db.read(store_budgets.count, scope)
        assert n == len(counted), scope
        for limit in (1, 2, 5, 13, len(counted), len(counted) + 3):
            got = await mem.db.read(store_budgets.lowest_value, scope, limit)
            assert [f.id for f in got] == [r["fact"].id for r in counted[:limit]], (scope, limit)
