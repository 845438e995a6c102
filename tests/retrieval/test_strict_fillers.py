"""Strict search drops fillers: once a hit holds the query's words, a hit that
shares no word with it stays only if its meaning alone covers the query —
"ilsedevos's husband is a computer scientist" does not answer "who here
studies Greek?" beside "Justus is only starting to learn greek letters"."""

from __future__ import annotations

from typing import Any

from memory.models import Candidate, Hit, ScoreParts
from memory.retrieval.gate_calibration import GateCalibration
from tests.helpers import ALICE, BOB, GUILD, ScriptedExtractor, msg

CALIBRATED = GateCalibration(cover_sem_min=0.37, cover_lex_min=0.4)


def _hit(n: int, lexical: float, semantic: float | None, bm25: float = 0.0) -> Hit:
    parts = ScoreParts(lexical, semantic, 0.6, 0.1, 0.0, bm25, combined=0.5, passed=True)
    return Hit(
        "fact", str(n), GUILD, None, ALICE, f"fact {n}", "profile", None, None, 0.6, "", 0.5, parts
    )


def test_a_hit_sharing_no_word_needs_meaning_enough_to_cover_the_query() -> None:
    words = _hit(1, 0.5, 0.50, 1.0)
    close = _hit(2, 0.0, 0.45)
    filler = _hit(3, 0.0, 0.31)
    stemmed = _hit(4, 0.0, 0.20, bm25=0.4)  # FTS matched a word lexical overlap did not
    unscored = _hit(5, 0.0, None)
    kept = CALIBRATED.without_fillers([words, close, filler, stemmed, unscored])
    assert [h.id for h in kept] == ["1", "2", "4", "5"]
    # With no hit holding the query's words, meaning is all there is: kept.
    assert CALIBRATED.without_fillers([close, filler]) == [close, filler]
    # An uncalibrated model keeps everything that passed the gate.
    assert GateCalibration().without_fillers([words, filler]) == [words, filler]


async def test_strict_fact_search_answers_who_studies_greek_without_the_husband(
    make_memory: Any,
) -> None:
    def as_said(text: str, author: str) -> list[Candidate]:
        return [Candidate(fact=text, type="profile", confidence=0.6, evidence=text)]

    mem = await make_memory(extractor=ScriptedExtractor(fn=as_said))
    for author, name, text in (
        (ALICE, "Justus", "Justus is only starting to learn greek letters."),
        (BOB, "ilsedevos", "ilsedevos's husband is a computer scientist."),
    ):
        assert await (await mem.ingest_message(msg(text, author=author, name=name))).wait()
    assert await mem.settle()
    ranked = await mem.search(GUILD, "who here studies Greek?", scope="facts", gate=False)
    husband = [h for h in ranked if "husband" in h.text]
    assert husband and husband[0].parts.passed  # it passes the per-hit gate on its own
    strict = await mem.search(GUILD, "who here studies Greek?", scope="facts")
    assert [h.text for h in strict] == ["Justus is only starting to learn greek letters."]
    # A question that does not ask who has something keeps the hits that
    # answer it by meaning alone ("what activities…" → "swimming with the kids").
    other = await mem.search(GUILD, "Greek studies", scope="facts", gate=False)
    kept = [h for h in other if "husband" in h.text and h.parts.passed]
    strict_other = await mem.search(GUILD, "Greek studies", scope="facts")
    assert kept and {h.id for h in kept} <= {h.id for h in strict_other}
