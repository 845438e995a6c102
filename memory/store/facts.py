"""All SQL for facts. Functions take a connection and run inside the
transaction that ``Database.write``/``read`` opened.

Every query that returns guild data filters by ``guild_id`` in SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memory.db.core import Connection
from memory.db.sql import chunks, marks, prefixed
from memory.models import LORE_SUBJECT, Fact, HistoryEntry
from memory.store.episode_sources import episodes_citing, queue_rebuild
from memory.store.fact_time import message_time, observe
from memory.store.fts import FtsQuery, best_ranked
from memory.store.messages import erase_messages
from memory.store.reply_context import erase_refs, fact_refs
from memory.store.review import forget_member as forget_review_items
from memory.store.usage import count
from memory.store.vectors import (
    delete_fact_vectors_index,
    index_fact_vector_if_present,
)
from memory.store.window import forget_replies_to

FACT_COLUMNS = (
    "id, guild_id, channel_id, subject, fact, fact_type, evidence_text, source_message_id, "
    "confidence, is_active, created_at, updated_at, observed_at, last_observed_at, "
    "valid_from, valid_to"
)
# History events that count in the daily series (a supersede and a merge write
# two rows, one per fact, and are counted where they happen instead).
COUNTED_EVENTS = {"add": "facts_added", "archive": "facts_archived", "expire": "facts_archived"}


def row_to_fact(row: Any) -> Fact:
    return Fact(
        id=int(row["id"]),
        guild_id=row["guild_id"],
        channel_id=row["channel_id"],
        subject=row["subject"],
        fact=row["fact"],
        fact_type=row["fact_type"],
        evidence_text=row["evidence_text"],
        source_message_id=row["source_message_id"],
        confidence=float(row["confidence"]),
        is_active=bool(row["is_active"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        observed_at=row["observed_at"],
        last_observed_at=row["last_observed_at"],
        valid_from=row["valid_from"],
        valid_to=row["valid_to"],
    )


# -- facts ----------------------------------------------------------------------


@dataclass(frozen=True)
class UpsertResult:
    fact: Fact
    event: Literal["add", "update"]
    changed: bool  # text-bearing fields changed (re-embed needed)


def upsert_fact(
    con: Connection,
    *,
    guild_id: str,
    channel_id: str | None,
    subject: str,
    fact: str,
    fact_type: str,
    evidence: str | None,
    source_message_id: str | None,
    confidence: float,
    now: str,
    actor: str,
    observed_at: str | None = None,
) -> UpsertResult:
    """Add a fact or re-observe a known one. ``observed_at``: the source message's
    time (looked up when not given; the clock's ``now`` without a source)."""
    seen = observed_at or message_time(con, guild_id, source_message_id) or now
    old = con.execute(
        f"SELECT {FACT_COLUMNS} FROM memory_facts WHERE guild_id = ? AND subject = ? AND fact = ?",
        (guild_id, subject, fact),
    ).fetchone()
    if old is None:
        cur = con.execute(
            "INSERT INTO memory_facts (guild_id, channel_id, subject, fact, fact_type, "
            "evidence_text, source_message_id, confidence, is_active, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
            (
                guild_id,
                channel_id,
                subject,
                fact,
                fact_type,
                evidence,
                source_message_id,
                confidence,
                now,
                now,
            ),
        )
        fact_id = int(cur.lastrowid)
        observe(con, guild_id, fact_id, source_message_id, seen)
        add_history(
            con,
            guild_id,
            fact_id,
            subject,
            "add",
            None,
            fact,
            actor,
            source_message_id,
            now=now,
            counted_on=seen,
        )
        return UpsertResult(get_fact(con, guild_id, fact_id), "add", True)  # type: ignore[arg-type]
    prev = row_to_fact(old)
    con.execute(
        "UPDATE memory_facts SET updated_at = ?, channel_id = ?, fact_type = ?, "
        "evidence_text = ?, source_message_id = ?, confidence = max(confidence, ?), "
        "is_active = 1 WHERE id = ?",
        (now, channel_id, fact_type, evidence, source_message_id, confidence, prev.id),
    )
    observe(con, guild_id, prev.id, source_message_id, seen)
    if not prev.is_active:
        index_fact_vector_if_present(con, prev.id)
    reason = "re-activated" if not prev.is_active else None
    add_history(
        con,
        guild_id,
        prev.id,
        subject,
        "update",
        prev.fact,
        fact,
        actor,
        source_message_id,
        reason,
        now=now,
    )
    changed = prev.evidence_text != evidence or prev.fact_type != fact_type
    return UpsertResult(get_fact(con, guild_id, prev.id), "update", changed)  # type: ignore[arg-type]


def add_history(
    con: Connection,
    guild_id: str,
    fact_id: int | None,
    subject: str | None,
    event: str,
    old_text: str | None,
    new_text: str | None,
    actor: str,
    source_message_id: str | None = None,
    reason: str | None = None,
    *,
    now: str,
    linked_fact_id: int | None = None,
    counted_on: str | None = None,
) -> None:
    """One history row; ``linked_fact_id`` names the other fact of the change
    (a supersede's old or new fact). An add or an archive also counts in the
    daily series, on the day of ``counted_on`` (the source message's time;
    None: ``now``)."""
    con.execute(
        "INSERT INTO fact_history (guild_id, fact_id, subject, event, old_text, new_text, actor, "
        "source_message_id, reason, created_at, linked_fact_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            guild_id,
            fact_id,
            subject,
            event,
            old_text,
            new_text,
            actor,
            source_message_id,
            reason,
            now,
            linked_fact_id,
        ),
    )
    series = COUNTED_EVENTS.get(event)
    if series is not None:
        count(con, guild_id, counted_on or now, series)


def get_fact(con: Connection, guild_id: str, fact_id: int) -> Fact | None:
    row = con.execute(
        f"SELECT {FACT_COLUMNS} FROM memory_facts WHERE guild_id = ? AND id = ?",
        (guild_id, fact_id),
    ).fetchone()
    return row_to_fact(row) if row else None


def get_fact_any_guild(con: Connection, fact_id: int) -> Fact | None:
    """For operator tools addressing a fact by id; callers then check the guild."""
    row = con.execute(
        f"SELECT {FACT_COLUMNS} FROM memory_facts WHERE id = ?", (fact_id,)
    ).fetchone()
    return row_to_fact(row) if row else None


def list_facts(
    con: Connection,
    guild_id: str,
    *,
    subject: str | None = None,
    fact_type: str | None = None,
    active: bool | None = True,
    before_id: int | None = None,
    limit: int = 50,
    subjects: Sequence[str] | None = None,
) -> list[Fact]:
    """Newest first by id; ``before_id`` is the cursor for the next page."""
    where = ["guild_id = ?"]
    args: list[Any] = [guild_id]
    if subject is not None:
        where.append("subject = ?")
        args.append(subject)
    if subjects:
        where.append(f"subject IN ({marks(len(subjects))})")
        args.extend(subjects)
    if fact_type is not None:
        where.append("fact_type = ?")
        args.append(fact_type)
    if active is not None:
        where.append("is_active = ?")
        args.append(int(active))
    if before_id is not None:
        where.append("id < ?")
        args.append(before_id)
    args.append(limit)
    rows = con.execute(
        f"SELECT {FACT_COLUMNS} FROM memory_facts WHERE {' AND '.join(where)} "
        "ORDER BY id DESC LIMIT ?",
        args,
    ).fetchall()
    return [row_to_fact(r) for r in rows]


def search_facts_fts(
    con: Connection, guild_id: str, match: str, limit: int, subjects: Sequence[str] | None = None
) -> list[tuple[Fact, float]]:
    """Active facts matching an FTS5 expression, with raw (negative) bm25."""
    extra = f" AND f.subject IN ({marks(len(subjects))})" if subjects else ""

    def run(q: FtsQuery) -> list[tuple[Fact, float]]:
        rows = con.execute(
            f"SELECT {prefixed(FACT_COLUMNS, 'f')}, {q.rank} AS rank "
            f"FROM {q.source} JOIN memory_facts f ON f.id = memory_facts_fts.rowid "
            f"WHERE {q.where} AND f.guild_id = ? AND f.is_active = 1{extra} "
            # Equal ranks by id: the order FTS5's rowid scan gives them,
            # explicit so that every backend returns the same facts at the limit.
            "ORDER BY rank, f.id LIMIT ?",
            [*q.params, guild_id, *(subjects or ()), limit],
        ).fetchall()
        return [(row_to_fact(r), float(r["rank"])) for r in rows]

    return best_ranked(con, "memory_facts_fts", match, limit, run, lambda r: r[1])


def set_fact_active(
    con: Connection, guild_id: str, fact_id: int, active: bool, actor: str, now: str
) -> Fact | None:
    fact = get_fact(con, guild_id, fact_id)
    if fact is None or fact.is_active == active:
        return fact
    con.execute(
        "UPDATE memory_facts SET is_active = ?, updated_at = ? WHERE id = ?",
        (int(active), now, fact_id),
    )
    if active:
        index_fact_vector_if_present(con, fact_id)
    else:
        delete_fact_vectors_index(con, [fact_id])
    add_history(
        con,
        guild_id,
        fact_id,
        fact.subject,
        "restore" if active else "archive",
        fact.fact,
        fact.fact,
        actor,
        now=now,
    )
    return get_fact(con, guild_id, fact_id)


def edit_fact(
    con: Connection,
    guild_id: str,
    fact_id: int,
    *,
    text: str | None,
    fact_type: str | None,
    actor: str,
    now: str,
) -> Fact | None:
    """Operator correction; raises IntegrityError if the new text duplicates another fact."""
    fact = get_fact(con, guild_id, fact_id)
    if fact is None:
        return None
    new_text = text if text is not None else fact.fact
    new_type = fact_type if fact_type is not None else fact.fact_type
    if new_text == fact.fact and new_type == fact.fact_type:
        return fact
    con.execute(
        "UPDATE memory_facts SET fact = ?, fact_type = ?, updated_at = ? WHERE id = ?",
        (new_text, new_type, now, fact_id),
    )
    # Stale vectors must not rank the corrected text; the embed job re-creates them.
    con.execute("DELETE FROM memory_fact_vectors WHERE fact_id = ?", (fact_id,))
    delete_fact_vectors_index(con, [fact_id])
    add_history(
        con,
        guild_id,
        fact_id,
        fact.subject,
        "update",
        fact.fact,
        new_text,
        actor,
        reason="operator edit",
        now=now,
    )
    return get_fact(con, guild_id, fact_id)


def delete_fact(
    con: Connection,
    guild_id: str,
    fact_id: int,
    actor: str,
    now: str,
    *,
    event: str = "delete",
    reason: str | None = None,
) -> bool:
    """Hard delete; ``event``/``reason`` name why in the content-free history row."""
    fact = get_fact(con, guild_id, fact_id)
    if fact is None:
        return False
    delete_fact_vectors_index(con, [fact_id])
    con.execute("DELETE FROM memory_traces WHERE guild_id = ? AND fact_id = ?", (guild_id, fact_id))
    erase_refs(con, guild_id, fact_refs([fact_id]))
    con.execute("DELETE FROM memory_facts WHERE id = ?", (fact_id,))
    # The audit trail keeps that a delete happened, not what was deleted.
    con.execute(
        "UPDATE fact_history SET old_text = NULL, new_text = NULL WHERE fact_id = ?", (fact_id,)
    )
    add_history(
        con, guild_id, fact_id, fact.subject, event, None, None, actor, None, reason, now=now
    )
    return True


HISTORY_COLUMNS = (
    "id, guild_id, fact_id, event, old_text, new_text, actor, source_message_id, "
    "reason, created_at, linked_fact_id"
)


def row_to_history(r: Any) -> HistoryEntry:
    """A ``fact_history`` row read with ``HISTORY_COLUMNS``."""
    return HistoryEntry(
        id=int(r["id"]),
        guild_id=r["guild_id"],
        fact_id=r["fact_id"],
        event=r["event"],
        old_text=r["old_text"],
        new_text=r["new_text"],
        actor=r["actor"],
        source_message_id=r["source_message_id"],
        reason=r["reason"],
        created_at=r["created_at"],
        linked_fact_id=r["linked_fact_id"],
    )


def fact_history(con: Connection, guild_id: str, fact_id: int) -> list[HistoryEntry]:
    rows = con.execute(
        f"SELECT {HISTORY_COLUMNS} FROM fact_history WHERE guild_id = ? AND fact_id = ? "
        "ORDER BY id",
        (guild_id, fact_id),
    ).fetchall()
    return [row_to_history(r) for r in rows]


def snapshot_facts(con: Connection, per_subject: int, lore_per_guild: int = 12) -> list[Fact]:
    """Newest ``per_subject`` active, current facts of every member
    (``lore_per_guild`` for lore) in every guild."""
    rows = con.execute(
        f"SELECT {FACT_COLUMNS} FROM ("
        f"  SELECT {FACT_COLUMNS}, row_number() OVER ("
        "    PARTITION BY guild_id, subject ORDER BY updated_at DESC, id DESC) AS rn "
        "  FROM memory_facts WHERE is_active = 1 AND valid_to IS NULL"
        ") WHERE rn <= CASE WHEN subject = ? THEN ? ELSE ? END "
        "ORDER BY guild_id, subject, updated_at DESC",
        (LORE_SUBJECT, lore_per_guild, per_subject),
    ).fetchall()
    return [row_to_fact(r) for r in rows]


def display_names(con: Connection) -> dict[tuple[str, str], str]:
    return {
        (r["guild_id"], r["user_id"]): r["display_name"]
        for r in con.execute("SELECT guild_id, user_id, display_name FROM members")
    }


def guild_names(con: Connection) -> dict[str, str | None]:
    return {r["guild_id"]: r["name"] for r in con.execute("SELECT guild_id, name FROM guilds")}


# -- forget -------------------------------------------------------------------------


@dataclass(frozen=True)
class ForgetCounts:
    facts: int
    vectors: int
    messages: int
    traces: int


def forget_user(con: Connection, guild_id: str, user_id: str, actor: str, now: str) -> ForgetCounts:
    """Erase a member from one guild: facts about them, lore they caused, their
    messages, vectors, FTS rows (via triggers), traces, history content and
    their memories waiting for review."""
    msg_rows = con.execute(
        "SELECT seq, id FROM messages WHERE guild_id = ? AND author_id = ?", (guild_id, user_id)
    ).fetchall()
    msg_ids = [r["id"] for r in msg_rows]
    fact_ids = [
        int(r["id"])
        for r in con.execute(
            "SELECT id FROM memory_facts WHERE guild_id = ? AND subject = ?", (guild_id, user_id)
        )
    ]
    # Lore that came out of this member's own messages goes too.
    for chunk in chunks(msg_ids):
        fact_ids.extend(
            int(r["id"])
            for r in con.execute(
                f"SELECT id FROM memory_facts WHERE guild_id = ? AND subject = ? "
                f"AND source_message_id IN ({marks(len(chunk))})",
                [guild_id, LORE_SUBJECT, *chunk],
            )
        )
    # Episodes quoting them go whole; the others' messages are summarised again.
    for episode, sources in episodes_citing(con, guild_id, msg_ids).items():
        queue_rebuild(con, guild_id, episode, sources - set(msg_ids), now)
        fact_ids.append(episode)
    vectors = 0
    traces = 0
    for chunk in chunks(fact_ids):
        held = marks(len(chunk))
        vectors += con.execute(
            f"SELECT count(*) FROM memory_fact_vectors WHERE fact_id IN ({held})", chunk
        ).fetchone()[0]
        delete_fact_vectors_index(con, chunk)
        traces += con.execute(
            f"DELETE FROM memory_traces WHERE guild_id = ? AND fact_id IN ({held})",
            [guild_id, *chunk],
        ).rowcount
        con.execute(f"DELETE FROM fact_history WHERE fact_id IN ({held})", chunk)
        con.execute(f"DELETE FROM memory_facts WHERE id IN ({held})", chunk)
    erase_refs(con, guild_id, [*fact_refs(fact_ids), f"u:{user_id}"])
    # Before their messages: their review items are withdrawn as forgotten,
    # not as items whose message was deleted.
    forget_review_items(con, guild_id, user_id)
    traces += erase_messages(con, guild_id, msg_ids, [int(r["seq"]) for r in msg_rows])
    forget_replies_to(con, guild_id, user_id)
    con.execute("DELETE FROM action_log WHERE guild_id = ? AND subject = ?", (guild_id, user_id))
    con.execute("DELETE FROM members WHERE guild_id = ? AND user_id = ?", (guild_id, user_id))
    # voice_opt_outs is kept on purpose: it is consent, not memory, and
    # erasing it would silently re-enable transcription of this member.
    add_history(
        con,
        guild_id,
        None,
        user_id,
        "forget",
        None,
        None,
        actor,
        reason=f"erased {len(fact_ids)} facts and {len(msg_ids)} messages",
        now=now,
    )
    return ForgetCounts(len(fact_ids), int(vectors), len(msg_ids), int(traces))


def guilds_with_active_facts(con: Connection) -> list[str]:
    return [
        r[0] for r in con.execute("SELECT DISTINCT guild_id FROM memory_facts WHERE is_active = 1")
    ]


def forgotten_members(con: Connection, guild_id: str) -> dict[str, str]:
    """member id → when they were last forgotten in this guild (the
    ``forget`` rows ``forget_user`` leaves in the fact history)."""
    rows = con.execute(
        "SELECT subject, max(created_at) FROM fact_history WHERE guild_id = ? "
        "AND event = 'forget' AND subject IS NOT NULL GROUP BY subject",
        (guild_id,),
    ).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}
