"""All SQL for the moderators' review queue (``review_queue``, migration
m021). Functions run inside the caller's transaction.

A pending row holds a proposed memory; it is no fact, so nothing that reads
``memory_facts`` sees it. Deciding it closes the row: when no review message
shows it the row is deleted at once, else it stays — without its text when
nothing was stored — until the bot has updated that message
(``forget_post``). Whatever the outcome, the decision is in ``fact_history``
(actor, reason) and the action log, as the caller writes them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memory.db.core import Connection
from memory.decision import content_tokens
from memory.review_policy import Flag, ReviewItem

# store.pins.CANON_TYPE, spelt out: store.facts erases through this module,
# and store.pins imports store.facts.
CANON = "canon"

REVIEW_COLUMNS = (
    "id, guild_id, kind, subject, author_id, channel_id, source_message_id, fact, fact_type, "
    "evidence_text, confidence, observed_at, target_fact_id, flags, state, outcome, "
    "decided_by, decided_at, note, result_fact_id, created_at, expires_at, "
    "post_channel_id, post_message_id"
)
# Outcomes after which nothing of the item is memory: its text goes at once.
FORGETTING = ("rejected", "expired", "withdrawn")


def _flags(raw: str | None) -> tuple[Flag, ...]:
    try:
        found = json.loads(raw or "[]")
    except ValueError:
        return ()
    return tuple(Flag(str(f[0]), str(f[1])) for f in found if isinstance(f, list) and len(f) == 2)


def _row(r: Any) -> ReviewItem:
    return ReviewItem(
        id=int(r["id"]),
        guild_id=r["guild_id"],
        kind=r["kind"],
        subject=r["subject"],
        author_id=r["author_id"],
        channel_id=r["channel_id"],
        source_message_id=r["source_message_id"],
        fact=r["fact"],
        fact_type=r["fact_type"],
        evidence_text=r["evidence_text"],
        confidence=float(r["confidence"]),
        observed_at=r["observed_at"],
        target_fact_id=None if r["target_fact_id"] is None else int(r["target_fact_id"]),
        flags=_flags(r["flags"]),
        state=r["state"],
        created_at=r["created_at"],
        expires_at=r["expires_at"],
        outcome=r["outcome"],
        decided_by=r["decided_by"],
        decided_at=r["decided_at"],
        note=r["note"],
        result_fact_id=None if r["result_fact_id"] is None else int(r["result_fact_id"]),
        post_channel_id=r["post_channel_id"],
        post_message_id=r["post_message_id"],
    )


def enqueue(
    con: Connection,
    *,
    guild_id: str,
    kind: str,
    subject: str,
    author_id: str | None,
    channel_id: str | None,
    source_message_id: str | None,
    fact: str,
    fact_type: str,
    evidence: str | None,
    confidence: float,
    observed_at: str | None,
    target_fact_id: int | None,
    flags: Sequence[Flag],
    now: str,
    expires_at: str,
) -> int:
    """Queue a memory for review; the id of its pending item (the one already
    waiting when the same text about the same subject waits)."""
    row = con.execute(
        "INSERT INTO review_queue (guild_id, kind, subject, author_id, channel_id, "
        "source_message_id, fact, fact_type, evidence_text, confidence, observed_at, "
        "target_fact_id, flags, state, created_at, expires_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?) "
        "ON CONFLICT DO NOTHING RETURNING id",
        (
            guild_id,
            kind,
            subject,
            author_id,
            channel_id,
            source_message_id,
            fact,
            fact_type,
            evidence,
            confidence,
            observed_at,
            target_fact_id,
            json.dumps([list(f) for f in flags]),
            now,
            expires_at,
        ),
    ).fetchone()
    if row is not None:
        return int(row[0])
    found = con.execute(
        "SELECT id FROM review_queue WHERE guild_id = ? AND subject = ? AND fact = ? "
        "AND state = 'pending'",
        (guild_id, subject, fact),
    ).fetchone()
    assert found is not None, "a pending item blocked the insert"
    return int(found[0])


def get_item(con: Connection, guild_id: str, item_id: int) -> ReviewItem | None:
    row = con.execute(
        f"SELECT {REVIEW_COLUMNS} FROM review_queue WHERE guild_id = ? AND id = ?",
        (guild_id, item_id),
    ).fetchone()
    return _row(row) if row else None


def pending(
    con: Connection, guild_id: str, limit: int = 100, *, before_id: int | None = None
) -> list[ReviewItem]:
    """The guild's pending items, oldest first (``before_id``: only older ones)."""
    extra = " AND id < ?" if before_id is not None else ""
    args: list[Any] = [guild_id, *([before_id] if before_id is not None else []), limit]
    rows = con.execute(
        f"SELECT {REVIEW_COLUMNS} FROM review_queue WHERE guild_id = ? AND state = 'pending'"
        f"{extra} ORDER BY id LIMIT ?",
        args,
    ).fetchall()
    return [_row(r) for r in rows]


def pending_counts(con: Connection) -> dict[str, int]:
    """Pending items per guild."""
    return {
        str(r[0]): int(r[1])
        for r in con.execute(
            "SELECT guild_id, count(*) FROM review_queue WHERE state = 'pending' GROUP BY guild_id"
        )
    }


def close(
    con: Connection,
    item: ReviewItem,
    *,
    outcome: str,
    actor: str,
    note: str | None,
    now: str,
    result_fact_id: int | None = None,
) -> bool:
    """Close a pending item; False when it was no longer pending. Deleted when
    no review message shows it; else kept for the bot to update that
    message, its text deleted when nothing of it was stored."""
    if item.post_message_id is None:
        cur = con.execute("DELETE FROM review_queue WHERE id = ? AND state = 'pending'", (item.id,))
        return bool(cur.rowcount)
    forget = outcome in FORGETTING
    cur = con.execute(
        "UPDATE review_queue SET state = 'decided', outcome = ?, decided_by = ?, "
        "decided_at = ?, note = ?, result_fact_id = ?"
        + (", fact = '', evidence_text = NULL" if forget else "")
        + " WHERE id = ? AND state = 'pending'",
        (outcome, actor, now, note, result_fact_id, item.id),
    )
    return bool(cur.rowcount)


def expired(con: Connection, now: str, limit: int = 500) -> list[ReviewItem]:
    """Pending items past their expiry, soonest first."""
    rows = con.execute(
        f"SELECT {REVIEW_COLUMNS} FROM review_queue WHERE state = 'pending' AND expires_at <= ? "
        "ORDER BY expires_at, id LIMIT ?",
        (now, limit),
    ).fetchall()
    return [_row(r) for r in rows]


# -- the review messages ---------------------------------------------------------------


def unposted(con: Connection, guild_id: str, limit: int) -> list[ReviewItem]:
    """Pending items no review message shows yet, oldest first."""
    rows = con.execute(
        f"SELECT {REVIEW_COLUMNS} FROM review_queue WHERE guild_id = ? AND state = 'pending' "
        "AND post_message_id IS NULL ORDER BY id LIMIT ?",
        (guild_id, limit),
    ).fetchall()
    return [_row(r) for r in rows]


def mark_posted(
    con: Connection, guild_id: str, item_id: int, channel_id: str, message_id: str
) -> bool:
    """Record the message that shows a pending item; False when it was
    decided (and so deleted) while the message was being sent."""
    cur = con.execute(
        "UPDATE review_queue SET post_channel_id = ?, post_message_id = ? "
        "WHERE guild_id = ? AND id = ? AND state = 'pending'",
        (channel_id, message_id, guild_id, item_id),
    )
    return bool(cur.rowcount)


def closed_posts(con: Connection, guild_id: str, limit: int) -> list[ReviewItem]:
    """Decided items whose review message still shows them as waiting."""
    rows = con.execute(
        f"SELECT {REVIEW_COLUMNS} FROM review_queue WHERE guild_id = ? AND state = 'decided' "
        "ORDER BY id LIMIT ?",
        (guild_id, limit),
    ).fetchall()
    return [_row(r) for r in rows]


def forget_post(con: Connection, guild_id: str, item_id: int) -> bool:
    """Drop a decided item once its review message says how it ended."""
    cur = con.execute(
        "DELETE FROM review_queue WHERE guild_id = ? AND id = ? AND state = 'decided'",
        (guild_id, item_id),
    )
    return bool(cur.rowcount)


# -- what a decision needs ---------------------------------------------------------------


def pinned_or_canon(con: Connection, guild_id: str, fact_ids: Sequence[int]) -> list[int]:
    """Those of ``fact_ids`` pinned (by an operator or their member) or canon."""
    out: list[int] = []
    for fid in fact_ids:
        row = con.execute(
            "SELECT f.fact_type, p.fact_id FROM memory_facts f "
            "LEFT JOIN memory_pins p ON p.fact_id = f.id WHERE f.guild_id = ? AND f.id = ?",
            (guild_id, fid),
        ).fetchone()
        if row is not None and (row[0] == CANON or row[1] is not None):
            out.append(int(fid))
    return out


def closest_fact(con: Connection, guild_id: str, subject: str, text: str) -> int | None:
    """The subject's current fact sharing the most words with ``text`` (a
    candidate to merge with), or None when none shares any. Lore also meets
    canon (both are the lore subject's)."""
    words = content_tokens(text)
    if not words:
        return None
    rows = con.execute(
        "SELECT id, fact FROM memory_facts WHERE guild_id = ? AND subject = ? "
        "AND is_active = 1 AND valid_to IS NULL ORDER BY id DESC LIMIT 500",
        (guild_id, subject),
    ).fetchall()
    best: tuple[float, int] | None = None
    for r in rows:
        theirs = content_tokens(str(r[1]))
        shared = len(words & theirs)
        if not shared:
            continue
        score = shared / len(words | theirs)
        if best is None or score > best[0]:
            best = (score, int(r[0]))
    return None if best is None else best[1]


# -- erasure ----------------------------------------------------------------------------------


def forget_member(con: Connection, guild_id: str, user_id: str) -> int:
    """A member is erased: every item about them or in their words goes —
    deleted, or, while a review message shows it, kept without anything of
    theirs (text, ids, source) until the bot has updated that message."""
    who = "(subject = ? OR author_id = ?)"
    n = con.execute(
        f"DELETE FROM review_queue WHERE guild_id = ? AND {who} AND post_message_id IS NULL",
        (guild_id, user_id, user_id),
    ).rowcount
    n += con.execute(
        "UPDATE review_queue SET state = 'decided', "
        "outcome = CASE WHEN state = 'pending' THEN 'withdrawn' ELSE outcome END, "
        "note = CASE WHEN state = 'pending' THEN 'its member was forgotten' ELSE note END, "
        "subject = ?, author_id = NULL, channel_id = NULL, source_message_id = NULL, "
        f"fact = '', evidence_text = NULL, flags = '[]' WHERE guild_id = ? AND {who}",
        ("", guild_id, user_id, user_id),
    ).rowcount
    return int(n)
