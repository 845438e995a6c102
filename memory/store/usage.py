"""SQL for the operator's view over time: the daily series and the request log.

A series is a number per guild, UTC day (``YYYY-MM-DD``) and name
(``memory.usage.series`` names them). Increments are rows of ``usage_delta``,
inserted in the transaction of the work they count (a message stored, a fact
added) or by the buffered recorder (searches, extraction calls, replies): a
plain insert with no unique key, so two writers — two processes on one
PostgreSQL — never wait on each other for a counter. ``fold`` moves the
deltas into ``usage_daily`` (one row per key); readers add both tables up,
so a fold changes no total.

The request log is one row per reply, search and extraction call, newest
first by id, pruned by age and rows. Neither table holds text or member ids.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from memory.db.core import Connection
from memory.db.sql import dialect_of
from memory.models import RequestLogEntry

# pg_advisory_xact_lock key of the fold ("glusage"): one process folds at a time.
FOLD_LOCK_KEY = 0x676C7573616765
# Keys upserted per statement by the fold.
_FOLD_CHUNK = 500
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
REQUEST_COLUMNS = (
    "id, at, guild_id, kind, outcome, latency_ms, model, prompt_tokens, completion_tokens, detail"
)

Delta = tuple[str, str, str, float]  # guild id, day, series, amount


def day_of(when: str | None) -> str | None:
    """The UTC day of a stored ISO time (stored times are UTC, fixed width),
    or None for text that does not start with a date."""
    if when and _DAY.match(when):
        return when[:10]
    return None


# -- increments and the fold ------------------------------------------------------


def add(con: Connection, deltas: Iterable[Delta]) -> None:
    """Increment series by inserting deltas (zero amounts are left out)."""
    rows = [(g or "", d, m, float(v)) for g, d, m, v in deltas if v]
    if rows:
        con.executemany(
            "INSERT INTO usage_delta (guild_id, day, metric, value) VALUES (?, ?, ?, ?)", rows
        )


def count(con: Connection, guild_id: str | None, when: str, metric: str, n: float = 1) -> None:
    """One increment of ``metric`` on the UTC day of ``when`` (an ISO time)."""
    day = day_of(when)
    if day is not None:
        add(con, [(guild_id or "", day, metric, n)])


def count_messages(con: Connection, rows: Iterable[tuple[str | None, str]], received: str) -> None:
    """Stored messages per guild and the day they were written (an import of
    90 days of history shows 90 days); a time that is not one counts on the
    day it was received."""
    per: dict[tuple[str, str], int] = {}
    fallback = day_of(received) or received[:10]
    for guild_id, created_at in rows:
        key = (guild_id or "", day_of(created_at) or fallback)
        per[key] = per.get(key, 0) + 1
    add(con, [(g, d, "messages", n) for (g, d), n in sorted(per.items())])


def fold(con: Connection) -> int:
    """Move every delta into ``usage_daily``; returns the delta rows folded.

    On PostgreSQL the fold runs only if no other process is folding (an
    advisory lock it does not wait for): the deletes and upserts of two folds
    could otherwise wait on each other; the increments never wait on a fold,
    they only insert."""
    if dialect_of(con) == "postgresql":
        got = con.execute("SELECT pg_try_advisory_xact_lock(?)", (FOLD_LOCK_KEY,)).fetchone()
        if not got or not got[0]:
            return 0
    rows = con.execute("DELETE FROM usage_delta RETURNING guild_id, day, metric, value").fetchall()
    sums: dict[tuple[str, str, str], float] = {}
    for r in rows:
        key = (str(r[0]), str(r[1]), str(r[2]))
        sums[key] = sums.get(key, 0.0) + float(r[3])
    items = sorted(sums.items())
    for start in range(0, len(items), _FOLD_CHUNK):
        part = items[start : start + _FOLD_CHUNK]
        con.execute(
            "INSERT INTO usage_daily (guild_id, day, metric, value) VALUES "
            + ", ".join("(?, ?, ?, ?)" for _ in part)
            + " ON CONFLICT (guild_id, day, metric) DO UPDATE "
            "SET value = usage_daily.value + excluded.value",
            [v for (g, d, m), n in part for v in (g, d, m, n)],
        )
    return len(rows)


# -- reading the series -------------------------------------------------------------


def _both(where: str) -> str:
    """Folded rows and pending deltas under one ``where``, as one relation."""
    return (
        f"(SELECT guild_id, day, metric, value FROM usage_daily WHERE {where} "
        f"UNION ALL SELECT guild_id, day, metric, value FROM usage_delta WHERE {where}) AS u"
    )


def series(
    con: Connection, guild_id: str | None, first_day: str, last_day: str
) -> dict[str, dict[str, float]]:
    """series → day → total over ``first_day..last_day`` (inclusive), of one
    guild or (``guild_id`` None) of all of them. Days without a row are absent."""
    where = "day >= ? AND day <= ?" + ("" if guild_id is None else " AND guild_id = ?")
    one = [first_day, last_day] + ([] if guild_id is None else [guild_id])
    out: dict[str, dict[str, float]] = {}
    for r in con.execute(
        f"SELECT metric, day, sum(value) FROM {_both(where)} GROUP BY metric, day", one + one
    ):
        out.setdefault(str(r[0]), {})[str(r[1])] = float(r[2])
    return out


def day_range(con: Connection, guild_id: str | None, metric: str) -> tuple[str, str] | None:
    """The first and the last day with a count of ``metric`` (of one guild,
    or of any), or None if it was never counted."""
    where = "metric = ? AND value != 0" + ("" if guild_id is None else " AND guild_id = ?")
    one = [metric] + ([] if guild_id is None else [guild_id])
    row = con.execute(f"SELECT min(day), max(day) FROM {_both(where)}", one + one).fetchone()
    return (str(row[0]), str(row[1])) if row and row[0] else None


def totals(con: Connection, day: str | None = None) -> list[tuple[str, str, float]]:
    """(guild id, series, total) over every day, or over one ``day``."""
    where = "1 = 1" if day is None else "day = ?"
    one = [] if day is None else [day]
    return [
        (str(r[0]), str(r[1]), float(r[2]))
        for r in con.execute(
            f"SELECT guild_id, metric, sum(value) FROM {_both(where)} "
            "GROUP BY guild_id, metric ORDER BY guild_id, metric",
            one + one,
        )
    ]


# -- the request log --------------------------------------------------------------------


def insert_requests(con: Connection, rows: Sequence[RequestLogEntry]) -> None:
    """Append rows (their ``id`` is ignored: the table numbers them)."""
    if rows:
        con.executemany(
            "INSERT INTO request_log (at, guild_id, kind, outcome, latency_ms, model, "
            "prompt_tokens, completion_tokens, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    r.at,
                    r.guild_id,
                    r.kind,
                    r.outcome,
                    r.latency_ms,
                    r.model,
                    r.prompt_tokens,
                    r.completion_tokens,
                    r.detail,
                )
                for r in rows
            ],
        )


def _entry(r: Any) -> RequestLogEntry:
    return RequestLogEntry(
        id=int(r["id"]),
        at=str(r["at"]),
        guild_id=str(r["guild_id"]),
        kind=str(r["kind"]),
        outcome=str(r["outcome"]),
        latency_ms=float(r["latency_ms"]),
        model=r["model"],
        prompt_tokens=None if r["prompt_tokens"] is None else int(r["prompt_tokens"]),
        completion_tokens=None if r["completion_tokens"] is None else int(r["completion_tokens"]),
        detail=r["detail"],
    )


def requests(
    con: Connection,
    *,
    guild_id: str | None = None,
    kind: str | None = None,
    outcome: str | None = None,
    since: str | None = None,
    until: str | None = None,
    before_id: int | None = None,
    limit: int = 50,
) -> list[RequestLogEntry]:
    """Newest first; every filter is optional; ``since``/``until`` are ISO
    times (``since`` inclusive, ``until`` exclusive); ``before_id`` pages."""
    clauses: list[str] = []
    args: list[Any] = []
    for column, value in (("guild_id", guild_id), ("kind", kind), ("outcome", outcome)):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    if since is not None:
        clauses.append("at >= ?")
        args.append(since)
    if until is not None:
        clauses.append("at < ?")
        args.append(until)
    if before_id is not None:
        clauses.append("id < ?")
        args.append(before_id)
    where = " WHERE " + " AND ".join(clauses) if clauses else ""
    rows = con.execute(
        f"SELECT {REQUEST_COLUMNS} FROM request_log{where} ORDER BY id DESC LIMIT ?",
        [*args, limit],
    ).fetchall()
    return [_entry(r) for r in rows]


def prune_requests(con: Connection, *, older_than: str | None, keep_rows: int, limit: int) -> int:
    """Delete at most ``limit`` of the oldest rows that are older than
    ``older_than`` (ISO time; None: no age limit) or beyond the newest
    ``keep_rows`` (0: no cap)."""
    cutoff_id = 0
    if keep_rows > 0:
        row = con.execute(
            "SELECT id FROM request_log ORDER BY id DESC LIMIT 1 OFFSET ?", (keep_rows,)
        ).fetchone()
        cutoff_id = int(row[0]) if row else 0
    return int(
        con.execute(
            "DELETE FROM request_log WHERE id IN (SELECT id FROM request_log "
            "WHERE id <= ? OR at < ? ORDER BY id LIMIT ?)",
            (cutoff_id, older_than or "", limit),
        ).rowcount
    )
