"""The strict gate's per-model calibration: the file format, the setting that
overrides the shipped calibration, and what strict search answers with it."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.settings import SettingsError, load_settings
from memory.embed.local import LOCAL_MODEL_ID
from memory.errors import InvalidInput
from memory.models import IncomingMessage
from memory.retrieval.attribution import (
    ASKS,
    ATTRIBUTING,
    NAMED_COVER_WITHIN,
    OUTMATCHED,
    SOMEONE_ELSE,
    TO_ANOTHER,
)
from memory.retrieval.gate_calibration import (
    GateCalibration,
    GateTable,
    bundled_calibrations,
    dump_calibrations,
    load_calibration_file,
    parse_calibrations,
)
from memory.retrieval.scoring import DEFAULT_WEIGHTS

OTHER_MODEL = "text-embedding-3-small"


def test_a_calibration_round_trips_through_the_file_and_the_setting(tmp_path: Path) -> None:
    mine = GateCalibration(
        sem_min=0.61,
        lex_min_with_semantic=0.55,
        combined_min_with_semantic=0.9,
        cover_named_sem_min=0.45,
        cover_rival_margin=0.2,
        measured={"data": ["dev"], "abstention_pooled": 0.93},
    )
    path = tmp_path / "gate.json"
    path.write_text(dump_calibrations({OTHER_MODEL: mine}), encoding="utf-8")
    assert load_calibration_file(path) == {OTHER_MODEL: mine}
    assert load_calibration_file(path)[OTHER_MODEL].measured["abstention_pooled"] == 0.93
    assert load_calibration_file(path)[OTHER_MODEL].cover_named_sem_min == 0.45

    config = tmp_path / "guildlore.toml"
    config.write_text(f'[embedding]\ngate_calibration = "{path}"\n', encoding="utf-8")
    settings = load_settings(config_file=config, env={})
    retrieval = settings.memory_config().retrieval
    assert retrieval.gate_calibration == {OTHER_MODEL: mine}

    # The engine's table: the configured model gets its thresholds, the
    # shipped model keeps its own, a query without a vector the defaults.
    table = GateTable(DEFAULT_WEIGHTS, retrieval.gate_calibration)
    other = table.weights_for(OTHER_MODEL)
    assert (other.sem_min, other.lex_min_with_semantic, other.combined_min_with_semantic) == (
        0.61,
        0.55,
        0.9,
    )
    assert other.support_sem_min == DEFAULT_WEIGHTS.support_sem_min
    assert other.with_semantic == DEFAULT_WEIGHTS.with_semantic  # fusion untouched
    shipped = bundled_calibrations()[LOCAL_MODEL_ID]
    assert table.weights_for(LOCAL_MODEL_ID).sem_min == shipped.sem_min
    assert table.weights_for(None) == DEFAULT_WEIGHTS
    assert table.weights_for("never-calibrated") == DEFAULT_WEIGHTS


def test_a_configured_calibration_replaces_the_shipped_one_for_its_model(tmp_path: Path) -> None:
    path = tmp_path / "gate.json"
    path.write_text(json.dumps({LOCAL_MODEL_ID: {"sem_min": 0.9}}), encoding="utf-8")
    overrides = load_calibration_file(path)
    table = GateTable(DEFAULT_WEIGHTS, overrides)
    assert table.weights_for(LOCAL_MODEL_ID).sem_min == 0.9
    # Fields the file leaves out keep the engine's defaults, not the shipped ones.
    assert (
        table.weights_for(LOCAL_MODEL_ID).lex_min_with_semantic
        == DEFAULT_WEIGHTS.lex_min_with_semantic
    )


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ([1, 2], "JSON object"),
        ({"m": {"sem_minimum": 0.3}}, "unknown field(s) sem_minimum"),
        ({"m": {"sem_min": 2}}, "0..1.5"),
        ({"m": {"sem_min": "high"}}, "0..1.5"),
        ({"m": {"sem_min": True}}, "0..1.5"),
        ({"m": 0.3}, "object of thresholds"),
        ({"": {}}, "non-empty"),
    ],
)
def test_a_bad_calibration_is_refused_with_the_reason(data: Any, says: str) -> None:
    with pytest.raises(InvalidInput, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_calibrations(data)


def test_a_broken_calibration_file_is_a_settings_problem(tmp_path: Path) -> None:
    path = tmp_path / "gate.json"
    path.write_text("{not json", encoding="utf-8")
    config = tmp_path / "guildlore.toml"
    config.write_text(f'[embedding]\ngate_calibration = "{path}"\n', encoding="utf-8")
    with pytest.raises(SettingsError) as err:
        load_settings(config_file=config, env={})
    assert any(
        "embedding.gate_calibration" in p and "not valid JSON" in p for p in err.value.problems
    )


def test_the_shipped_calibration_covers_the_bundled_model() -> None:
    shipped = bundled_calibrations()
    assert LOCAL_MODEL_ID in shipped
    # It was measured, and says on what.
    assert shipped[LOCAL_MODEL_ID].measured["data"]


# -- strict search with the shipped calibration -------------------------------------------------

GUILD = "g-gate"
# A small guild with a few running topics, written for this test.
LINES: tuple[tuple[str, str], ...] = (
    ("mara", "My sourdough starter finally doubled overnight, I fed it rye flour twice a day"),
    ("mara", "Baked two loaves this morning, the crumb was open and a little sour"),
    ("tomas", "Which flour do you use for the starter, rye or whole wheat?"),
    ("mara", "Rye for the starter, bread flour for the dough itself"),
    ("tomas", "I replaced the rear derailleur on my road bike, shifting is smooth again"),
    ("tomas", "The chain was stretched too, so I put on a new 11-speed chain"),
    ("ines", "We hiked the ridge trail above Lake Orta on Saturday, six hours up and down"),
    ("ines", "The view from the summit hut was worth every step"),
    ("mara", "Ines, did you take the cable car back down or walk?"),
    ("ines", "We walked down, my knees still hurt today"),
    ("tomas", "Anyone up for the board game night on Friday? I bring Catan"),
    ("ines", "I can bring snacks for the game night, maybe nachos"),
    ("mara", "I'm starting a pottery class next month at the community center"),
    ("tomas", "My sister just adopted a grey kitten called Pixel"),
    ("ines", "I switched my phone plan, it is cheaper and has more data now"),
    ("mara", "The sourdough discard makes great pancakes, by the way"),
)
ON_TOPIC = (
    "what flour does Mara feed her sourdough starter?",
    "what did Tomas fix on his bike?",
    "where did Ines go hiking?",
    "who brings snacks to game night?",
    "what is the name of the kitten?",
)
OFF_TOPIC = (
    "papyrus",
    "what is the capital of Australia?",
    "did anyone mention their tax return deadline?",
    "how do I configure a Kubernetes ingress controller?",
    "recommendations for a jazz saxophone teacher",
)


async def _guild(
    make_memory: Callable[..., Any],
    lines: tuple[tuple[str, str], ...] = LINES,
    guild: str = GUILD,
    minutes: int = 7,
) -> Any:
    """A started engine whose guild holds ``lines`` (author, text), ``minutes`` apart."""
    mem = await make_memory()
    start = datetime(2026, 3, 1, 18, 0, tzinfo=UTC)
    for n, (author, text) in enumerate(lines):
        await mem.ingest_message(
            IncomingMessage(
                id=f"{guild}-m{n}",
                guild_id=guild,
                channel_id="general",
                author_id=author,
                author_name=author.capitalize(),
                content=text,
                created_at=(start + timedelta(minutes=minutes * n)).isoformat(),
            )
        )
    await mem.settle(timeout=60)
    return mem


async def test_strict_search_answers_on_topic_queries_and_nothing_off_topic(
    make_memory: Callable[..., Any],
) -> None:
    mem = await _guild(make_memory)
    for query in ON_TOPIC:
        hits = await mem.search(GUILD, query, scope="all", limit=5)
        assert hits, f"on-topic {query!r} got no hit"
    for query in OFF_TOPIC:
        hits = await mem.search(GUILD, query, scope="all", limit=5)
        assert hits == [], f"off-topic {query!r} got {[h.text for h in hits]}"
        # The ranking view still ranks candidates: the gate, not the
        # retrieval, is what answers "nothing".
        assert await mem.search(GUILD, query, scope="all", limit=5, gate=False)


async def test_a_query_about_one_member_is_not_covered_by_another_members_story(
    make_memory: Callable[..., Any],
) -> None:
    mem = await _guild(make_memory)
    # Mara baked the loaves and Ines hiked; the others only asked about it.
    assert await mem.search(GUILD, "what did Mara bake this morning?", scope="all", limit=5)
    assert await mem.search(GUILD, "what did Ines bake this morning?", scope="all", limit=5) == []
    assert await mem.search(GUILD, "where did Ines go hiking?", scope="all", limit=5)
    assert await mem.search(GUILD, "where did Mara go hiking?", scope="all", limit=5) == []
    # The ranking view still finds the story: only strict search declines.
    ranked = await mem.search(
        GUILD, "what did Ines bake this morning?", scope="all", limit=5, gate=False
    )
    assert any("loaves" in h.text for h in ranked)


# A chat where each story is one member's and the other only reacts to it.
REACTIONS_GUILD = "g-reactions"
REACTIONS: tuple[tuple[str, str], ...] = (
    ("bob", "Ran a charity race for mental health last Saturday."),
    ("bob", "The race made me realise that self-care really matters."),
    ("alice", "That charity race sounds great, Bob! I'm really proud of you."),
    ("alice", "Congrats, Bob! Running sounds awesome. I'm so happy for you."),
    ("alice", "Love those new trail shoes! For walking or running?"),
    ("bob", "Running! I run three mornings a week now, it clears my head."),
    ("alice", "I baked a lemon tart for my sister's birthday yesterday."),
    ("bob", "Wow, a lemon tart! What else did you bake for the party?"),
    ("alice", "Just the tart, my sister made the cake herself."),
)


async def test_a_members_reaction_to_anothers_story_does_not_cover_a_query_about_them(
    make_memory: Callable[..., Any],
) -> None:
    mem = await _guild(make_memory, REACTIONS, REACTIONS_GUILD, minutes=5)

    async def strict(query: str) -> list[Any]:
        return list(await mem.search(REACTIONS_GUILD, query, scope="all", limit=5))

    # Bob ran the race and runs; Alice praised the race ("I'm really proud of
    # you") and asked about running: her words about it are not about her.
    assert await strict("What did Bob realise after his charity race?")
    assert await strict("What did Alice realise after her charity race?") == []
    assert await strict("How often does Bob go running?")
    assert await strict("How often does Alice go running?") == []
    # Her own story is hers.
    assert await strict("What did Alice bake for her sister's birthday?")
    # The ranking view says why: her first hits speak to Bob or ask.
    ranked = await mem.search(
        REACTIONS_GUILD, "What did Alice realise after her charity race?", scope="all", gate=False
    )
    assert ranked and all(
        h.parts.about in {ASKS, TO_ANOTHER, SOMEONE_ELSE} for h in ranked[:NAMED_COVER_WITHIN]
    )
    assert any(h.parts.about == TO_ANOTHER and h.subject == "alice" for h in ranked)


# Two members' own stories that share a word: the shelter is Bob's, Alice only
# tells of her own weekends.
RIVALS_GUILD = "g-rivals"
RIVALS: tuple[tuple[str, str], ...] = (
    ("bob", "I volunteer at the animal shelter every weekend, walking the rescue dogs."),
    ("alice", "Weekends are packed for me, football with the kids and then the market."),
    ("bob", "The shelter dogs are so happy when I come in on Saturday mornings."),
    ("alice", "I baked a lemon tart for my sister's birthday yesterday."),
    ("bob", "My sister only ever bakes brownies, never tarts."),
    ("alice", "The tart came out a bit sour but everyone had seconds."),
)


async def test_a_query_about_one_member_is_not_covered_when_anothers_story_is_clearly_closer(
    make_memory: Callable[..., Any],
) -> None:
    mem = await _guild(make_memory, RIVALS, RIVALS_GUILD, minutes=5)

    async def strict(query: str) -> list[Any]:
        return list(await mem.search(RIVALS_GUILD, query, scope="all", limit=5))

    # Alice tells of her weekends, but the volunteering is Bob's.
    assert await strict("Where does Bob volunteer on weekends?")
    assert await strict("Where does Alice volunteer on weekends?") == []
    # Her own story stays hers although Bob's sister bakes too.
    assert await strict("What did Alice bake for her sister's birthday?")
    ranked = await mem.search(
        RIVALS_GUILD, "Where does Alice volunteer on weekends?", scope="all", gate=False
    )
    first = ranked[:NAMED_COVER_WITHIN]
    assert any(h.parts.about == OUTMATCHED and h.subject == "alice" for h in first)
    assert not any(h.parts.about in ATTRIBUTING for h in first)
