"""Migration m024: the operator's view over time — daily series and the request log.
Shipped: never edit, add a new migration instead.

``usage_delta`` takes increments where the work happens (in the work's own
transaction) without a unique key, so two writers never wait for each other
on a counter row; ``usage_daily`` holds one folded row per guild, UTC day and
series, written only by the fold (``memory.store.usage.fold``).
``request_log`` is one row per reply, search and extraction call, pruned by
age and rows. None of them holds text or member ids.

A database that already holds memory starts its series from what is stored:
messages per day they were written, and facts per day they were observed
(facts and messages erased before the upgrade are not counted).
"""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    con.execute(
        "CREATE TABLE IF NOT EXISTS usage_daily ("
        "guild_id TEXT NOT NULL, day TEXT NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL, "
        "PRIMARY KEY (guild_id, day, metric))"
    )
    # The overview's series of every guild are read by day range.
    con.execute("CREATE INDEX IF NOT EXISTS usage_daily_day ON usage_daily (day)")
    con.execute(
        "CREATE TABLE IF NOT EXISTS usage_delta ("
        "guild_id TEXT NOT NULL, day TEXT NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL)"
    )
    con.execute(
        "CREATE TABLE IF NOT EXISTS request_log ("
        "id INTEGER PRIMARY KEY, at TEXT NOT NULL, guild_id TEXT NOT NULL, kind TEXT NOT NULL, "
        "outcome TEXT NOT NULL, latency_ms REAL NOT NULL, model TEXT, prompt_tokens INTEGER, "
        "completion_tokens INTEGER, detail TEXT)"
    )
    # ``at`` is fixed-width ISO UTC text: the time filters and the prune by age.
    con.execute("CREATE INDEX IF NOT EXISTS request_log_at ON request_log (at)")
    con.execute("CREATE INDEX IF NOT EXISTS request_log_guild ON request_log (guild_id, id)")
    for statement in BACKFILL:
        con.execute(statement)


# Shared with PostgreSQL's p009: the same SQL on both. A stored time that is
# not a date (a failed import's row) is left out.
BACKFILL: tuple[str, ...] = (
    "INSERT INTO usage_daily (guild_id, day, metric, value) "
    "SELECT guild_id, substr(created_at, 1, 10), 'messages', count(*) FROM messages "
    "WHERE substr(created_at, 5, 1) = '-' GROUP BY guild_id, substr(created_at, 1, 10)",
    "INSERT INTO usage_daily (guild_id, day, metric, value) "
    "SELECT guild_id, substr(coalesce(observed_at, created_at), 1, 10), 'facts_added', count(*) "
    "FROM memory_facts WHERE substr(coalesce(observed_at, created_at), 5, 1) = '-' "
    "GROUP BY guild_id, substr(coalesce(observed_at, created_at), 1, 10)",
)
