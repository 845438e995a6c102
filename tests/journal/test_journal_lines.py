"""Journal lines are for people: a long message is cut at a word with "…"
(never mid-word), and the line is still found again when Discord deletes or
edits the message."""

from __future__ import annotations

from typing import Any

from memory.extract.guards import clean_line, clean_message
from tests.helpers import GUILD, database_url, journal_text, msg

LONG = " ".join(["papyrology"] * 20) + " " + " ".join(["ink"] * 40) + " tail"


def test_a_long_message_is_cut_at_a_word_and_says_so() -> None:
    line = clean_line(LONG, 320)
    assert line is not None and len(line) <= 320 and line.endswith("…")
    assert line[:-1].split(" ")[-1] in ("papyrology", "ink")
    # Extraction keeps its plain cut, which the rule extractor recognises.
    assert clean_message(LONG, 320) == LONG[:320].rstrip()
    assert clean_line("short | message", 320) == "short / message"
    assert clean_line(" x ", 320) is None
    one_word = "a" * 400
    assert clean_line(one_word, 50) == "a" * 49 + "…"  # no word boundary near: a plain cut


async def test_the_line_of_a_long_message_is_found_for_an_edit_and_a_delete(
    make_memory: Any,
) -> None:
    mem = await make_memory(embeddings="none")
    # Lines are known by time, author, channel and text: two distinct times.
    first = msg(LONG, created_at="2026-03-01T10:00:00.000Z")
    second = msg(LONG + " again", created_at="2026-03-01T10:05:00.000Z")
    for m in (first, second):
        assert await (await mem.ingest_message(m)).wait()
    await mem.settle()
    text = await journal_text(mem)
    assert text.count(clean_line(LONG, 320) or "") == 2 and "papyrolog…" not in text

    await mem.edit_message(GUILD, first.id, "I restore old papyri now")
    await mem.delete_messages(GUILD, [second.id])
    await mem.settle()
    text = await journal_text(mem)
    assert "(edited) I restore old papyri now" in text
    # Appended files mark the deleted line; days rendered from the database
    # (PostgreSQL) leave the message out.
    assert "[deleted]" in text or database_url(mem) is not None
    assert (clean_line(LONG, 320) or "") not in text
