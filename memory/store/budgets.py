"""All SQL for budgets, memory pins, expiry and purge.

A scope is a set of current facts with a budget: one member's facts, the
guild's lore, one channel's episodes, or everything current in the guild.
Pinned facts and canon (pinned messages) are exempt: they neither count
against a budget nor are ever chosen to go. Superseded facts (closed by a
newer value) are history and count nowhere.

Value, lowest first (what a budget or a failed compaction archives first):
confidence (how important the extractor judged it), then how many times it
was observed, then how recently it was last observed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memory.db.core import Connection
from memory.db.sql import dialect_of, prefixed
from memory.models import LORE_SUBJECT, Fact
from memory.store.facts import FACT_COLUMNS, add_history, delete_fact, get_fact, row_to_fact
from memory.store.pins import CANON_TYPE
from memory.store.vectors import delete_fact_vectors_index

ScopeKind = Literal["member", "lore", "episodes", "guild"]
SCOPE_KINDS: tuple[ScopeKind, ...] = ("member", "lore", "episodes", "guild")
EPISODE_TYPE = "episode"
COMPACTION_ACTOR = "system:compaction"


@dataclass(frozen=True)
class Scope:
    guild_id: str
    kind: ScopeKind
    key: str | None = None  # the member (subject) or the channel of episodes

    @property
    def label(self) -> str:
        return self.kind if self.key is None else f"{self.kind}:{self.key}"


def scopes_of(guild_id: str, subject: str, channel_id: str | None, fact_type: str) -> list[Scope]:
    """The scopes a fact written with these fields counts in, narrowest first."""
    if fact_type == EPISODE_TYPE:
        first = Scope(guild_id, "episodes", channel_id or "")
    elif subject == LORE_SUBJECT:
        first = Scope(guild_id, "lore")
    else:
        first = Scope(guild_id, "member", subject)
    return [first, Scope(guild_id, "guild")]


def _where(scope: Scope, alias: str = "f", *, pins: bool = True) -> tuple[str, list[Any]]:
    """The scope's counted facts; ``pins=False`` leaves pinned facts in."""
    a = alias
    parts = [
        f"{a}.guild_id = ?",
        f"{a}.is_active = 1",
        f"{a}.valid_to IS NULL",
        f"{a}.fact_type != '{CANON_TYPE}'",
    ]
    if pins:
        parts.append(f"NOT EXISTS (SELECT 1 FROM memory_pins p WHERE p.fact_id = {a}.id)")
    args: list[Any] = [scope.guild_id]
    if scope.kind == "member":
        parts += [f"{a}.subject = ?", f"{a}.fact_type != '{EPISODE_TYPE}'"]
        args.append(scope.key)
    elif scope.kind == "lore":
        parts += [f"{a}.subject = ?", f"{a}.fact_type != '{EPISODE_TYPE}'"]
        args.append(LORE_SUBJECT)
    elif scope.kind == "episodes":
        parts += [f"{a}.fact_type = '{EPISODE_TYPE}'", f"coalesce({a}.channel_id, '') = ?"]
        args.append(scope.key or "")
    return " AND ".join(parts), args


def _facts(con: Connection, scope: Scope) -> str:
    """``memory_facts f``, read through ``facts_budget`` for a guild's total.

    The guild scope is every current fact of the guild: without statistics
    SQLite reads it through ``facts_guild`` (two equalities) and the table,
    about 45 ms at 100k facts; the partial index of current facts answers
    the count from the index alone and walks value order from its low end
    (m020). PostgreSQL's planner chooses by its own statistics."""
    if scope.kind == "guild" and dialect_of(con) == "sqlite":
        return "memory_facts f INDEXED BY facts_budget"
    return "memory_facts f"


def count(con: Connection, scope: Scope) -> int:
    """The facts of a scope that count against its budget: its current facts
    less the pinned ones (few; counted apart so that the many are counted
    from an index).

    The pinned ones are read from the guild's pins, each fact then by its
    id: ``CROSS JOIN`` keeps that order in SQLite, whose planner (no
    statistics) otherwise walks every current fact of the guild and looks
    for a pin of each, 100 ms at 100k facts (bench/big_guild.py). PostgreSQL
    plans it as any inner join."""
    where, args = _where(scope, pins=False)
    total = con.execute(f"SELECT count(*) FROM {_facts(con, scope)} WHERE {where}", args)
    pinned = con.execute(
        f"SELECT count(*) FROM memory_pins p CROSS JOIN memory_facts f "
        f"WHERE f.id = p.fact_id AND p.guild_id = ? AND {where}",
        [scope.guild_id, *args],
    )
    return int(total.fetchone()[0]) - int(pinned.fetchone()[0])


_VALUE_ORDER = (
    "f.confidence ASC, "
    "(SELECT count(*) FROM fact_sources s WHERE s.fact_id = f.id) ASC, "
    "coalesce(f.last_observed_at, f.updated_at) ASC, f.id ASC"
)


def lowest_value(con: Connection, scope: Scope, limit: int) -> list[Fact]:
    """The scope's ``limit`` lowest-value facts, lowest first.

    Confidence is the value's first key: the ``limit`` lowest facts all have
    a confidence at most that of the ``limit``-th in confidence order, read
    by walking that order (an index for a guild's total). Only the facts up
    to that confidence are then ordered by the whole value — not every fact
    of a guild, each with a count of its sources."""
    where, args = _where(scope)
    facts = _facts(con, scope)
    bound = con.execute(
        f"SELECT f.confidence FROM {facts} WHERE {where} ORDER BY f.confidence LIMIT 1 OFFSET ?",
        [*args, max(0, limit - 1)],
    ).fetchone()
    upto = "" if bound is None else " AND f.confidence <= ?"
    rows = con.execute(
        f"SELECT {prefixed(FACT_COLUMNS, 'f')} FROM {facts} WHERE {where}{upto} "
        f"ORDER BY {_VALUE_ORDER} LIMIT ?",
        [*args, *([] if bound is None else [bound[0]]), limit],
    ).fetchall()
    return [row_to_fact(r) for r in rows]


def newest(con: Connection, scope: Scope) -> Fact | None:
    """The scope's most recently written fact (the write that passed the budget)."""
    where, args = _where(scope)
    row = con.execute(
        f"SELECT {prefixed(FACT_COLUMNS, 'f')} FROM memory_facts f WHERE {where} "
        "ORDER BY f.updated_at DESC, f.id DESC LIMIT 1",
        args,
    ).fetchone()
    return row_to_fact(row) if row else None


def counts_in_scope(con: Connection, scope: Scope, fact_id: int) -> bool:
    where, args = _where(scope)
    row = con.execute(
        f"SELECT 1 FROM memory_facts f WHERE {where} AND f.id = ?", [*args, fact_id]
    ).fetchone()
    return row is not None


def archive(
    con: Connection, fact: Fact, *, now: str, actor: str, reason: str, event: str = "archive"
) -> None:
    """Leave the active set (kept, restorable until the purge), with history."""
    con.execute(
        "UPDATE memory_facts SET is_active = 0, updated_at = ? WHERE id = ?", (now, fact.id)
    )
    delete_fact_vectors_index(con, [fact.id])
    add_history(
        con,
        fact.guild_id,
        fact.id,
        fact.subject,
        event,
        fact.fact,
        None,
        actor,
        None,
        reason,
        now=now,
    )


def archive_lowest(
    con: Connection, scope: Scope, budget: int, *, now: str, reason: str
) -> list[int]:
    """Archive the lowest-value facts until the scope is at ``budget``."""
    excess = count(con, scope) - budget
    if excess <= 0:
        return []
    gone = lowest_value(con, scope, excess)
    for f in gone:
        archive(con, f, now=now, actor=COMPACTION_ACTOR, reason=reason)
    return [f.id for f in gone]


def merge_into(
    con: Connection, target: Fact, text: str, merged: Fact, *, now: str, reason: str
) -> None:
    """Compaction's edit: ``target`` takes the merged text and ``merged`` is
    archived into it. Raises IntegrityError when the text duplicates another
    fact of the subject."""
    con.execute(
        "UPDATE memory_facts SET fact = ?, updated_at = ? WHERE id = ?", (text, now, target.id)
    )
    # Vectors of the old text must not rank the merged one; the embed job re-creates them.
    con.execute("DELETE FROM memory_fact_vectors WHERE fact_id = ?", (target.id,))
    delete_fact_vectors_index(con, [target.id])
    add_history(
        con,
        target.guild_id,
        target.id,
        target.subject,
        "update",
        target.fact,
        text,
        COMPACTION_ACTOR,
        None,
        reason,
        now=now,
        linked_fact_id=merged.id,
    )
    archive(
        con,
        merged,
        now=now,
        actor=COMPACTION_ACTOR,
        reason=f"merged into fact {target.id}: {reason}",
    )


# -- pins -----------------------------------------------------------------------


def pin(con: Connection, guild_id: str, fact_id: int, actor: str, now: str) -> Fact | None:
    fact = get_fact(con, guild_id, fact_id)
    if fact is None:
        return None
    cur = con.execute(
        "INSERT OR IGNORE INTO memory_pins (fact_id, guild_id, pinned_by, pinned_at) "
        "VALUES (?, ?, ?, ?)",
        (fact_id, guild_id, actor, now),
    )
    if cur.rowcount:
        add_history(con, guild_id, fact_id, fact.subject, "pin", None, None, actor, now=now)
    return fact


def unpin(con: Connection, guild_id: str, fact_id: int, actor: str, now: str) -> bool:
    fact = get_fact(con, guild_id, fact_id)
    if fact is None:
        return False
    cur = con.execute(
        "DELETE FROM memory_pins WHERE guild_id = ? AND fact_id = ?", (guild_id, fact_id)
    )
    if cur.rowcount:
        add_history(con, guild_id, fact_id, fact.subject, "unpin", None, None, actor, now=now)
    return bool(cur.rowcount)


def pinned_ids(con: Connection, guild_id: str, fact_ids: Sequence[int] | None = None) -> set[int]:
    rows = con.execute("SELECT fact_id FROM memory_pins WHERE guild_id = ?", (guild_id,))
    found = {int(r[0]) for r in rows}
    return found if fact_ids is None else found & set(fact_ids)


def pinned_facts(con: Connection, guild_id: str, limit: int = 200) -> list[Fact]:
    rows = con.execute(
        f"SELECT {prefixed(FACT_COLUMNS, 'f')} FROM memory_pins p JOIN memory_facts f "
        "ON f.id = p.fact_id WHERE p.guild_id = ? ORDER BY p.pinned_at DESC LIMIT ?",
        (guild_id, limit),
    ).fetchall()
    return [row_to_fact(r) for r in rows]


# -- expiry and purge -----------------------------------------------------------


def expired(con: Connection, guild_id: str, fact_type: str, before: str, limit: int) -> list[Fact]:
    """Active, unpinned facts of a type neither observed nor touched (an edit,
    a restore) since ``before``."""
    rows = con.execute(
        f"SELECT {prefixed(FACT_COLUMNS, 'f')} FROM memory_facts f WHERE f.guild_id = ? "
        "AND f.is_active = 1 AND f.fact_type = ? "
        "AND max(coalesce(f.last_observed_at, ''), f.updated_at) < ? "
        "AND NOT EXISTS (SELECT 1 FROM memory_pins p WHERE p.fact_id = f.id) "
        "ORDER BY f.id LIMIT ?",
        (guild_id, fact_type, before, limit),
    ).fetchall()
    return [row_to_fact(r) for r in rows]


def purgeable(con: Connection, guild_id: str, before: str, limit: int) -> list[int]:
    """Archived, unpinned facts archived before ``before``."""
    rows = con.execute(
        "SELECT f.id FROM memory_facts f WHERE f.guild_id = ? AND f.is_active = 0 "
        "AND f.archived_at IS NOT NULL AND f.archived_at < ? "
        "AND NOT EXISTS (SELECT 1 FROM memory_pins p WHERE p.fact_id = f.id) "
        "ORDER BY f.id LIMIT ?",
        (guild_id, before, limit),
    ).fetchall()
    return [int(r[0]) for r in rows]


def hard_delete(
    con: Connection, guild_id: str, fact_ids: Sequence[int], actor: str, now: str, reason: str
) -> int:
    """Delete facts for good; each leaves a content-free ``purge`` history row."""
    n = 0
    for fact_id in fact_ids:
        n += delete_fact(con, guild_id, fact_id, actor, now, event="purge", reason=reason)
    return n


def fact_ids_of(con: Connection, guild_id: str, subject: str | None) -> list[int]:
    """Every fact (active or not) of a guild, or of one subject in it."""
    if subject is None:
        rows = con.execute("SELECT id FROM memory_facts WHERE guild_id = ?", (guild_id,))
    else:
        rows = con.execute(
            "SELECT id FROM memory_facts WHERE guild_id = ? AND subject = ?", (guild_id, subject)
        )
    return [int(r[0]) for r in rows]


def guild_ids(con: Connection) -> list[str]:
    return [str(r[0]) for r in con.execute("SELECT DISTINCT guild_id FROM memory_facts")]


# -- usage ----------------------------------------------------------------------


@dataclass(frozen=True)
class ScopeUsage:
    kind: ScopeKind
    key: str | None
    used: int


def usage(con: Connection, guild_id: str) -> list[ScopeUsage]:
    """Counted facts per scope of a guild: lore, the guild, each member and channel."""
    where, args = _where(Scope(guild_id, "guild"))
    rows = con.execute(
        "SELECT CASE WHEN f.fact_type = ? THEN 'episodes' WHEN f.subject = ? THEN 'lore' "
        "ELSE 'member' END AS kind, "
        "CASE WHEN f.fact_type = ? THEN coalesce(f.channel_id, '') "
        "WHEN f.subject = ? THEN NULL ELSE f.subject END AS k, count(*) AS n "
        f"FROM memory_facts f WHERE {where} GROUP BY kind, k ORDER BY n DESC",
        [EPISODE_TYPE, LORE_SUBJECT, EPISODE_TYPE, LORE_SUBJECT, *args],
    ).fetchall()
    out = [ScopeUsage(r["kind"], r["k"], int(r["n"])) for r in rows]
    out.insert(0, ScopeUsage("guild", None, sum(u.used for u in out)))
    return out


def archived_count(con: Connection, guild_id: str) -> int:
    row = con.execute(
        "SELECT count(*) FROM memory_facts WHERE guild_id = ? AND is_active = 0", (guild_id,)
    ).fetchone()
    return int(row[0])


def history_count(con: Connection, guild_id: str, event: str) -> int:
    row = con.execute(
        "SELECT count(*) FROM fact_history WHERE guild_id = ? AND event = ?", (guild_id, event)
    ).fetchone()
    return int(row[0])
