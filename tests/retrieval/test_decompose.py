"""Query decomposition (memory.retrieval.decompose) and the fusion of the
parts' rankings (memory.retrieval.part_fusion): the pure rules on text and
hand-made hits, then through search on a real engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from dashboard.serialize import hit_json
from memory.models import Hit
from memory.retrieval.decompose import decompose, one_sentence
from memory.retrieval.part_fusion import PartFusionRule, fuse_parts
from tests.helpers import ALICE, BOB, CHANNEL, GUILD, make_hit, msg

# -- splitting a question ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "parts"),
    [
        # "between X and Y": each conjunct runs from the marker to the clause end.
        (
            "How many days passed between my visit to the dentist and buying the new bike?",
            (
                "How many days passed between my visit to the dentist?",
                "How many days passed between buying the new bike?",
            ),
        ),
        # No marker: the last conjunct is as long as the first; what follows is shared.
        (
            "What do Melanie's kids and her husband like?",
            ("What do Melanie's kids like?", "What do husband like?"),
        ),
        (
            "What is the total amount I spent on gifts for my coworker and brother?",
            (
                "What is the total amount I spent on gifts for my coworker?",
                "What is the total amount I spent on gifts for my brother?",
            ),
        ),
        # A comma closing the question's head opens the list of alternatives.
        (
            "Which did I start first, the pottery class or the salsa lessons?",
            (
                "Which did I start first, the pottery class?",
                "Which did I start first, the salsa lessons?",
            ),
        ),
        # Lists with commas (and an Oxford comma), quoted titles kept whole.
        (
            "When did Caroline meet up with her friends, family, and mentors?",
            (
                "When did Caroline meet up with her friends?",
                "When did Caroline meet up with her family?",
                "When did Caroline meet up with her mentors?",
            ),
        ),
        (
            "How many episodes of 'Salt and Pepper' or 'Night Shift' did I watch?",
            (
                "How many episodes of 'Salt and Pepper' did I watch?",
                "How many episodes of 'Night Shift' did I watch?",
            ),
        ),
        # A marker list is preferred to an earlier coordination; "St." ends no sentence.
        (
            "Who arrived first, second and third among Emma, Rachel and Alex at St. Mary's?",
            (
                "Who arrived first, second and third among Emma at St. Mary's?",
                "Who arrived first, second and third among Rachel at St. Mary's?",
                "Who arrived first, second and third among Alex at St. Mary's?",
            ),
        ),
    ],
)
def test_decompose_splits_a_question_into_its_parts(query: str, parts: tuple[str, ...]) -> None:
    assert decompose(query) == parts


@pytest.mark.parametrize(
    "query",
    [
        "What did Melanie paint recently?",  # nothing joined
        "",
        # Two clauses joined, not two things asked about.
        "I read about the trip, and I was wondering where we stayed?",
        # More than one sentence: a narrative, not a composite question.
        "We talked about pottery and painting. Which one did I say I liked?",
    ],
)
def test_decompose_leaves_single_questions_whole(query: str) -> None:
    assert decompose(query) == ()


def test_one_sentence_ignores_abbreviations() -> None:
    assert one_sentence("Did Dr. Lee see me at St. Mary's?")
    assert not one_sentence("I went out. Where did I go?")


# -- fusing rankings -----------------------------------------------------------------------------


def _hit(name: str, score: float) -> Hit:
    return make_hit(name, name, score=score, subject=ALICE, guild_id=GUILD)


def _ids(hits: Sequence[Hit]) -> list[str]:
    return [h.id for h in hits]


def test_fusion_makes_room_for_a_parts_best_hit() -> None:
    # The whole question ranks twelve hits; the parts back its first three,
    # and part B's best hit is one the whole question missed.
    whole = [_hit(f"w{i}", 0.9 - i * 0.05) for i in range(12)]
    part_a = [_hit("w0", 0.8), _hit("w1", 0.7)]
    part_b = [_hit("b0", 0.6), _hit("w2", 0.5)]
    out = fuse_parts(whole, [("part A", part_a), ("part B", part_b)], 10)
    # b0 goes ahead of the whole question's lower hits no part backs.
    assert _ids(out) == [*(f"w{i}" for i in range(8)), "b0", "w8"]
    assert _ids(fuse_parts(whole, [], 10)) == [f"w{i}" for i in range(10)]
    # The slots keep the whole ranking's scores; the parts say what moved.
    assert [h.score for h in out] == [h.score for h in whole[:10]]
    b0 = out[8]
    assert b0.parts.query_part == "part B"
    assert b0.parts.decomposed == pytest.approx(whole[8].score - 0.6)
    assert b0.parts.combined == b0.score == whole[8].score
    assert b0.parts.as_dict()["query_part"] == "part B"
    assert hit_json(b0)["queryPart"] == "part B"
    assert hit_json(b0)["decomposedScore"] == round(b0.parts.decomposed, 6)
    # A hit the whole question ranks at least as high as any part is its own.
    assert out[0].parts.query_part == "" and out[0].parts.decomposed == 0.0
    assert out[9].parts.decomposed == pytest.approx(whole[9].score - whole[8].score)


def test_fusion_disabled_or_without_parts_is_the_whole_ranking() -> None:
    whole = [_hit("x", 0.8), _hit("y", 0.6)]
    assert fuse_parts(whole, [], 5) == whole
    other = [("p", [_hit("z", 0.9)])]
    assert fuse_parts(whole, other, 5, PartFusionRule(enabled=False)) == whole


def test_a_hit_every_part_ranks_does_not_outvote_the_whole_querys_first() -> None:
    # "frame" ranks second in the whole query and first in each of three parts
    # (their shared words), "answer" first and second: summed, the three part
    # votes would put "frame" first; each hit's best part counts once.
    whole = [_hit("answer", 0.8), _hit("frame", 0.7)]
    parts = [(f"p{i}", [_hit("frame", 0.7), _hit("answer", 0.6)]) for i in range(3)]
    assert _ids(fuse_parts(whole, parts, 2)) == ["answer", "frame"]


# -- through search on a real engine -------------------------------------------------------------

QUERY = "How many days passed between my dentist appointment and buying the mountain bike?"


async def _ingest(mem: Any, messages: Sequence[Any]) -> None:
    for m in messages:
        out = await mem.ingest_message(m, backpressure=True)
        assert out.status == "queued", out
    assert await mem.settle(60)


async def test_search_finds_evidence_for_each_part(make_memory: Callable[..., Any]) -> None:
    mem = await make_memory()
    # Much said about buying the bike, in the question's words and, like the
    # dentist visit, in the first person; the dentist visit told once, in
    # other words.
    bike = [
        "Buying a mountain bike is harder than I thought, so many models.",
        "Still buying nothing, the mountain bike prices passed my budget days ago.",
        "I spent days comparing mountain bike frames before buying.",
        "Buying my mountain bike took many days of test rides.",
        "The mountain bike shop told me buying now saves a few days of waiting.",
        "How many days until the mountain bike sale, I wonder, before buying.",
        "Days passed and I am still buying mountain bike gear.",
    ]
    await _ingest(
        mem,
        [
            *(msg(t, created_at=f"2023-03-0{i + 1}T10:00:00.000Z") for i, t in enumerate(bike)),
            msg(
                "Had my teeth cleaned at the dentist this morning.",
                author=BOB,
                name="Bob",
                created_at="2023-03-08T10:00:00.000Z",
            ),
            msg("Lovely weather for the garden today.", created_at="2023-03-09T10:00:00.000Z"),
        ],
    )
    retriever = mem.retriever
    top = 3
    hits = await retriever.search(GUILD, QUERY, scope="messages", gate=False, limit=top)
    assert any("mountain bike" in h.text for h in hits)
    teeth = next(h for h in hits if "dentist" in h.text)
    assert teeth.parts.query_part == "How many days passed between my dentist appointment?"
    assert teeth.parts.decomposed > 0
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # Through the engine's facade too, and strict search keeps it.
    found = await mem.search(GUILD, QUERY, scope="messages", gate=False, limit=top)
    assert any("dentist" in h.text for h in found)
    # The whole query alone leaves the dentist visit out of the top three.
    ctx = retriever.ctx
    fused = ctx.tuning
    ctx.tuning = dataclasses.replace(fused, part_fusion=PartFusionRule(enabled=False))
    alone = await retriever.search(GUILD, QUERY, scope="messages", gate=False, limit=top)
    assert not any("dentist" in h.text for h in alone)
    # The prompt slice reads the parts the same way.
    slice_top = dataclasses.replace(mem.config.retrieval, relevant_messages=top)
    ctx.cfg = slice_top
    sl = await mem.build_prompt_slice(GUILD, CHANNEL, ALICE, QUERY)
    assert not any("dentist" in h.text for h in sl.relevant_messages)
    ctx.tuning = fused
    sl = await mem.build_prompt_slice(GUILD, CHANNEL, ALICE, QUERY)
    assert any("dentist" in h.text for h in sl.relevant_messages)
