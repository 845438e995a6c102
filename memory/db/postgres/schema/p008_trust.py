"""Migration p008: SQLite's m023 (opt-outs, deletion receipts, write caps,
withheld messages) on PostgreSQL. Shipped: never edit, add a new migration
instead."""

from __future__ import annotations

from typing import Any

from memory.db.sqlite.schema.m023_trust import STATEMENTS


def apply(cur: Any) -> None:
    # SQLite's INTEGER is 64-bit, PostgreSQL's "integer" is not: the two
    # schemas match column for column (tests/db/test_pg_schema.py).
    for sql in STATEMENTS:
        cur.execute(sql.replace(" INTEGER ", " BIGINT "))
