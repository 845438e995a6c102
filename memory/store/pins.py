"""All SQL for pinned messages as canon lore: ``canon_pins`` maps a pinned
message to the lore fact it became. Functions run inside the caller's
transaction."""

from __future__ import annotations

from memory.db.core import Connection
from memory.models import LORE_SUBJECT, Fact
from memory.store.facts import get_fact, set_fact_active, upsert_fact
from memory.store.ops import log_action

CANON_TYPE = "canon"
CANON_CONFIDENCE = 0.9


def pinned_fact_id(con: Connection, guild_id: str, message_id: str) -> int | None:
    row = con.execute(
        "SELECT fact_id FROM canon_pins WHERE guild_id = ? AND message_id = ?",
        (guild_id, message_id),
    ).fetchone()
    return int(row[0]) if row else None


def pin(
    con: Connection,
    *,
    guild_id: str,
    channel_id: str,
    message_id: str,
    text: str,
    observed_at: str,
    actor: str,
    now: str,
) -> tuple[Fact, bool]:
    """Make ``text`` the canon fact of the pinned message (the message kept as
    its source); a different text pinned before for it (the message was
    edited) is archived. The fact, and whether anything changed."""
    old_id = pinned_fact_id(con, guild_id, message_id)
    old = get_fact(con, guild_id, old_id) if old_id is not None else None
    if old is not None and old.fact == text and old.is_active and old.fact_type == CANON_TYPE:
        return old, False
    if old is not None and old.fact != text:
        set_fact_active(con, guild_id, old.id, False, actor, now)
    up = upsert_fact(
        con,
        guild_id=guild_id,
        channel_id=channel_id,
        subject=LORE_SUBJECT,
        fact=text,
        fact_type=CANON_TYPE,
        evidence=None,
        source_message_id=message_id,
        confidence=CANON_CONFIDENCE,
        now=now,
        actor=actor,
        observed_at=observed_at,
    )
    con.execute(
        "INSERT INTO canon_pins (guild_id, message_id, channel_id, fact_id, pinned_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (guild_id, message_id) DO UPDATE SET "
        "fact_id = excluded.fact_id, channel_id = excluded.channel_id",
        (guild_id, message_id, channel_id, up.fact.id, now),
    )
    log_action(
        con,
        "memory_canon",
        f"pinned message {message_id} is canon fact {up.fact.id}",
        now,
        guild_id=guild_id,
        detail={"fact_id": up.fact.id, "message_id": message_id, "event": "pin"},
    )
    fact = get_fact(con, guild_id, up.fact.id)
    assert fact is not None
    return fact, True


def unpin(con: Connection, guild_id: str, message_id: str, actor: str, now: str) -> Fact | None:
    """Archive the canon fact of an unpinned message (history ``archive``);
    None if the message was not canon."""
    fact_id = pinned_fact_id(con, guild_id, message_id)
    if fact_id is None:
        return None
    con.execute(
        "DELETE FROM canon_pins WHERE guild_id = ? AND message_id = ?", (guild_id, message_id)
    )
    fact = set_fact_active(con, guild_id, fact_id, False, actor, now)
    log_action(
        con,
        "memory_canon",
        f"unpinned message {message_id}: canon fact {fact_id} archived",
        now,
        guild_id=guild_id,
        detail={"fact_id": fact_id, "message_id": message_id, "event": "unpin"},
    )
    return fact
