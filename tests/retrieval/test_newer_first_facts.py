"""Same topic, newer first between a fact and a message
(memory.retrieval.newer_first.facts_among_messages): a fact counts as its
source message would — that message's author, when it was said — so a newer
message of the same author saying the same thing goes ahead of it. The pure
rule on hand-made hits, then through search on a real engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from memory.models import Hit
from memory.retrieval.newer_first import (
    NewerFirstRule,
    asks_when,
    facts_among_messages,
    facts_to_place,
)
from tests.helpers import ALICE, BOB, GUILD, make_hit, msg

QUERY = "How much was I pre-approved for the mortgage from Wells Fargo?"
JAN = "2023-01-10T09:00:00.000Z"
MAR = "2023-03-02T18:30:00.000Z"
JUN = "2023-06-18T12:00:00.000Z"
OLD_QUOTE = "I got pre-approved for a mortgage of $350,000 from Wells Fargo."
NEW_TEXT = "Remember when Wells Fargo pre-approved my mortgage for $400,000 instead?"


def _fact(n: int, quote: str | None, said_at: str, *, score: float, source: str) -> Hit:
    hit = make_hit(f"f{n}", "Alice was pre-approved.", score=score, kind="fact", created_at=said_at)
    return dataclasses.replace(hit, evidence_text=quote, source_message_id=source)


def _message(n: int, text: str, at: str, *, score: float, author: str = ALICE) -> Hit:
    return make_hit(f"m{n}", text, score=score, subject=author, created_at=at, guild_id=GUILD)


def _ids(hits: Sequence[Hit]) -> list[str]:
    return [h.id for h in hits]


AUTHORS = {"src-old": ALICE, "src-bob": BOB}


def test_a_newer_message_takes_an_older_facts_place_and_score() -> None:
    fact = _fact(1, OLD_QUOTE, JAN, score=0.7, source="src-old")
    other = _message(2, "We viewed three houses on Saturday.", MAR, score=0.6)
    newer = _message(3, NEW_TEXT, JUN, score=0.5)
    hits = [fact, other, newer]
    assert facts_to_place(hits, QUERY) == ["src-old"]
    out = facts_among_messages(hits, QUERY, AUTHORS)
    assert _ids(out) == ["m3", "m2", "f1"]
    assert [h.score for h in out] == [0.7, 0.6, 0.5]
    assert out[0].parts.newer_first == 0.7 - 0.5
    assert out[2].parts.newer_first == 0.5 - 0.7
    assert out[1] is other


def test_what_does_not_restate_a_fact_leaves_it_in_place() -> None:
    fact = _fact(1, OLD_QUOTE, JUN, score=0.7, source="src-old")

    def after(
        f: Hit, m: Hit, authors: dict[str, str] = AUTHORS, rule: NewerFirstRule | None = None
    ) -> list[str]:
        return _ids(facts_among_messages([f, m], QUERY, authors, rule or NewerFirstRule()))

    # An older message goes after the newer fact (it already leads).
    assert after(fact, _message(2, NEW_TEXT, JAN, score=0.5)) == ["f1", "m2"]
    older = _fact(1, OLD_QUOTE, JAN, score=0.7, source="src-old")
    newer = _message(2, NEW_TEXT, JUN, score=0.5)
    assert after(older, newer) == ["m2", "f1"]  # the rule applies
    # Another member's message; a fact whose source says another author wrote it.
    assert after(older, _message(2, NEW_TEXT, JUN, score=0.5, author=BOB)) == ["f1", "m2"]
    by_bob = _fact(1, OLD_QUOTE, JAN, score=0.7, source="src-bob")
    assert after(by_bob, newer) == ["f1", "m2"]
    # A source that is not stored (erased) tells no author.
    assert after(older, newer, {}) == ["f1", "m2"]
    # The same sitting, not a later one.
    assert after(older, _message(2, NEW_TEXT, "2023-01-10T09:30:00.000Z", score=0.5)) == [
        "f1",
        "m2",
    ]
    # Another topic: the message says none of the fact's phrases.
    assert after(older, _message(2, "My mortgage broker called.", JUN, score=0.5)) == ["f1", "m2"]
    # Switched off.
    assert after(older, newer, rule=NewerFirstRule(enabled=False)) == ["f1", "m2"]


def test_a_question_asking_when_keeps_the_fact_of_the_event_first() -> None:
    # LoCoMo: "When did Melanie sign up for a pottery class?" is answered by
    # the telling ("I just signed up for a pottery class yesterday", a fact),
    # not by a later mention ("I made it in pottery class yesterday").
    query = "When did I get pre-approved for the mortgage from Wells Fargo?"
    assert asks_when(query) and asks_when("when was it?")
    assert not asks_when(QUERY) and not asks_when("Whenever I ask, what is it?")
    fact = _fact(1, OLD_QUOTE, JAN, score=0.7, source="src-old")
    later = _message(2, NEW_TEXT, JUN, score=0.5)
    assert facts_to_place([fact, later], query) == []
    assert _ids(facts_among_messages([fact, later], query, AUTHORS)) == ["f1", "m2"]
    # The same two hits under a question about the current value.
    assert _ids(facts_among_messages([fact, later], QUERY, AUTHORS)) == ["m2", "f1"]


def test_facts_and_messages_among_themselves_are_left_to_their_own_rules() -> None:
    # Two facts: the write decision settles them. Two messages: the message
    # search ordered them over its own leading hits.
    f_old = _fact(1, OLD_QUOTE, JAN, score=0.7, source="src-old")
    f_new = _fact(2, NEW_TEXT, JUN, score=0.6, source="src-old")
    assert _ids(facts_among_messages([f_old, f_new], QUERY, AUTHORS)) == ["f1", "f2"]
    m_old = _message(1, OLD_QUOTE, JAN, score=0.7)
    m_new = _message(2, NEW_TEXT, JUN, score=0.6)
    assert facts_to_place([m_old, m_new], QUERY) == []
    assert _ids(facts_among_messages([m_old, m_new], QUERY, AUTHORS)) == ["m1", "m2"]
    # No message among the leading hits: no author is read.
    assert facts_to_place([f_old, f_new], QUERY) == []


def test_a_fact_without_a_quote_speaks_in_its_own_words() -> None:
    fact = dataclasses.replace(
        _fact(1, None, JAN, score=0.7, source="src-old"),
        text="Alice was pre-approved for a mortgage of $350,000 by Wells Fargo.",
    )
    out = facts_among_messages([fact, _message(2, NEW_TEXT, JUN, score=0.5)], QUERY, AUTHORS)
    assert _ids(out) == ["m2", "f1"]


# -- through search on a real engine -------------------------------------------------------------


async def _ingest(mem: Any, messages: Sequence[Any]) -> None:
    for m in messages:
        out = await mem.ingest_message(m, backpressure=True)
        assert out.status == "queued", out
    assert await mem.settle(60)


MARATHON = "What is my target time for the Berlin marathon?"


async def test_search_puts_a_newer_question_ahead_of_the_older_statements_fact(
    make_memory: Callable[..., Any],
) -> None:
    # LongMemEval's knowledge updates: the old value is a plain statement (a
    # fact), the new one is only said inside a question (no fact).
    mem = await make_memory()
    await _ingest(
        mem,
        [
            msg("My target for the Berlin marathon is 3 hours 30 minutes.", created_at=JAN),
            msg("I went hiking with Bob in the hills.", created_at=MAR),
            msg(
                "Did I mention my Berlin marathon target is now 3 hours 15 minutes?", created_at=JUN
            ),
            msg("The Berlin marathon sold out.", author=BOB, name="Bob", created_at=JUN),
        ],
    )
    facts = await mem.search(GUILD, MARATHON, scope="facts", gate=False, limit=5)
    assert [h.evidence_text for h in facts if "marathon" in h.text] == [
        "My target for the Berlin marathon is 3 hours 30 minutes."
    ]
    hits = await mem.retriever.search(GUILD, MARATHON, scope="all", gate=False, limit=5)
    shown = [(h.kind, h.text) for h in hits]
    newer = next(i for i, h in enumerate(hits) if h.kind == "message" and "15 minutes" in h.text)
    fact = next(i for i, h in enumerate(hits) if h.kind == "fact" and "30 minutes" in h.text)
    assert newer < fact, shown
    assert hits[newer].parts.newer_first > 0 > hits[fact].parts.newer_first
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # Strict search (what /memory search shows) answers with the current value first.
    strict = await mem.search(GUILD, MARATHON, scope="all", limit=5)
    said = [h.text for h in strict if "minutes" in h.text]
    assert said and "15 minutes" in said[0], [(h.kind, h.text) for h in strict]
