"""All SQL for the consent queue: sensitive facts about a member that wait
for the member's answer. Functions run inside the caller's transaction.

A pending row holds the fact's text only until it is decided: accepting
moves it into the facts (the caller applies the write decision), rejecting
and expiry delete the row. Either way a content-free ``fact_history`` row
(no fact id, no text) and an action-log row record the decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory.db.core import Connection
from memory.models import PendingFact
from memory.store.facts import add_history
from memory.store.ops import log_action

CONSENT_COLUMNS = (
    "id, guild_id, user_id, channel_id, message_id, fact, fact_type, evidence_text, "
    "confidence, category, observed_at, created_at, expires_at, prompted_at"
)


def _row(r: Any) -> PendingFact:
    return PendingFact(
        id=int(r["id"]),
        guild_id=r["guild_id"],
        user_id=r["user_id"],
        channel_id=r["channel_id"],
        message_id=r["message_id"],
        fact=r["fact"],
        fact_type=r["fact_type"],
        evidence_text=r["evidence_text"],
        confidence=float(r["confidence"]),
        category=r["category"],
        observed_at=r["observed_at"],
        created_at=r["created_at"],
        expires_at=r["expires_at"],
        prompted_at=r["prompted_at"],
    )


def enqueue(
    con: Connection,
    *,
    guild_id: str,
    user_id: str,
    channel_id: str | None,
    message_id: str,
    fact: str,
    fact_type: str,
    evidence: str | None,
    confidence: float,
    category: str,
    observed_at: str | None,
    now: str,
    expires_at: str,
) -> bool:
    """Queue a fact for the member's answer; False if the same text already waits."""
    cur = con.execute(
        "INSERT OR IGNORE INTO consent_queue (guild_id, user_id, channel_id, message_id, fact, "
        "fact_type, evidence_text, confidence, category, observed_at, created_at, expires_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            guild_id,
            user_id,
            channel_id,
            message_id,
            fact,
            fact_type,
            evidence,
            confidence,
            category,
            observed_at,
            now,
            expires_at,
        ),
    )
    if cur.rowcount == 0:
        return False
    add_history(
        con, guild_id, None, user_id, "consent_asked", None, None, "extractor", message_id,
        category, now=now,
    )  # fmt: skip
    return True


def pending_for(con: Connection, guild_id: str, user_id: str, now: str) -> list[PendingFact]:
    """The member's unexpired pending facts, oldest first."""
    rows = con.execute(
        f"SELECT {CONSENT_COLUMNS} FROM consent_queue "
        "WHERE guild_id = ? AND user_id = ? AND expires_at > ? ORDER BY id",
        (guild_id, user_id, now),
    ).fetchall()
    return [_row(r) for r in rows]


def take_unprompted(con: Connection, guild_id: str, user_id: str, now: str) -> list[PendingFact]:
    """The member's pending facts never shown in a prompt, marked as shown now."""
    rows = [p for p in pending_for(con, guild_id, user_id, now) if p.prompted_at is None]
    if rows:
        con.execute(
            "UPDATE consent_queue SET prompted_at = ? WHERE id IN "
            f"({', '.join('?' for _ in rows)})",
            (now, *(p.id for p in rows)),
        )
    return rows


def get_pending(con: Connection, guild_id: str, user_id: str, item_id: int) -> PendingFact | None:
    row = con.execute(
        f"SELECT {CONSENT_COLUMNS} FROM consent_queue WHERE guild_id = ? AND user_id = ? AND id = ?",
        (guild_id, user_id, item_id),
    ).fetchone()
    return _row(row) if row else None


def record_decision(
    con: Connection,
    item: PendingFact,
    decision: str,
    actor: str,
    now: str,
    fact_id: int | None = None,
) -> None:
    """Delete the pending row and record ``decision`` (accept, reject, expire)
    without its text."""
    con.execute("DELETE FROM consent_queue WHERE id = ?", (item.id,))
    add_history(
        con,
        item.guild_id,
        fact_id,
        item.user_id,
        f"consent_{decision}",
        None,
        None,
        actor,
        item.message_id,
        item.category,
        now=now,
    )
    log_action(
        con,
        "memory_consent",
        f"{decision} pending fact {item.id} ({item.category})",
        now,
        guild_id=item.guild_id,
        subject=item.user_id,
        detail={
            "pending_id": item.id,
            "decision": decision,
            "category": item.category,
            "fact_id": fact_id,
        },
    )


def guilds_with_expired(con: Connection, now: str) -> list[str]:
    rows = con.execute(
        "SELECT DISTINCT guild_id FROM consent_queue WHERE expires_at <= ? ORDER BY guild_id",
        (now,),
    ).fetchall()
    return [str(r[0]) for r in rows]


def expired(
    con: Connection, now: str, limit: int = 500, *, guild_id: str | None = None
) -> list[PendingFact]:
    """Pending facts past their expiry (of one guild, or all), soonest first."""
    where = "expires_at <= ?" + (" AND guild_id = ?" if guild_id is not None else "")
    args: tuple[Any, ...] = (now, guild_id) if guild_id is not None else (now,)
    rows = con.execute(
        f"SELECT {CONSENT_COLUMNS} FROM consent_queue WHERE {where} ORDER BY expires_at LIMIT ?",
        (*args, limit),
    ).fetchall()
    return [_row(r) for r in rows]


def counts(con: Connection, guild_ids: Sequence[str] | None = None) -> dict[str, dict[str, int]]:
    """Pending facts per guild and category (no texts, no members)."""
    out: dict[str, dict[str, int]] = {}
    for r in con.execute(
        "SELECT guild_id, category, count(*) FROM consent_queue GROUP BY guild_id, category"
    ):
        gid = str(r[0])
        if guild_ids is not None and gid not in guild_ids:
            continue
        out.setdefault(gid, {})[str(r[1])] = int(r[2])
    return out


def member_name(con: Connection, guild_id: str, user_id: str) -> str | None:
    row = con.execute(
        "SELECT display_name FROM members WHERE guild_id = ? AND user_id = ?", (guild_id, user_id)
    ).fetchone()
    return str(row[0]) if row else None
