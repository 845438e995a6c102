"""A search's readings of message texts (``memory.retrieval.message_text``):
the values of the functions they stand for, each read once, and a text that
changed under the same seq read anew."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from memory.db.sqlite import driver as sqlite
from memory.db.sqlite.migrations import migrate
from memory.models import StoredMessage
from memory.retrieval.hits import parse_time
from memory.retrieval.lexical import LexicalQuery
from memory.retrieval.message_text import TextReadings
from memory.retrieval.voice import first_person_share, statement_share
from memory.store import messages as store_messages
from tests.helpers import GUILD, OTHER_GUILD, msg

NOW = "2026-05-01T00:00:00Z"

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


def test_rows_are_read_once_per_question_and_one_guilds(tmp_path: Any) -> None:
    """The searches of one question read a message's row once: a row already
    read is served from the readings (here: even after the table lost it,
    which only a later question sees), the others come from the database."""
    con = sqlite.connect(tmp_path / "t.sqlite3")
    try:
        migrate(con)
        store_messages.insert_messages(
            con, [msg(t, id=f"m{i}") for i, t in enumerate(TEXTS.values())], NOW
        )
        store_messages.insert_messages(con, [msg("elsewhere", id="o1", guild=OTHER_GUILD)], NOW)
        con.commit()
        seqs = {r[1]: r[0] for r in con.execute("SELECT seq, id FROM messages")}
        readings = TextReadings()
        first = readings.rows(con, GUILD, [seqs["m0"], seqs["m1"]])
        assert [m.id for m in first.values()] == ["m0", "m1"]
        con.execute("DELETE FROM messages WHERE id = 'm0'")
        again = readings.rows(con, GUILD, [seqs["m0"], seqs["m1"], seqs["m2"], seqs["o1"]])
        assert sorted(m.id for m in again.values()) == ["m0", "m1", "m2"]  # not the other guild's
        assert again[seqs["m0"]] is first[seqs["m0"]]
        assert seqs["m0"] not in TextReadings().rows(con, GUILD, [seqs["m0"]])  # a new question
        with pytest.raises(ValueError):
            readings.rows(con, OTHER_GUILD, [seqs["o1"]])
    finally:
        con.close()


def test_message_columns_are_stored_message_fields_in_order() -> None:
    """``messages_by_seq`` builds messages by column position."""
    columns = [c.strip() for c in store_messages.MESSAGE_COLUMNS.split(",")]
    assert columns == [f.name for f in dataclasses.fields(StoredMessage)]


def test_neighbours_are_looked_up_once_per_question(tmp_path: Any) -> None:
    con = sqlite.connect(tmp_path / "t.sqlite3")
    try:
        migrate(con)
        said = [
            msg(t, id=f"m{i}", created_at=f"2026-05-01T00:0{i}:00Z")
            for i, t in enumerate(TEXTS.values())
        ]
        store_messages.insert_messages(con, said, NOW)
        con.commit()
        seqs = {r[1]: r[0] for r in con.execute("SELECT seq, id FROM messages")}
        readings = TextReadings()
        rows = readings.rows(con, GUILD, list(seqs.values()))
        items = [(seqs["m1"], rows[seqs["m1"]])]
        assert readings.adjacent(con, GUILD, items) == {seqs["m1"]: (seqs["m0"], seqs["m2"])}
        con.execute("DELETE FROM messages WHERE id = 'm0'")
        # The question keeps what it looked up; a new question looks again.
        assert readings.adjacent(con, GUILD, items) == {seqs["m1"]: (seqs["m0"], seqs["m2"])}
        assert TextReadings().adjacent(con, GUILD, items) == {seqs["m1"]: (None, seqs["m2"])}
    finally:
        con.close()


def test_times_and_voices_read_once() -> None:
    readings = TextReadings()
    assert readings.time("2026-05-01T10:00:00Z") == parse_time("2026-05-01T10:00:00Z")
    assert readings.time("not a time") is None
    text = TEXTS[1]
    assert readings.lacks_voice(1, text)
    readings.know(1, text, 0.5, 0.25)
    assert not readings.lacks_voice(1, text)
    assert (readings.statement(1, text), readings.first_person(1, text)) == (0.5, 0.25)
    assert readings.lacks_voice(1, "an edited text")  # another text under the seq
