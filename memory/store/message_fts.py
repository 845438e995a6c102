"""Full-text search of a guild's messages (``messages_fts``): its best
matches by BM25, on SQLite ranked on the FTS index alone with the guild
tested for the best of them only, on PostgreSQL in one statement.

Every answer holds the guild's rows only, tested in SQL.
"""

from __future__ import annotations

from typing import Any

from memory.db.core import Connection
from memory.db.sql import IN_CHUNK, dialect_of, id_range
from memory.models import StoredMessage
from memory.store.fts import FtsQuery, best_ranked
from memory.store.message_texts import highest_seq
from memory.store.messages import messages_by_seq


def search_messages_fts(
    con: Connection,
    guild_id: str,
    match: str,
    limit: int,
    lo: int | None = None,
    hi: int | None = None,
    guild_rows: int | None = None,
) -> list[tuple[int, StoredMessage, float]]:
    """(seq, message, raw bm25) of the guild's ``limit`` best FTS matches, best
    first (bm25 is negative; lower is better; equal ranks by seq), optionally
    only seqs in ``[lo, hi)``: the answers of disjoint ranges merged by
    (rank, seq) are exactly the whole query's.

    ``messages_fts`` holds every guild's messages. A query whose common words
    match tens of thousands of long messages spends most of its time joining
    every match to its row to test the guild, so the matches are ranked on
    the FTS index alone and the guild is tested only for the best of them,
    batch by batch in rank order, until ``limit`` belong to the guild. That is
    exactly the best ``limit`` of the guild's own matches: bm25 uses the whole
    table's statistics either way.

    ``guild_rows`` (how many messages the guild holds, when the caller knows)
    spares sorting every match: the statement asks for the best few times
    ``limit`` over the guild's share of all messages (``fts_window``), a
    bounded sort. Only when fewer than ``limit`` of those are the guild's are
    all matches ranked in order, as without it; the answer is the same.
    """
    found: list[tuple[int, StoredMessage, float]] = []
    if limit <= 0:
        return found
    if dialect_of(con) == "postgresql":
        return _search_messages_tsv(con, guild_id, match, limit, lo, hi)
    span, span_args = id_range("rowid", lo, hi)
    where = "messages_fts MATCH ?" + span
    args: list[Any] = [match, *span_args]
    sql = (
        f"SELECT rowid, bm25(messages_fts) AS rank FROM messages_fts WHERE {where} "
        "ORDER BY rank, rowid"
    )
    window = None if guild_rows is None else fts_window(con, guild_rows, limit)
    if window is not None:
        found, ranked = _guild_best(
            con, guild_id, con.execute(f"{sql} LIMIT ?", [*args, window]), limit
        )
        if len(found) == limit or ranked < window:
            return found  # the guild's best, or every match was ranked
    return _guild_best(con, guild_id, con.execute(sql, args), limit)[0]


# A bounded sort asks for this many times the rows a guild's share predicts it needs.
FTS_WINDOW_SLACK = 2
# Above this many rows the bounded sort is not tried (a small guild beside big ones).
FTS_WINDOW_MAX = 20_000


def fts_window(con: Connection, guild_rows: int, limit: int) -> int | None:
    """How many of all guilds' best matches likely hold ``limit`` of a guild of
    ``guild_rows`` messages, matches being spread like the messages: ``limit``
    over its share of every message ever stored (the highest seq, which
    counts deleted ones too, so the share errs low and the window wide),
    with slack. None: the guild is too small a share to try."""
    if guild_rows <= 0:
        return None
    total = max(highest_seq(con), guild_rows)
    window = -(-limit * total * FTS_WINDOW_SLACK // guild_rows)
    return window if window <= FTS_WINDOW_MAX else None


def _guild_best(
    con: Connection, guild_id: str, cur: Any, limit: int
) -> tuple[list[tuple[int, StoredMessage, float]], int]:
    """The guild's first ``limit`` rows of ``cur`` (rowid, rank in rank order),
    read in batches; and how many rows of ``cur`` were read."""
    found: list[tuple[int, StoredMessage, float]] = []
    ranked = 0
    try:
        size = limit
        while len(found) < limit:
            batch = cur.fetchmany(size)
            if not batch:
                break
            ranked += len(batch)
            rows = messages_by_seq(con, guild_id, [int(r[0]) for r in batch])
            for r in batch:
                m = rows.get(int(r[0]))
                if m is not None:
                    found.append((int(r[0]), m, float(r[1])))
                    if len(found) == limit:
                        break
            size = min(size * 2, 4 * IN_CHUNK)
    finally:
        cur.close()
    return found, ranked


def _search_messages_tsv(
    con: Connection, guild_id: str, match: str, limit: int, lo: int | None, hi: int | None
) -> list[tuple[int, StoredMessage, float]]:
    """``search_messages_fts`` on PostgreSQL: its planner filters the guild
    while it ranks, so one statement returns the guild's best ``limit``."""

    def run(q: FtsQuery) -> list[tuple[int, float]]:
        span, span_args = id_range("messages_fts.rowid", lo, hi)
        where = f"{q.where} AND m.guild_id = ?{span}"
        args: list[Any] = [*q.params, guild_id, *span_args, limit]
        found = con.execute(
            f"SELECT m.seq, {q.rank} AS rank FROM {q.source} "
            f"JOIN messages m ON m.seq = messages_fts.rowid WHERE {where} "
            "ORDER BY rank, m.seq LIMIT ?",
            args,
        ).fetchall()
        return [(int(r[0]), float(r[1])) for r in found]

    ranked = best_ranked(con, "messages_fts", match, limit, run, lambda r: r[1])
    rows = messages_by_seq(con, guild_id, [r[0] for r in ranked])
    return [(seq, rows[seq], rank) for seq, rank in ranked if seq in rows]
