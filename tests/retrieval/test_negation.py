"""A line that says a question's words only under a negation does not answer
a question that asks who has them: "who is a papyrologist?" is not answered
by "I'm a paleographer btw, not a papyrologist", "who studies Greek?" not by
"I don't read greek" — while "is Alice a papyrologist?" is."""

from __future__ import annotations

from typing import Any

import pytest

from memory.retrieval.lexical import LexicalQuery
from memory.retrieval.negation import asks_for_holders, negated
from memory.retrieval.query import EMPTY_NAMES, MemberNames, plan_query
from memory.text import compact
from tests.helpers import ALICE, BOB, GUILD, msg

CAROL = "666666666666666666"
DAVE = "777777777777777777"


def _negated_words(text: str) -> set[str]:
    words = compact(text).split()
    return {w for w, n in zip(words, negated(words), strict=True) if n}


@pytest.mark.parametrize(
    ("text", "governed", "free"),
    [
        ("I'm a paleographer btw, not a papyrologist.", {"papyrologist"}, {"paleographer"}),
        ("I don't read greek, so i can't tell", {"read", "greek", "tell"}, set()),
        ("I don't mind, so greek it is", {"mind"}, {"greek"}),
        ("I don't even speak or write Greek:)", {"speak", "write", "greek"}, set()),
        ("(Not a papyrologist) They could only read the scrolls", {"papyrologist"}, {"scrolls"}),
        (
            "as said, I'm not a papyrologist I'm a palaeographer working on Medieval Greek",
            {"papyrologist"},
            {"palaeographer", "greek"},
        ),
        ("and not only I'm a real papyrologist, but", set(), {"papyrologist"}),
        ("I can't say, but Greek is my field", set(), {"greek"}),
        ("i dont know greek either", {"greek"}, set()),
    ],
)
def test_a_negation_governs_its_clause_only(text: str, governed: set[str], free: set[str]) -> None:
    under = _negated_words(text)
    assert governed <= under
    assert not free & under


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("who is a papyrologist?", True),
        ("Who here studies Greek?", True),
        ("does anyone here knit?", True),
        ("which of us plays chess?", True),
        ("who doesn't read Greek?", False),  # asks for the negation itself
        ("is Alice a papyrologist?", False),
        ("what does ZachB study?", False),
        ("when did we talk about Plato's grave?", False),
    ],
)
def test_which_questions_ask_who_has_something(question: str, asks: bool) -> None:
    assert asks_for_holders(compact(question).split()) is asks


def test_a_question_naming_a_member_reads_negations_as_answers() -> None:
    names = MemberNames.build([(ALICE, "Alice")])
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert plan_query("who is a papyrologist?", names, now).positive
    assert not plan_query("is Alice a papyrologist?", names, now).positive
    assert not plan_query("who does Alice say is a papyrologist?", names, now).positive
    assert plan_query("who studies Greek?", EMPTY_NAMES, now).positive


def test_lexical_overlap_of_a_who_question_counts_only_words_said_positively() -> None:
    positive = LexicalQuery("who studies greek?", positive=True)
    blind = LexicalQuery("who studies greek?")
    said = compact("I don't read greek, so i can't tell")
    assert blind.score_compact(said) == 0.5
    assert positive.score_compact(said) == 0.0
    assert positive.only_negated(said)
    own = compact("I study Latin, and Greek on weekends")
    assert positive.score_compact(own) == blind.score_compact(own) > 0
    assert not positive.only_negated(own)
    both = compact("I don't speak it, but I read greek every day")
    assert positive.score_compact(both) == 0.5 and not positive.only_negated(both)


async def _said(mem: Any, lines: list[tuple[str, str, str]]) -> dict[str, str]:
    ids = {}
    for author, name, text in lines:
        m = msg(text, author=author, name=name)
        assert await (await mem.ingest_message(m)).wait()
        ids[text] = m.id
    assert await mem.settle()
    return ids


async def test_strict_search_does_not_take_a_negation_for_an_answer(make_memory: Any) -> None:
    mem = await make_memory()
    ids = await _said(
        mem,
        [
            (ALICE, "Alice", "I'm a paleographer btw, not a papyrologist."),
            (BOB, "Bob", "I work as a papyrologist in Naples."),
            (CAROL, "Carol", "I don't read greek, so i can't tell from the banner."),
            (DAVE, "Dave", "I study ancient Greek at university."),
        ],
    )

    async def found(query: str) -> set[str]:
        hits = await mem.search(GUILD, query, scope="messages")
        return {h.id for h in hits}

    papyrologists = await found("who is a papyrologist?")
    assert ids["I work as a papyrologist in Naples."] in papyrologists
    assert ids["I'm a paleographer btw, not a papyrologist."] not in papyrologists
    greek = await found("who studies Greek?")
    assert ids["I study ancient Greek at university."] in greek
    assert ids["I don't read greek, so i can't tell from the banner."] not in greek
    # Asked about Alice, her "not a papyrologist" is the answer.
    assert ids["I'm a paleographer btw, not a papyrologist."] in await found(
        "is Alice a papyrologist?"
    )
    # Ranking (the prompt's view) keeps every candidate; the gate judged it.
    ranked = await mem.search(GUILD, "who is a papyrologist?", scope="messages", gate=False)
    negative = [h for h in ranked if h.id == ids["I'm a paleographer btw, not a papyrologist."]]
    assert negative and negative[0].parts.negated == 1.0 and not negative[0].parts.passed
