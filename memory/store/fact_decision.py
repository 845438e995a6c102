"""SQL that applies a write decision (``memory.decision``) to the
facts of one subject. Functions run inside the caller's write transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory.db.changes import FactsChanged, record
from memory.db.core import Connection
from memory.decision import CurrentFact, Decision, decide
from memory.models import Fact
from memory.store.fact_time import message_time, observe
from memory.store.facts import add_history, get_fact, upsert_fact
from memory.store.usage import count
from memory.store.vectors import delete_fact_vectors_index


@dataclass(frozen=True)
class NewFact:
    guild_id: str
    channel_id: str | None
    subject: str
    fact: str
    fact_type: str
    evidence: str | None
    source_message_id: str | None
    confidence: float
    observed_at: str | None = None


@dataclass(frozen=True)
class Applied:
    fact: Fact
    changed: bool  # the text or its evidence changed: (re-)embed it


def current_facts(con: Connection, guild_id: str, subject: str) -> list[CurrentFact]:
    """The subject's active facts that are still true."""
    rows = con.execute(
        "SELECT id, fact, observed_at, last_observed_at FROM memory_facts "
        "WHERE guild_id = ? AND subject = ? AND is_active = 1 AND valid_to IS NULL ORDER BY id",
        (guild_id, subject),
    ).fetchall()
    return [
        CurrentFact(
            int(r["id"]),
            r["fact"],
            r["observed_at"] or "",
            r["last_observed_at"] or r["observed_at"] or "",
        )
        for r in rows
    ]


def current_facts_of(
    con: Connection, guild_id: str, subjects: Sequence[str]
) -> dict[str, list[CurrentFact]]:
    """``current_facts`` of each of ``subjects``."""
    return {s: current_facts(con, guild_id, s) for s in subjects}


def observed_time(con: Connection, new: NewFact, now: str) -> str:
    return new.observed_at or message_time(con, new.guild_id, new.source_message_id) or now


def apply_decision(
    con: Connection, new: NewFact, decision: Decision, *, now: str, actor: str
) -> Applied:
    seen = observed_time(con, new, now)
    if decision.kind == "noop":
        target = get_fact(con, new.guild_id, decision.targets[0])
        assert target is not None
        if target.fact != new.fact:
            return _paraphrase(con, new, target, decision.reason, seen, now, actor)
        # The same text: the store's re-observation of a known fact.
    if decision.kind == "update":
        return _refine(con, new, decision, seen, now, actor)
    up = upsert_fact(
        con,
        guild_id=new.guild_id,
        channel_id=new.channel_id,
        subject=new.subject,
        fact=new.fact,
        fact_type=new.fact_type,
        evidence=new.evidence,
        source_message_id=new.source_message_id,
        confidence=new.confidence,
        now=now,
        actor=actor,
        observed_at=seen,
    )
    fact = up.fact
    if decision.closed_at is not None:
        if up.event == "add":
            _close(con, fact.id, decision.closed_at, now)
            add_history(
                con,
                new.guild_id,
                fact.id,
                new.subject,
                "historical",
                None,
                fact.fact,
                actor,
                new.source_message_id,
                decision.reason,
                now=now,
                linked_fact_id=decision.closed_by,
            )
    elif fact.valid_to is not None:
        # The same text was true before and is true again: it is current anew.
        con.execute(
            "UPDATE memory_facts SET valid_to = NULL, updated_at = ? WHERE id = ?", (now, fact.id)
        )
        add_history(
            con,
            new.guild_id,
            fact.id,
            new.subject,
            "reopen",
            fact.fact,
            fact.fact,
            actor,
            new.source_message_id,
            f"true again since {seen}",
            now=now,
        )
    if decision.kind == "supersede":
        for old_id in decision.targets:
            _supersede(con, new, old_id, fact, seen, decision.reason, now, actor)
    out = get_fact(con, new.guild_id, fact.id)
    assert out is not None
    return Applied(out, up.changed)


def supersede_by_edit(
    con: Connection, guild_id: str, fact_id: int, *, actor: str, now: str
) -> list[int]:
    """After an operator edited a current fact: the edit is the newest word on
    its slot, so the subject's other current facts it contradicts (the same
    single-valued slot, another value) close now, with supersede rows naming
    the operator. Returns their ids."""
    fact = get_fact(con, guild_id, fact_id)
    if fact is None or not fact.is_active or fact.valid_to is not None:
        return []
    others = [c for c in current_facts(con, guild_id, fact.subject) if c.id != fact.id]
    decision = decide(fact.fact, now, others)
    if decision.kind != "supersede":
        return []
    new = NewFact(
        guild_id,
        fact.channel_id,
        fact.subject,
        fact.fact,
        fact.fact_type,
        fact.evidence_text,
        None,
        fact.confidence,
        now,
    )
    for old_id in decision.targets:
        _supersede(con, new, old_id, fact, now, f"operator edit, {decision.reason}", now, actor)
    return list(decision.targets)


def _close(con: Connection, fact_id: int, valid_to: str, now: str) -> None:
    con.execute(
        "UPDATE memory_facts SET valid_to = ?, updated_at = ? WHERE id = ?",
        (valid_to, now, fact_id),
    )


def _supersede(
    con: Connection,
    new: NewFact,
    old_id: int,
    fact: Fact,
    seen: str,
    reason: str,
    now: str,
    actor: str,
) -> None:
    """Close ``old_id`` at ``seen``; it stays active (not archived) so a
    question about the time it was true still finds it."""
    old = get_fact(con, new.guild_id, old_id)
    if old is None or old.id == fact.id:
        return
    _close(con, old.id, seen, now)
    count(con, new.guild_id, seen, "facts_superseded")
    add_history(
        con,
        new.guild_id,
        old.id,
        new.subject,
        "supersede",
        old.fact,
        fact.fact,
        actor,
        new.source_message_id,
        f"{reason}: superseded by fact {fact.id}",
        now=now,
        linked_fact_id=fact.id,
    )
    add_history(
        con,
        new.guild_id,
        fact.id,
        new.subject,
        "supersede",
        old.fact,
        fact.fact,
        actor,
        new.source_message_id,
        f"{reason}: supersedes fact {old.id}",
        now=now,
        linked_fact_id=old.id,
    )


def _paraphrase(
    con: Connection, new: NewFact, target: Fact, reason: str, seen: str, now: str, actor: str
) -> Applied:
    """The existing fact gets the source and the observation; the history
    says which words were taken as the same."""
    add_history(
        con,
        new.guild_id,
        target.id,
        new.subject,
        "noop",
        target.fact,
        new.fact,
        actor,
        new.source_message_id,
        reason,
        now=now,
    )
    return _observe_again(con, new, target.id, seen, now)


def _observe_again(con: Connection, new: NewFact, fact_id: int, seen: str, now: str) -> Applied:
    con.execute(
        "UPDATE memory_facts SET updated_at = ?, confidence = max(confidence, ?) WHERE id = ?",
        (now, new.confidence, fact_id),
    )
    observe(con, new.guild_id, fact_id, new.source_message_id, seen)
    fact = get_fact(con, new.guild_id, fact_id)
    assert fact is not None
    return Applied(fact, False)


def _refine(
    con: Connection, new: NewFact, decision: Decision, seen: str, now: str, actor: str
) -> Applied:
    """The existing fact takes the more specific text."""
    target = decision.targets[0]
    clash = con.execute(
        "SELECT id FROM memory_facts WHERE guild_id = ? AND subject = ? AND fact = ?",
        (new.guild_id, new.subject, new.fact),
    ).fetchone()
    if clash is not None:
        # The refined text is a row of its own already (closed or archived):
        # keep the one row per text and count this as a new observation
        # (its validity may start earlier now, with no history row to say so).
        record(con, FactsChanged((target,)))
        return _observe_again(con, new, target, seen, now)
    old = get_fact(con, new.guild_id, target)
    assert old is not None
    con.execute(
        "UPDATE memory_facts SET fact = ?, fact_type = ?, evidence_text = ?, "
        "source_message_id = ?, channel_id = ?, confidence = max(confidence, ?), "
        "updated_at = ? WHERE id = ?",
        (
            new.fact,
            new.fact_type,
            new.evidence,
            new.source_message_id,
            new.channel_id,
            new.confidence,
            now,
            target,
        ),
    )
    # Vectors of the old text must not rank the new one; the embed job re-creates them.
    con.execute("DELETE FROM memory_fact_vectors WHERE fact_id = ?", (target,))
    delete_fact_vectors_index(con, [target])
    observe(con, new.guild_id, target, new.source_message_id, seen)
    add_history(
        con,
        new.guild_id,
        target,
        new.subject,
        "update",
        old.fact,
        new.fact,
        actor,
        new.source_message_id,
        decision.reason,
        now=now,
    )
    fact = get_fact(con, new.guild_id, target)
    assert fact is not None
    return Applied(fact, True)
