"""A search's readings of message texts (``memory.retrieval.message_text``):
the values of the functions they stand for, each read once, and a text that
changed under the same seq read anew."""

from __future__ import annotations

from memory.retrieval.message_text import TextReadings
from memory.retrieval.scoring import LexicalQuery
from memory.retrieval.voice import first_person_share, statement_share

TEXTS = {
    1: "I finally signed up for a pottery class. Anyone else going?",
    2: "You'll love the kiln! When is the first lesson?",
    3: "",
    4: "Straße café: wir haben Töpfern gelernt",
}
QUERIES = ["pottery class", "when is the first lesson", "töpfern", "nothing at all"]


def test_readings_equal_the_functions_they_stand_for() -> None:
    readings = TextReadings()
    for _ in range(2):  # the second pass reads what the first kept
        for seq, text in TEXTS.items():
            assert readings.statement(seq, text) == statement_share(text)
            assert readings.first_person(seq, text) == first_person_share(text)
            for q in QUERIES:
                lexq = LexicalQuery(q)
                assert readings.lexical(lexq, seq, text) == lexq.score(text)


def test_a_text_changed_under_its_seq_is_read_anew() -> None:
    readings = TextReadings()
    lexq = LexicalQuery("pottery class")
    assert readings.lexical(lexq, 1, TEXTS[1]) == 1.0
    assert readings.first_person(1, TEXTS[1]) > 0
    edited = "You should try the pottery course"
    assert readings.lexical(lexq, 1, edited) == lexq.score(edited) == 0.5
    assert readings.first_person(1, edited) == 0.0
    assert readings.statement(1, edited) == 1.0
