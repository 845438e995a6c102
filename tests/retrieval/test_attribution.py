"""Which hits are about the member a query names (strict search's coverage)."""

from __future__ import annotations

import dataclasses

from memory.models import Hit
from memory.retrieval.attribution import (
    ASKS,
    ATTRIBUTING,
    FAR_MEANING,
    NAMED_COVER_WITHIN,
    NAMES_THEM,
    OUTMATCHED,
    SOMEONE_ELSE,
    THEIR_FACT,
    THEIR_WORDS,
    TO_ANOTHER,
    TOLD_OF_SELF,
    NamedQuery,
    about_author,
    addressed,
    attributed,
)
from memory.retrieval.query import MemberNames, find_names
from memory.retrieval.voice import speaks_of_self, speaks_to_other
from tests.helpers import make_hit

NAMES = MemberNames.build([("u-alice", "Alice"), ("u-bob", "Bob Stone")])


def _hit(kind: str, subject: str, text: str) -> Hit:
    return make_hit("1", text, subject=subject, kind=kind)


def test_first_person_words_in_the_guards_languages() -> None:
    for text in (
        "I ran a race",
        "that's my bike",
        "we're off",
        "Ich habe gebacken",
        "mein Fahrrad",
        "Yo corrí ayer",
        "я бегал вчера",
        "私は走りました",
    ):
        assert speaks_of_self(text), text
    for text in ("What got you into running?", "Love that colour!", "Wie war dein Tag?"):
        assert not speaks_of_self(text), text


def test_a_message_about_its_author_and_one_aimed_at_someone_else() -> None:
    assert about_author("Baked two loaves this morning", "u-alice", NAMES)
    assert about_author("I ran a race", "u-alice", NAMES)
    assert not about_author("What got you into running?", "u-alice", NAMES)
    assert not about_author("Wie bist du zum Laufen gekommen?", "u-alice", NAMES)
    assert not about_author("That race sounds great, Bob!", "u-alice", NAMES)
    assert not about_author("For walking or running?", "u-alice", NAMES)
    assert speaks_to_other("¿Qué hiciste tú ayer?") and speaks_to_other("あなたは走りましたか")


def test_a_name_in_address_is_not_a_name_spoken_of() -> None:
    for text in (
        "Thanks, Alice! The race was fun",
        "Hey Alice, how are you",
        "Nice one, Alice.",
        "Woohoo Alice! I passed the interview",
    ):
        (match,) = find_names(text, NAMES)
        assert addressed(text, match), text
    for text in ("Alice told me she ran", "I went running with Alice and her dog"):
        (match,) = find_names(text, NAMES)
        assert not addressed(text, match), text


def test_what_counts_as_about_the_named_member() -> None:
    named = ("u-alice",)
    assert attributed(_hit("fact", "u-alice", "Alice runs marathons."), named, NAMES)
    assert attributed(_hit("message", "u-alice", "I ran my first marathon"), named, NAMES)
    assert attributed(_hit("message", "u-alice", "Ran a marathon today"), named, NAMES)
    # Her question about someone else's story is not about her.
    assert not attributed(_hit("message", "u-alice", "What got you into running?"), named, NAMES)
    # Bob's story, told to her, is not about her; Bob speaking of her is.
    assert not attributed(_hit("message", "u-bob", "Thanks, Alice! I ran a race"), named, NAMES)
    assert attributed(_hit("message", "u-bob", "Alice ran a race last week"), named, NAMES)
    assert not attributed(_hit("fact", "u-bob", "Bob ran a race."), named, NAMES)
    # No member named: every hit counts.
    assert attributed(_hit("fact", "u-bob", "Bob ran a race."), (), NAMES)


def _reason(
    query: str, text: str, *, author: str = "u-alice", sem: float = 0.5, floor: float = 0.0
) -> str:
    """Why Alice's message ``text`` is or is not about her, for ``query``
    (the query's content: its names already taken out)."""
    about = NamedQuery.of(("u-alice",), NAMES, query, floor)
    return about.reason(make_hit("1", text, subject=author, score=sem))


def test_a_members_message_is_judged_by_the_sentences_that_share_the_querys_words() -> None:
    query = "what did realise after her charity race?"
    # The sentence about the race addresses Bob; "I'm" is in another one.
    assert (
        _reason(query, "That charity race sounds great, Bob! I'm really proud of you.")
        == TO_ANOTHER
    )
    assert _reason(query, "I ran a charity race on Saturday.") == TOLD_OF_SELF
    # A sentence with no person of its own continues the one before: her own
    # ("Been hectic for me") or Bob's ("Congrats, Bob!").
    assert _reason(query, "Been hectic for me. Ran a charity race on Saturday!") == TOLD_OF_SELF
    assert _reason(query, "Congrats, Bob! The charity race sounds awesome.") == TO_ANOTHER
    assert _reason(query, "Thanks, Bob! I'm back home. Ran a charity race on Saturday.") == (
        TOLD_OF_SELF
    )
    # Asking about the words is not telling; a tag question tells.
    assert _reason(query, "Love those shoes! For the charity race?") == ASKS
    assert _reason(query, "The charity race was my first, right?") == TOLD_OF_SELF
    assert (
        _reason(query, "Lately I trained a lot for the charity race, have you ever run one?")
        == TOLD_OF_SELF
    )
    # Without the query's words the message is judged whole, as before.
    assert attributed(_hit("message", "u-alice", "I ran a race"), ("u-alice",), NAMES)


def test_a_sentence_with_both_persons_is_read_by_whom_it_leans_to() -> None:
    # "I hope you're okay" is even: the address before it keeps the sentence
    # after (which shares the words) Bob's, as it is.
    assert (
        _reason(
            "what does do during her pottery break?",
            "Oh man, sorry to hear that, Bob. I hope you're okay. "
            "Pottery's a great way to relax, so the break must have been tough.",
        )
        == TO_ANOTHER
    )
    # The clause holding the query's words decides: Bob's store, Alice's race.
    assert (
        _reason(
            "what did design for her store?",
            "Appreciate it. Your store looks great, I remember it!",
        )
        == TO_ANOTHER
    )
    assert (
        _reason(
            "what book did read?",
            "This book I read last year reminds me of my dreams, just like you",
        )
        == TOLD_OF_SELF
    )
    # A greeting before her own story leaves it hers.
    assert (
        _reason(
            "why did shut down her bank account?", "Hey Bob, I had to shut down my bank account."
        )
        == TOLD_OF_SELF
    )


def test_a_query_for_what_the_member_said_counts_their_words_about_anyone() -> None:
    praise = "Wow, Bob! You found the perfect spot for your store. Hard work pays off!"
    # What she said about his store: her words, though they are about Bob.
    assert _reason("what did say about Bob's progress with his store?", praise) == THEIR_WORDS
    assert _reason("what does think of the store?", praise) == THEIR_WORDS
    assert _reason("was hat über den Laden gesagt?", "Dein Laden sieht toll aus!") == THEIR_WORDS
    # What she did with a store: his story, not hers.
    assert _reason("what did do with her store?", praise) == TO_ANOTHER
    # Asking is not saying, even then.
    assert _reason("what did say about the store?", "How is your store going?") == ASKS
    assert THEIR_WORDS in ATTRIBUTING


def test_other_languages_split_their_sentences_and_questions_too() -> None:
    assert _reason("Rennen", "Das Rennen klingt toll, Bob! Ich bin stolz auf dich.") == TO_ANOTHER
    assert _reason("Rennen", "Ich bin gestern mein erstes Rennen gelaufen.") == TOLD_OF_SELF
    assert _reason("carrera", "¿Qué tal la carrera?") == ASKS
    assert _reason("carrera", "Ayer corrí mi primera carrera.") == TOLD_OF_SELF
    assert _reason("マラソン", "マラソンはどうだった？") == ASKS
    assert _reason("マラソン", "私は昨日マラソンを走りました。") == TOLD_OF_SELF


def test_a_message_sharing_no_word_counts_only_with_a_close_meaning() -> None:
    query = "what instrument does play?"
    text = "Guitar's mostly my thing these days."
    assert _reason(query, text, sem=0.45, floor=0.5) == FAR_MEANING
    assert _reason(query, text, sem=0.55, floor=0.5) == TOLD_OF_SELF
    assert _reason(query, text, sem=0.45) == TOLD_OF_SELF  # no floor (uncalibrated)
    # A word that starts like the query's counts as shared ("mentoring" ~ "mentorship").
    assert _reason("mentorship", "I'm offering mentoring now", sem=0.1, floor=0.5) == TOLD_OF_SELF


def test_every_reason_says_whether_the_hit_counts() -> None:
    about = NamedQuery.of(("u-alice",), NAMES, "race")
    fact = _hit("fact", "u-alice", "Alice runs races.")
    assert about.reason(fact) == THEIR_FACT
    assert about.reason(_hit("message", "u-bob", "Alice ran a race last week")) == NAMES_THEM
    assert about.reason(_hit("message", "u-bob", "I ran a race")) == SOMEONE_ELSE
    assert {THEIR_FACT, TOLD_OF_SELF, THEIR_WORDS, NAMES_THEM} == ATTRIBUTING
    marked = about.marked(fact)
    assert marked.parts.about == THEIR_FACT
    assert dataclasses.replace(marked.parts, about="") == fact.parts


def test_a_hit_about_the_named_member_is_outmatched_by_anothers_clearly_closer_story() -> None:
    about = NamedQuery.of(("u-alice",), NAMES, "volunteer weekends", rival_margin=0.15)
    hers = make_hit("1", "My weekends are packed with football.", score=0.5)

    def first(rival: Hit) -> str:
        return about.judged([hers, rival])[0].parts.about

    # Bob's own story, clearly closer in meaning: hers no longer covers the query.
    bobs = "I volunteer at the shelter every weekend."
    assert first(make_hit("2", bobs, subject="u-bob", score=0.9)) == OUTMATCHED
    assert (
        first(
            make_hit("2", "Bob volunteers at the shelter.", subject="u-bob", kind="fact", score=0.9)
        )
        == OUTMATCHED
    )
    # Closer, but within the margin; or not a rival: a question, words put to
    # someone else, a subject that is no member (lore).
    assert first(make_hit("2", bobs, subject="u-bob", score=0.7)) == TOLD_OF_SELF
    assert first(make_hit("2", "Do you volunteer on weekends?", subject="u-bob", score=0.9)) == (
        TOLD_OF_SELF
    )
    assert (
        first(make_hit("2", "Your weekends volunteering sound great.", subject="u-bob", score=0.9))
        == TOLD_OF_SELF
    )
    assert first(make_hit("2", bobs, subject="lore", kind="fact", score=0.9)) == TOLD_OF_SELF
    # A second-person word elsewhere in the message leaves the story his.
    agrees = "Yeah, you're right. I volunteer at the shelter every weekend."
    assert first(make_hit("2", agrees, subject="u-bob", score=0.9)) == OUTMATCHED
    # A rival below the first hits that are looked at does not count.
    filler = [make_hit(str(n), "Ran a marathon", score=0.2) for n in range(3, 12)]
    far = about.judged([hers, *filler, make_hit("2", bobs, subject="u-bob", score=0.9)])
    assert far[0].parts.about == TOLD_OF_SELF
    assert len(far) == NAMED_COVER_WITHIN
    # Uncalibrated (no margin): no rival outmatches.
    plain = NamedQuery.of(("u-alice",), NAMES, "volunteer weekends")
    assert plain.judged([hers, make_hit("2", bobs, subject="u-bob", score=0.9)])[0].parts.about == (
        TOLD_OF_SELF
    )
