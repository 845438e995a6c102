"""SQL and small helpers of hybrid retrieval (``memory.retrieval``).

The statements here are tuned to this schema's indexes (see each docstring);
they are kept apart from ``memory.store`` because only retrieval uses them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memory.clock import parse_iso
from memory.models import Fact, Hit, ScoreParts, StoredMessage
from memory.store import facts as store

MESSAGE_CONFIDENCE = 0.5  # messages have no extraction confidence; a neutral value


def member_rows(con: Any, guild_id: str) -> list[tuple[str, str]]:
    rows = con.execute(
        "SELECT user_id, display_name FROM members WHERE guild_id = ?", (guild_id,)
    ).fetchall()
    return [(r["user_id"], r["display_name"]) for r in rows]


def facts_by_ids(con: Any, guild_id: str, ids: Sequence[int]) -> dict[int, Fact]:
    """This guild's facts among ``ids``, by primary key. Without ``+`` SQLite (no ANALYZE
    statistics) walks the guild's whole ``facts_guild`` index to find a few
    dozen ids: 16 ms at 100k facts instead of 0.2 ms. The rows come back in
    the order that index walk gave (is_active, updated_at, id), so equal
    scores keep their order."""
    out: dict[int, Fact] = {}
    items = list(ids)
    for start in range(0, len(items), 500):
        chunk = items[start : start + 500]
        rows = con.execute(
            f"SELECT {store.FACT_COLUMNS} FROM memory_facts "
            f"WHERE id IN ({','.join('?' * len(chunk))}) AND +guild_id = ?",
            [*chunk, guild_id],
        ).fetchall()
        rows.sort(key=lambda r: (r["is_active"], r["updated_at"], r["id"]))
        out.update((int(r["id"]), store.row_to_fact(r)) for r in rows)
    return out


def recent_subject_facts(
    con: Any, guild_id: str, subjects: Sequence[str], limit: int
) -> list[Fact]:
    """The newest active facts about ``subjects``, through the ``facts_subject`` index. Left
    to itself SQLite orders by the ``facts_guild`` index and filters the
    subjects while walking the whole guild (120 ms at 100k facts); ``+``
    keeps that index out. ``id DESC`` is the tie order that walk gave."""
    marks = ",".join("?" * len(subjects))
    rows = con.execute(
        f"SELECT {store.FACT_COLUMNS} FROM memory_facts WHERE guild_id = ? AND is_active = 1 "
        f"AND subject IN ({marks}) ORDER BY +updated_at DESC, id DESC LIMIT ?",
        [guild_id, *subjects, limit],
    ).fetchall()
    return [store.row_to_fact(r) for r in rows]


def adjacent_seqs(
    con: Any, guild_id: str, items: Sequence[tuple[int, StoredMessage]]
) -> dict[int, tuple[int | None, int | None]]:
    """seq → (previous seq, next seq) in the same channel, by time then seq.

    One statement, two index probes per item (messages_guild_channel_time
    covers (guild_id, channel_id, created_at, rowid)).
    """
    out: dict[int, tuple[int | None, int | None]] = {}
    for start in range(0, len(items), 200):
        chunk = items[start : start + 200]
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


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return parse_iso(text)
    except ValueError:
        return None


def age_days(now: datetime, text: str) -> float:
    dt = parse_time(text)
    return max(0.0, (now - dt).total_seconds() / 86400) if dt else 0.0


def seconds_between(a: str, b: str) -> float:
    da, db = parse_time(a), parse_time(b)
    if da is None or db is None:
        return float("inf")
    return (db - da).total_seconds()


def fact_hit(f: Fact, parts: ScoreParts) -> Hit:
    return Hit(
        kind="fact",
        id=str(f.id),
        guild_id=f.guild_id,
        channel_id=f.channel_id,
        subject=f.subject,
        text=f.fact,
        fact_type=f.fact_type,
        evidence_text=f.evidence_text,
        source_message_id=f.source_message_id,
        confidence=f.confidence,
        created_at=f.created_at,
        score=parts.combined,
        parts=parts,
    )


def message_hit(m: StoredMessage, parts: ScoreParts) -> Hit:
    return Hit(
        kind="message",
        id=m.id,
        guild_id=m.guild_id,
        channel_id=m.channel_id,
        subject=m.author_id,
        text=m.content,
        fact_type=None,
        evidence_text=None,
        source_message_id=m.id,
        confidence=MESSAGE_CONFIDENCE,
        created_at=m.created_at,
        score=parts.combined,
        parts=parts,
        author_name=m.author_name,
    )


def fts_fact_ranks(
    con: Any,
    guild_id: str,
    match: str,
    limit: int,
    lo: int | None = None,
    hi: int | None = None,
) -> list[tuple[int, float]]:
    """(fact id, raw bm25) of the guild's best active FTS matches, best first,
    optionally only ids in ``[lo, hi)``.

    What ``store.search_facts_fts`` ranks, with two differences that keep the
    result and speed it up. Ties (common: facts of the same length and
    terms) are ordered by id, the order FTS5's rowid scan already gave them,
    now explicit so that two id ranges merge into exactly the whole query's
    answer. Only id and rank go through the sorter: every one of the
    thousands of matches is sorted, and carrying whole fact rows with them
    cost ~3 ms at 100k facts; the few winners are read by id afterwards.
    """
    extra = ""
    args: list[Any] = [match, guild_id]
    if lo is not None:
        extra += " AND memory_facts_fts.rowid >= ?"
        args.append(lo)
    if hi is not None:
        extra += " AND memory_facts_fts.rowid < ?"
        args.append(hi)
    args.append(limit)
    rows = con.execute(
        "SELECT f.id, bm25(memory_facts_fts) AS rank "
        "FROM memory_facts_fts JOIN memory_facts f ON f.id = memory_facts_fts.rowid "
        f"WHERE memory_facts_fts MATCH ? AND f.guild_id = ? AND f.is_active = 1{extra} "
        "ORDER BY rank, f.id LIMIT ?",
        args,
    ).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


def merge_ranks(
    parts: Sequence[Sequence[tuple[int, float]]], limit: int
) -> list[tuple[int, float]]:
    """The best ``limit`` of several ``fts_fact_ranks`` answers over disjoint id
    ranges: by rank, then id — the order one query over all ids gives."""
    merged = [item for part in parts for item in part]
    merged.sort(key=lambda t: (t[1], t[0]))
    return merged[:limit]


class SharedPart:
    """A piece of work that either of two threads may run, whichever gets to
    it first, on its own connection.

    The retriever offers half of a big FTS query to a second reader thread;
    the thread that needs the answer runs it itself if that reader has not
    started yet (all readers busy), and otherwise waits for it. So the work is
    never queued behind the very thread that waits for it (no deadlock), and
    never run twice.
    """

    def __init__(self, fn: Any, *args: Any) -> None:
        self._fn = fn
        self._args = args
        self._lock = threading.Lock()
        self._claimed = False
        self._done = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None

    def _claim(self) -> bool:
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            return True

    def _run(self, con: Any) -> None:
        try:
            self._result = self._fn(con, *self._args)
        except BaseException as exc:  # handed to the thread that waits
            self._error = exc
        finally:
            self._done.set()

    def offer(self, con: Any) -> None:
        """Run it here unless another thread already has (a reader thread)."""
        if self._claim():
            self._run(con)

    def result(self, con: Any) -> Any:
        """The answer: computed here on ``con`` if nobody started it yet."""
        if self._claim():
            self._run(con)
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._result
