"""All SQL for deletion receipts: what an erase removed, as counts per kind,
under the id the member was given. No erased text is ever written here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memory.db.core import Connection

COLUMNS = "id, guild_id, user_id, scope, actor, counts, created_at"


@dataclass(frozen=True)
class Receipt:
    id: str
    guild_id: str | None  # None: every guild at once
    user_id: str
    # "member" (everything about them in a guild), "everywhere" (in every
    # guild), "fact:<id>" (one fact about them)
    scope: str
    actor: str
    counts: dict[str, int]
    created_at: str

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _receipt(r: Any) -> Receipt:
    try:
        raw = json.loads(r["counts"])
        counts = {str(k): int(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
    except (ValueError, TypeError):
        counts = {}
    return Receipt(
        id=str(r["id"]),
        guild_id=r["guild_id"],
        user_id=str(r["user_id"]),
        scope=str(r["scope"]),
        actor=str(r["actor"]),
        counts=counts,
        created_at=str(r["created_at"]),
    )


def add_receipt(
    con: Connection,
    receipt_id: str,
    *,
    guild_id: str | None,
    user_id: str,
    scope: str,
    actor: str,
    counts: Mapping[str, int],
    now: str,
) -> Receipt:
    clean = {k: int(v) for k, v in counts.items()}
    con.execute(
        f"INSERT INTO deletion_receipts ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (receipt_id, guild_id, user_id, scope, actor, json.dumps(clean, sort_keys=True), now),
    )
    return Receipt(receipt_id, guild_id, user_id, scope, actor, clean, now)


def get_receipt(con: Connection, receipt_id: str) -> Receipt | None:
    row = con.execute(
        f"SELECT {COLUMNS} FROM deletion_receipts WHERE id = ?", (receipt_id,)
    ).fetchone()
    return None if row is None else _receipt(row)


def recent_receipts(con: Connection, guild_id: str | None, limit: int) -> list[Receipt]:
    """Newest first; of one guild (and the erases across every guild), or all."""
    if guild_id is None:
        rows = con.execute(
            f"SELECT {COLUMNS} FROM deletion_receipts ORDER BY created_at DESC, id LIMIT ?",
            (limit,),
        ).fetchall()
    else:
        rows = con.execute(
            f"SELECT {COLUMNS} FROM deletion_receipts WHERE guild_id = ? OR guild_id IS NULL "
            "ORDER BY created_at DESC, id LIMIT ?",
            (guild_id, limit),
        ).fetchall()
    return [_receipt(r) for r in rows]


def remaining(con: Connection, receipt: Receipt) -> dict[str, int]:
    """What memory still holds of what ``receipt`` erased: for one fact
    (scope ``fact:<id>``), whether that fact is back; for a member, the facts
    about them stored before the erase and their messages written before it,
    in its guild or in all. Zero everywhere after an erase, unless something
    old came back since (a re-import of old history)."""
    if receipt.scope.startswith("fact:"):
        fact_id = receipt.scope.removeprefix("fact:")
        if not fact_id.isdigit():
            return {}
        row = con.execute(
            "SELECT count(*) FROM memory_facts WHERE id = ? AND guild_id = ?",
            (int(fact_id), receipt.guild_id),
        ).fetchone()
        return {"facts": int(row[0])}
    where = "" if receipt.guild_id is None else " AND guild_id = ?"
    extra: list[Any] = [] if receipt.guild_id is None else [receipt.guild_id]
    facts = con.execute(
        f"SELECT count(*) FROM memory_facts WHERE subject = ? AND created_at <= ?{where}",
        [receipt.user_id, receipt.created_at, *extra],
    ).fetchone()[0]
    messages = con.execute(
        f"SELECT count(*) FROM messages WHERE author_id = ? AND created_at <= ?{where}",
        [receipt.user_id, receipt.created_at, *extra],
    ).fetchone()[0]
    return {"facts": int(facts), "messages": int(messages)}
