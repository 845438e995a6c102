"""Migration m020: an index of each guild's current facts in value order.
Shipped: never edit, add a new migration instead.

A guild-wide budget (``memory.store.budgets``) counts the guild's current facts
and finds its lowest-value ones at every write past it. Both read every
current fact of the guild through ``facts_guild`` and the table: about 45 ms
and 60 ms a write at 100k facts. This partial index holds only current facts,
in confidence order (the value's first key) with their type, so the count is
read from the index alone and the lowest-value search walks the index from
its low end. The same statement for SQLite and PostgreSQL (``p006``).
"""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    con.execute(
        "CREATE INDEX facts_budget ON memory_facts (guild_id, confidence, fact_type) "
        "WHERE is_active = 1 AND valid_to IS NULL"
    )
