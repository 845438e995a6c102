"""Which hits are about the member a query names (strict search's coverage)."""

from __future__ import annotations

from memory.models import Hit
from memory.retrieval.attribution import about_author, addressed, attributed
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
    for text in ("Thanks, Alice! The race was fun", "Hey Alice, how are you", "Nice one, Alice."):
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
