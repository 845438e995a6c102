"""Same topic, newer first (memory.retrieval.newer_first): the pure rule on
hand-made hits, then through search on a real engine."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dashboard.serialize import hit_json
from memory.models import Hit
from memory.retrieval.newer_first import DEFAULT_NEWER_FIRST, NewerFirstRule, newer_first, phrases
from tests.helpers import ALICE, BOB, CHANNEL, GUILD, make_hit, msg

QUERY = "How long have I been using my Fitbit Charge 3?"
JAN = "2023-01-10T09:00:00.000Z"
MAR = "2023-03-02T18:30:00.000Z"
JUN = "2023-06-18T12:00:00.000Z"


def _hit(
    n: int,
    text: str,
    created_at: str,
    *,
    score: float,
    author: str = ALICE,
    kind: str = "message",
) -> Hit:
    return make_hit(
        f"m{n}", text, score=score, subject=author, kind=kind, created_at=created_at, guild_id=GUILD
    )


def _ids(hits: Sequence[Hit]) -> list[str]:
    return [h.id for h in hits]


def test_phrases_are_adjacent_content_words_folded() -> None:
    assert phrases(QUERY) == {
        ("long", "using"),
        ("using", "fitbit"),
        ("fitbit", "charge"),
        ("charge", "3"),
    }
    # Stop words between two content words do not break the pair; plurals fold.
    assert ("ticket", "ride") in phrases("my best Ticket to Ride scores")
    assert ("ride", "score") in phrases("my best Ticket to Ride scores")
    assert phrases("what is it?") == frozenset()


def test_a_later_restatement_takes_the_older_ones_place_and_score() -> None:
    old = _hit(1, "I've been using my Fitbit Charge 3 for 6 months now.", JAN, score=0.62)
    other = _hit(2, "My watch strap broke yesterday.", MAR, score=0.50)
    new = _hit(3, "Funny, I've been using my Fitbit Charge 3 for 9 months.", JUN, score=0.41)
    tail = _hit(4, "Bob likes running.", JUN, score=0.30, author=BOB)
    out = newer_first([old, other, new, tail], QUERY)
    assert _ids(out) == ["m3", "m2", "m1", "m4"]
    # Positions and scores stay where they were; the explanation says who moved how much.
    assert [h.score for h in out] == [0.62, 0.50, 0.41, 0.30]
    assert out[0].parts.newer_first == 0.62 - 0.41 and out[0].parts.combined == 0.62
    assert out[2].parts.newer_first == 0.41 - 0.62 and out[2].parts.combined == 0.41
    assert out[1] is other and out[3] is tail


def test_a_group_of_three_fills_its_own_positions_newest_first() -> None:
    a = _hit(1, "Fitbit Charge 3 for two months", JAN, score=0.9)
    x = _hit(2, "unrelated", JAN, score=0.8)
    b = _hit(3, "my Fitbit Charge 3 is six months old", JUN, score=0.7)
    y = _hit(4, "unrelated too", JAN, score=0.6)
    c = _hit(5, "four months with the Fitbit Charge 3", MAR, score=0.5)
    out = newer_first([a, x, b, y, c], QUERY)
    assert _ids(out) == ["m3", "m2", "m5", "m4", "m1"]


def test_what_is_not_a_restatement_does_not_move() -> None:
    old = _hit(1, "I've been using my Fitbit Charge 3 for 6 months.", JAN, score=0.6)

    def after(new: Hit, rule: NewerFirstRule = DEFAULT_NEWER_FIRST) -> list[str]:
        return _ids(newer_first([old, new], QUERY, rule))

    later = "Still using my Fitbit Charge 3, 9 months now."
    assert after(_hit(2, later, JUN, score=0.4)) == ["m2", "m1"]  # the rule applies
    # Someone else's statement.
    assert after(_hit(2, later, JUN, score=0.4, author=BOB)) == ["m1", "m2"]
    # The next turn of the same conversation, not a later one.
    assert after(_hit(2, later, "2023-01-10T09:20:00.000Z", score=0.4)) == ["m1", "m2"]
    # One word in common is not the same thing ("charge" alone).
    assert after(_hit(2, "I forgot to charge my phone.", JUN, score=0.4)) == ["m1", "m2"]
    # A fact hit never moves: the write decision settles facts.
    assert after(_hit(2, later, JUN, score=0.4, kind="fact")) == ["m1", "m2"]
    # A time that cannot be read cannot say which is newer.
    assert after(_hit(2, later, "not a time", score=0.4)) == ["m1", "m2"]
    # Switched off, or outside the window of leading hits.
    assert after(_hit(2, later, JUN, score=0.4), NewerFirstRule(enabled=False)) == ["m1", "m2"]
    assert after(_hit(2, later, JUN, score=0.4), NewerFirstRule(window=1)) == ["m1", "m2"]


def test_one_phrase_in_passing_does_not_link_a_message_to_a_thorough_answer() -> None:
    # LongMemEval S, question fca762bc: the board game tip shares only "words
    # and phrases" with the question; the list of language apps shares nine of
    # its phrases. The newer tip used to take the older answer's first place.
    query = (
        "I wanted to follow up on our previous conversation about language learning apps. "
        "Can you remind me of the one that uses mnemonics to help learners memorize words "
        "and phrases?"
    )
    answer = _hit(
        1,
        "Sure, there are several excellent language learning apps. Memrise uses mnemonics "
        "to help learners memorize words and phrases; other language learning apps help "
        "learners with grammar.",
        JAN,
        score=0.6,
    )
    tip = _hit(2, "Try Codenames: a party game of guessing words and phrases.", JUN, score=0.5)
    assert len(phrases(answer.text) & phrases(query)) >= 8
    assert _ids(newer_first([answer, tip], query)) == ["m1", "m2"]
    assert _ids(newer_first([answer, tip], query, NewerFirstRule(min_shared=0.0))) == ["m2", "m1"]
    # A real update that repeats two of the first telling's seven phrases still
    # goes first (LongMemEval's Converse question).
    shoes = "How many times have I worn my new black Converse Chuck Taylor All Star sneakers?"
    first = _hit(
        3,
        "I have worn my new black Converse Chuck Taylor All Star sneakers twice already.",
        JAN,
        score=0.6,
    )
    later = _hit(4, "Update: the new black Converse have now been worn five times.", JUN, score=0.5)
    assert len(phrases(first.text) & phrases(shoes)) == 7
    assert len(phrases(later.text) & phrases(first.text) & phrases(shoes)) == 2
    assert _ids(newer_first([first, later], shoes)) == ["m4", "m3"]


def test_the_rule_orders_the_first_ten_and_never_moves_a_hit_out_of_them() -> None:
    # LongMemEval S (a3045048): with a window of 15, the best hit and a newer
    # restatement in 12th place swapped, and the answer left the first ten.
    old = _hit(0, "I've been using my Fitbit Charge 3 for 6 months now.", JAN, score=0.9)
    filler = [
        _hit(n, f"Unrelated chat number {n}.", MAR, score=0.8 - n / 100, author=BOB)
        for n in range(1, 11)
    ]
    new = _hit(11, "Still using my Fitbit Charge 3, 9 months now.", JUN, score=0.5)
    hits = [old, *filler, new]
    out = newer_first(hits, QUERY)
    assert {h.id for h in out[:10]} == {h.id for h in hits[:10]}
    assert _ids(out) == _ids(hits)
    # Inside the first ten, the newer statement still goes first.
    inside = [old, *filler[:8], new]
    assert _ids(newer_first(inside, QUERY))[0] == "m11"
    # A wider window would have sent the best hit to 12th place.
    assert _ids(newer_first(hits, QUERY, NewerFirstRule(window=15)))[-1] == "m0"


def test_a_phrase_the_author_keeps_using_is_a_theme_not_an_update() -> None:
    query = "What does Jon's dance studio offer?"
    days = [f"2023-0{m}-0{d}T10:00:00.000Z" for m, d in ((1, 1), (2, 2), (3, 3), (4, 4))]
    hits = [
        _hit(n, f"Big news about my dance studio, part {n}.", day, score=0.9 - n / 10)
        for n, day in enumerate(days)
    ]
    # Four of the author's leading hits share the phrase: with up to four
    # allowed they are one topic and go newest first, with three they are a theme.
    assert _ids(newer_first(hits, query, NewerFirstRule(max_repeats=4))) == [
        "m3",
        "m2",
        "m1",
        "m0",
    ]
    assert _ids(newer_first(hits, query, NewerFirstRule(max_repeats=3))) == _ids(hits)


# -- through search on a real engine -------------------------------------------------------------


async def _ingest(mem: Any, messages: Sequence[Any]) -> None:
    for m in messages:
        out = await mem.ingest_message(m, backpressure=True)
        assert out.status == "queued", out
    assert await mem.settle(60)


async def test_search_shows_the_newer_statement_first(make_memory: Callable[..., Any]) -> None:
    mem = await make_memory()
    await _ingest(
        mem,
        [
            msg(
                "I've been using my Fitbit Charge 3 for 6 months.",
                created_at=JAN,
            ),
            msg(
                "Any tips for staying motivated on lazy Sundays?",
                created_at=JAN.replace("00.", "30."),
            ),
            msg("I went hiking with Bob in the hills.", created_at=MAR),
            msg(
                "Sleep has been rough lately and I watch TV shows before bed, which might be"
                " what keeps me up. Speaking of tracking my health, I just realised I've been"
                " using my Fitbit Charge 3 for 9 months now, crazy how time flies.",
                created_at=JUN,
            ),
            msg("The Fitbit app crashed again.", author=BOB, name="Bob", created_at=JUN),
        ],
    )
    hits = await mem.retriever.search(GUILD, QUERY, scope="messages", gate=False, limit=5)
    texts = [h.text for h in hits]
    newer = next(i for i, t in enumerate(texts) if "9 months" in t)
    older = next(i for i, t in enumerate(texts) if "6 months" in t)
    assert newer < older
    assert hits[newer].parts.newer_first > 0 > hits[older].parts.newer_first
    # Visible where hits are explained: the parts, the CLI's JSON and the dashboard API.
    assert hits[newer].parts.as_dict()["newer_first"] == hits[newer].parts.newer_first
    assert hit_json(hits[newer])["newerFirstScore"] == round(hits[newer].parts.newer_first, 6)
    # Still ordered by score, and the scores are the ones the messages earned between them.
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # What the model reads: the prompt slice lists the current value first too.
    sl = await mem.build_prompt_slice(GUILD, CHANNEL, BOB, QUERY)
    said = [h.text for h in sl.relevant_messages if "months" in h.text]
    assert len(said) == 2 and "9 months" in said[0]
    strict = await mem.search(GUILD, QUERY, scope="messages", limit=5)
    assert "9 months" in [h.text for h in strict if "months" in h.text][0]
