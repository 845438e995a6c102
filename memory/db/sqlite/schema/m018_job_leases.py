"""Migration m018: leases for work that must run once across processes.
Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # One row per named piece of work; ``expires_at`` is fixed-width ISO UTC
    # text, so a text comparison orders it in time.
    con.execute(
        "CREATE TABLE IF NOT EXISTS job_leases ("
        "name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at TEXT NOT NULL)"
    )
