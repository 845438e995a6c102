"""How a message is worded (memory.retrieval.voice) and the first-person part
of message ranking: the pure functions, then search on a real engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dashboard.serialize import hit_json
from memory.retrieval.scoring import DEFAULT_MESSAGE_WEIGHTS, fuse_message
from memory.retrieval.voice import (
    FIRST_PERSON_FULL,
    WORD,
    asks_for_own_story,
    asks_for_words,
    first_person_share,
    person_lean,
    speaks_of_self,
)
from tests.helpers import BOB, GUILD, msg


def test_first_person_share_counts_the_authors_words_about_themself() -> None:
    # One first-person word in ten words or fewer is full.
    assert first_person_share("I finally signed up for a pottery class") == 1.0
    assert first_person_share("We’re moving to Porto, our flat is sold") == 1.0
    # A reply to someone else, or an explanation, holds none.
    assert first_person_share("You'll be an awesome mom! Good luck!") == 0.0
    assert first_person_share("Marley flooring is what dance studios usually use.") == 0.0
    assert first_person_share("") == 0.0
    # Below the full share it is proportional: one word in twenty is half.
    text = "I " + " ".join(["word"] * 19)
    assert first_person_share(text) == pytest.approx((1 / 20) / FIRST_PERSON_FULL)
    # The other languages of the word lists, and Japanese pronouns inside unspaced text.
    assert first_person_share("Ich habe gestern Brot gebacken") > 0
    assert first_person_share("昨日私は走った") > 0
    # "I" inside a word is not a word: "Iris" and "myth" hold none.
    assert first_person_share("Iris told a myth") == 0.0


def test_a_question_put_to_someone_does_not_ask_for_the_first_person() -> None:
    assert asks_for_own_story("What are Kate's hobbies?")
    assert asks_for_own_story("Where did I complete my degree?")
    assert not asks_for_own_story("You mentioned a few language apps: which were they?")
    assert not asks_for_own_story("Can you remind me of the restaurant you recommended?")


def test_person_lean_counts_first_person_words_against_second_person_words() -> None:
    assert person_lean("I had to shut down my bank account") == 2
    assert person_lean("I hope you're okay") == 0
    assert person_lean("Your store looks great, your customers will love it") == -2
    assert person_lean("Ich glaube, du hast recht") == 0
    assert person_lean("私はあなたの本を読みました") == 0
    assert person_lean("The weather is nice") == 0


def test_a_query_asking_what_someone_said_is_told_from_one_asking_what_they_did() -> None:
    for query in (
        "What did Jon say about Gina's store?",
        "What does Alice think of the new park?",
        "Which book did Bob recommend?",
        "Was hat Anna über das Konzert erzählt?",
        "¿Qué dijo Ana del concierto?",
        "Что сказала Анна о концерте?",
    ):
        assert asks_for_words(query), query
    for query in ("What did Jon design for his store?", "Where did Alice travel in May?"):
        assert not asks_for_words(query), query


def test_the_first_person_part_adds_to_combined_and_is_reported() -> None:
    common: dict[str, Any] = dict(
        semantic=0.4, bm25=0.5, lexical=0.2, neighbour=0.3, speaker=1.0, date=0.0
    )
    plain = fuse_message(recency=0.0, channel=0.0, **common)
    told = fuse_message(recency=0.0, channel=0.0, first_person=0.5, **common)
    assert plain.first_person == 0.0 and told.first_person == 0.5
    assert told.combined - plain.combined == pytest.approx(
        0.5 * DEFAULT_MESSAGE_WEIGHTS.first_person
    )
    assert told.as_dict()["first_person"] == 0.5


async def _ingest(mem: Any, texts: list[str]) -> None:
    # Minutes apart: one sitting, so no message restates another
    # (memory.retrieval.newer_first leaves the order to the scores).
    for n, text in enumerate(texts):
        stamp = f"2024-03-01T10:0{n}:00.000Z"
        out = await mem.ingest_message(
            msg(text, author=BOB, name="Bob", created_at=stamp), backpressure=True
        )
        assert out.status == "queued", out
    assert await mem.settle(60)


async def test_search_ranks_a_members_own_story_above_talk_of_the_same_thing(
    make_memory: Callable[..., Any],
) -> None:
    mem = await make_memory()
    told = "I skied in Aspen last winter with my kids."
    noted = "Skied in Aspen last winter with the kids."
    await _ingest(mem, [noted, told, "The weather is nice today."])
    query = "Where did Bob go skiing last winter?"
    hits = await mem.retriever.search(GUILD, query, scope="messages", gate=False, limit=3)
    texts = [h.text for h in hits]
    own, other = hits[texts.index(told)], hits[texts.index(noted)]
    assert own.parts.first_person == first_person_share(told) == 1.0
    assert other.parts.first_person == 0.0
    assert own.parts.newer_first == other.parts.newer_first == 0.0
    # The shorter note matches a little better on every other part; the
    # first person is what puts the member's own telling first.
    weight = DEFAULT_MESSAGE_WEIGHTS.first_person
    assert own.score - weight * own.parts.first_person < other.score < own.score
    assert texts.index(told) < texts.index(noted)
    # Visible where hits are explained: the parts and the dashboard API.
    assert hit_json(own)["firstPersonScore"] == 1.0
    # A question put to someone does not favour the first person: the part is 0 for every hit.
    asked = await mem.retriever.search(
        GUILD, "Where did you say Bob went skiing?", scope="messages", gate=False, limit=3
    )
    assert asked and all(h.parts.first_person == 0.0 for h in asked)


def _share_word_by_word(text: str) -> float:
    """first_person_share spelled out: every word folded on its own."""
    words = WORD.findall(text)
    mine = sum(speaks_of_self(w) and not any(p in w for p in "私僕俺我") for w in words)
    mine += sum(text.count(p) for p in ("私", "僕", "俺", "わたし", "ぼく", "おれ", "我"))
    return min(1.0, mine / (max(1, len(words)) * FIRST_PERSON_FULL)) if mine else 0.0


_PIECES = st.sampled_from(
    ["I", "I’m", "MY", "we", "Straße", "İstanbul", "ich", "МЫ", "you", "私", "ﬁne", " ", ", ", "."]
)


@given(st.lists(st.one_of(_PIECES, st.text(max_size=6)), max_size=20))
def test_first_person_share_equals_folding_word_by_word(pieces: list[str]) -> None:
    text = " ".join(pieces)
    assert first_person_share(text) == pytest.approx(_share_word_by_word(text))
