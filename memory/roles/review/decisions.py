"""What a moderator's decision writes, inside its transaction (``Memory.review``
runs these; ``memory.roles.review.role`` says what each action means).

Every decision leaves a ``fact_history`` row — ``review_approve``,
``review_edit``, ``review_merge``, ``review_reject``, ``review_expire`` or
``review_withdraw`` — naming the moderator as actor, with their reason, and
a content-free ``memory_review`` action-log row; then the item is closed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from memory.config import IngestConfig
from memory.db.core import Connection
from memory.decision import decide
from memory.errors import InvalidInput
from memory.extract.guards import normalise_fact, operator_text_refusal
from memory.ingest.budgets import archive_over_budget
from memory.models import LORE_SUBJECT, Fact
from memory.review_policy import ReviewItem
from memory.store import facts as store_facts
from memory.store import review as store_review
from memory.store.consent import member_name
from memory.store.fact_decision import (
    NewFact,
    apply_decision,
    current_facts,
    observed_time,
    supersede_by_edit,
)
from memory.store.fact_time import observe
from memory.store.ops import log_action

NOTE_MAX = 300


class ReviewClosed(InvalidInput):
    """The item is decided already, or gone (expired, withdrawn, another id)."""


@dataclass(frozen=True)
class ReviewResult:
    item: ReviewItem  # as it was closed
    outcome: str  # approved, edited, merged, rejected, expired, withdrawn
    fact: Fact | None  # the fact written, merged into or corrected
    message: str  # what happened, in a sentence


def checked_text(text: str) -> str:
    """A moderator's text, as an operator's edit checks it."""
    value = normalise_fact(text)
    if value is None:
        raise InvalidInput("fact text must be 4 to 190 characters")
    refusal = operator_text_refusal(value)
    if refusal is not None:
        raise InvalidInput(refusal)
    return value


def clean_note(note: str | None) -> str | None:
    value = " ".join((note or "").split())[:NOTE_MAX]
    return value or None


def _reason(item: ReviewItem, note: str | None, default: str) -> str:
    codes = ", ".join(f.code for f in item.flags) or "review"
    return f"review item {item.id} ({codes}): {note or default}"


def write(
    cfg: IngestConfig,
    con: Connection,
    item: ReviewItem,
    actor: str,
    note: str | None,
    now: str,
    text: str | None,
) -> ReviewResult:
    """Approve or edit a fact or lore line: the write decision as of now."""
    new = NewFact(
        item.guild_id,
        item.channel_id,
        item.subject,
        text or item.fact,
        item.fact_type,
        item.evidence_text,
        item.source_message_id,
        item.confidence,
        item.observed_at,
    )
    seen = observed_time(con, new, now)
    name = "" if item.subject == LORE_SUBJECT else member_name(con, item.guild_id, item.subject)
    decision = decide(new.fact, seen, current_facts(con, item.guild_id, item.subject), name)
    applied = apply_decision(con, new, decision, now=now, actor=actor)
    outcome = "edited" if text is not None else "approved"
    store_facts.add_history(
        con,
        item.guild_id,
        applied.fact.id,
        item.subject,
        "review_edit" if text is not None else "review_approve",
        item.fact if text is not None else None,
        applied.fact.fact,
        actor,
        item.source_message_id,
        _reason(item, note, f"{outcome} by a moderator ({decision.kind})"),
        now=now,
    )
    archive_over_budget(
        con,
        cfg,
        item.guild_id,
        item.subject,
        now,
        channel_id=item.channel_id,
        fact_type=item.fact_type,
    )
    return close(con, item, outcome, actor, note, now, applied.fact)


def correct(
    con: Connection,
    item: ReviewItem,
    actor: str,
    note: str | None,
    now: str,
    text: str | None,
) -> ReviewResult:
    """Approve or edit a member's correction of someone else's fact."""
    target = (
        store_facts.get_fact(con, item.guild_id, item.target_fact_id)
        if item.target_fact_id is not None
        else None
    )
    if target is None or not target.is_active:
        return reject(
            con,
            item,
            actor,
            "the fact it corrects is gone",
            now,
            "withdrawn",
            "review_withdraw",
        )
    new_text = text or item.fact
    edited = store_facts.edit_fact(
        con, item.guild_id, target.id, text=new_text, fact_type=None, actor=actor, now=now
    )
    assert edited is not None
    supersede_by_edit(con, item.guild_id, target.id, actor=actor, now=now)
    outcome = "edited" if text is not None else "approved"
    store_facts.add_history(
        con,
        item.guild_id,
        target.id,
        target.subject,
        f"review_{'edit' if text is not None else 'approve'}",
        target.fact,
        edited.fact,
        actor,
        None,
        _reason(item, note, f"correction by member {item.author_id} {outcome}"),
        now=now,
    )
    return close(con, item, outcome, actor, note, now, edited)


def merge(
    con: Connection,
    item: ReviewItem,
    actor: str,
    note: str | None,
    now: str,
    target_id: int | None,
    text: str | None,
) -> ReviewResult:
    """The item and a current fact of its subject are one memory."""
    if item.kind == "correction":
        raise InvalidInput("a correction is approved, edited or rejected, not merged")
    fid = target_id if target_id is not None else item.target_fact_id
    if fid is None:
        raise InvalidInput("nothing to merge with: name the fact to merge into")
    target = store_facts.get_fact(con, item.guild_id, fid)
    if target is None or not target.is_active or target.subject != item.subject:
        raise InvalidInput(f"fact {fid} is not a current fact about the same subject")
    merged = target
    if text is not None and text != target.fact:
        edited = store_facts.edit_fact(
            con, item.guild_id, target.id, text=text, fact_type=None, actor=actor, now=now
        )
        assert edited is not None
        supersede_by_edit(con, item.guild_id, target.id, actor=actor, now=now)
        merged = edited
    new = NewFact(
        item.guild_id,
        item.channel_id,
        item.subject,
        item.fact,
        item.fact_type,
        item.evidence_text,
        item.source_message_id,
        item.confidence,
        item.observed_at,
    )
    # The item's message is one more observation of the merged fact.
    observe(con, item.guild_id, target.id, item.source_message_id, observed_time(con, new, now))
    con.execute(
        "UPDATE memory_facts SET confidence = max(confidence, ?), updated_at = ? WHERE id = ?",
        (item.confidence, now, target.id),
    )
    store_facts.add_history(
        con,
        item.guild_id,
        target.id,
        item.subject,
        "review_merge",
        item.fact,
        merged.fact,
        actor,
        item.source_message_id,
        _reason(item, note, "merged by a moderator"),
        now=now,
    )
    fact = store_facts.get_fact(con, item.guild_id, target.id)
    return close(con, item, "merged", actor, note, now, fact)


def reject(
    con: Connection,
    item: ReviewItem,
    actor: str,
    note: str | None,
    now: str,
    outcome: str,
    event: str,
) -> ReviewResult:
    """Nothing is stored; the history keeps that it happened, not the text."""
    store_facts.add_history(
        con,
        item.guild_id,
        item.target_fact_id if item.kind == "correction" else None,
        item.subject,
        event,
        None,
        None,
        actor,
        item.source_message_id,
        _reason(item, note, f"{outcome}: not stored"),
        now=now,
    )
    return close(con, item, outcome, actor, note, now, None)


def close(
    con: Connection,
    item: ReviewItem,
    outcome: str,
    actor: str,
    note: str | None,
    now: str,
    fact: Fact | None,
) -> ReviewResult:
    fact_id = fact.id if fact is not None else None
    if not store_review.close(
        con, item, outcome=outcome, actor=actor, note=note, now=now, result_fact_id=fact_id
    ):
        raise ReviewClosed(closed_words(item.id, None))
    log_action(
        con,
        "memory_review",
        f"review item {item.id} {outcome} by {actor}",
        now,
        guild_id=item.guild_id,
        subject=item.author_id if item.subject == LORE_SUBJECT else item.subject,
        detail={
            "item_id": item.id,
            "event": outcome,
            "kind": item.kind,
            "flags": [f.code for f in item.flags],
            "fact_id": fact_id,
            "actor": actor,
        },
    )
    closed = replace(
        item,
        state="decided",
        outcome=outcome,
        decided_by=actor,
        decided_at=now,
        note=note,
        result_fact_id=fact_id,
    )
    return ReviewResult(closed, outcome, fact, result_words(closed, fact))


def closed_words(item_id: int, item: ReviewItem | None) -> str:
    if item is None:
        return f"review item {item_id} is no longer waiting"
    return f"review item {item_id} was {item.outcome or 'decided'} already" + (
        f" by {item.decided_by}" if item.decided_by else ""
    )


def result_words(item: ReviewItem, fact: Fact | None) -> str:
    if item.outcome == "merged" and fact is not None:
        return f"Merged into fact {fact.id}: {fact.fact}"
    if item.outcome in ("approved", "edited") and fact is not None:
        return f"{item.outcome.capitalize()}: fact {fact.id} now reads: {fact.fact}"
    if item.outcome == "withdrawn":
        return "Withdrawn: " + (item.note or "nothing to decide any more") + "; nothing stored"
    return f"{(item.outcome or 'decided').capitalize()}: nothing stored, its text deleted"
