"""SQL of hybrid retrieval (``memory.retrieval``).

The statements here are tuned to this schema's indexes (see each docstring);
they are kept apart from the other store modules because only retrieval uses
them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory.db.core import Connection
from memory.db.sql import chunks, id_range, marks, rows_in
from memory.models import Fact, StoredMessage
from memory.store.fact_time import valid_clause
from memory.store.facts import FACT_COLUMNS, row_to_fact
from memory.store.fts import FtsQuery, best_ranked


def member_rows(con: Connection, guild_id: str) -> list[tuple[str, str]]:
    rows = con.execute(
        "SELECT user_id, display_name FROM members WHERE guild_id = ?", (guild_id,)
    ).fetchall()
    return [(r["user_id"], r["display_name"]) for r in rows]


def facts_by_ids(
    con: Connection, guild_id: str, ids: Sequence[int], as_of: str | None = None
) -> dict[int, Fact]:
    """This guild's facts among ``ids``, by primary key. Without ``+`` SQLite (no ANALYZE
    statistics) walks the guild's whole ``facts_guild`` index to find a few
    dozen ids, a cost that grows with the guild rather than with the ids. The rows come back in
    the order that index walk gave (is_active, updated_at, id), so equal
    scores keep their order. Only facts valid at ``as_of`` (None: current facts)."""
    valid, valid_args = valid_clause(as_of)
    sql = f"SELECT {FACT_COLUMNS} FROM memory_facts WHERE id IN ({{in}}) AND +guild_id = ?{valid}"
    rows = list(rows_in(con, sql, list(ids), after=[guild_id, *valid_args]))
    rows.sort(key=lambda r: (r["is_active"], r["updated_at"], r["id"]))
    return {int(r["id"]): row_to_fact(r) for r in rows}


def recent_subject_facts(
    con: Connection, guild_id: str, subjects: Sequence[str], limit: int, as_of: str | None = None
) -> list[Fact]:
    """The newest active facts about ``subjects``, through the ``facts_subject`` index. Left
    to itself SQLite orders by the ``facts_guild`` index and filters the
    subjects while walking the whole guild (a cost that grows with the guild); ``+``
    keeps that index out. ``id DESC`` is the tie order that walk gave. Only
    facts valid at ``as_of`` (None: current facts)."""
    valid, valid_args = valid_clause(as_of)
    rows = con.execute(
        f"SELECT {FACT_COLUMNS} FROM memory_facts WHERE guild_id = ? AND is_active = 1 "
        f"AND subject IN ({marks(len(subjects))}){valid} "
        "ORDER BY +updated_at DESC, id DESC LIMIT ?",
        [guild_id, *subjects, *valid_args, limit],
    ).fetchall()
    return [row_to_fact(r) for r in rows]


def adjacent_seqs(
    con: Connection, guild_id: str, items: Sequence[tuple[int, StoredMessage]]
) -> dict[int, tuple[int | None, int | None]]:
    """seq → (previous seq, next seq) in the same channel, by time then seq.

    One statement, two index probes per item (messages_guild_channel_time
    covers (guild_id, channel_id, created_at, rowid)).
    """
    out: dict[int, tuple[int | None, int | None]] = {}
    # Three parameters per item in the VALUES list.
    for chunk in chunks(items, 200):
        values = ",".join("(?, ?, ?)" for _ in chunk)
        args: list[Any] = []
        for seq, m in chunk:
            args.extend((seq, m.channel_id, m.created_at))
        rows = con.execute(
            f"WITH c(seq, ch, ts) AS (VALUES {values}) SELECT c.seq, "
            "(SELECT m.seq FROM messages m WHERE m.guild_id = ? AND m.channel_id = c.ch "
            " AND (m.created_at, m.seq) < (c.ts, c.seq) "
            " ORDER BY m.created_at DESC, m.seq DESC LIMIT 1) AS prev, "
            "(SELECT m.seq FROM messages m WHERE m.guild_id = ? AND m.channel_id = c.ch "
            " AND (m.created_at, m.seq) > (c.ts, c.seq) "
            " ORDER BY m.created_at ASC, m.seq ASC LIMIT 1) AS next "
            "FROM c",
            [*args, guild_id, guild_id],
        ).fetchall()
        for r in rows:
            out[int(r[0])] = (
                None if r[1] is None else int(r[1]),
                None if r[2] is None else int(r[2]),
            )
    return out


def fts_fact_ranks(
    con: Connection,
    guild_id: str,
    match: str,
    limit: int,
    lo: int | None = None,
    hi: int | None = None,
    as_of: str | None = None,
) -> list[tuple[int, float]]:
    """(fact id, raw bm25) of the guild's best active FTS matches, best first,
    optionally only ids in ``[lo, hi)``; only facts valid at ``as_of`` (None:
    current facts).

    What ``memory.store.facts.search_facts_fts`` ranks, with two differences
    that keep the result and speed it up. Ties (common: facts of the same
    length and terms) are ordered by id, the order FTS5's rowid scan gave them,
    now explicit so that two id ranges merge into exactly the whole query's
    answer. Only id and rank go through the sorter: every one of the
    thousands of matches is sorted, and carrying whole fact rows through the
    sort costs more than reading the few winners by id afterwards.
    """
    valid, valid_args = valid_clause(as_of, "f")

    def run(q: FtsQuery) -> list[tuple[int, float]]:
        span, span_args = id_range("memory_facts_fts.rowid", lo, hi)
        extra = valid + span
        args = [*q.params, guild_id, *valid_args, *span_args, limit]
        rows = con.execute(
            f"SELECT f.id, {q.rank} AS rank "
            f"FROM {q.source} JOIN memory_facts f ON f.id = memory_facts_fts.rowid "
            f"WHERE {q.where} AND f.guild_id = ? AND f.is_active = 1{extra} "
            "ORDER BY rank, f.id LIMIT ?",
            args,
        ).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    return best_ranked(con, "memory_facts_fts", match, limit, run, lambda r: r[1])


def merge_ranks(
    parts: Sequence[Sequence[tuple[int, float]]], limit: int
) -> list[tuple[int, float]]:
    """The best ``limit`` of several ``fts_fact_ranks`` answers over disjoint id
    ranges: by rank, then id — the order one query over all ids gives."""
    merged = [item for part in parts for item in part]
    merged.sort(key=lambda t: (t[1], t[0]))
    return merged[:limit]
