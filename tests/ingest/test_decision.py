"""The write decision: add, noop (paraphrase), update (refinement) and
supersede (contradiction in a single-valued slot), the newer observation
winning whatever order messages arrive in — through the real engine,
pipeline, rule extractor and SQLite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.db.sqlite import driver as sqlite
from memory.db.sqlite.migrations import migrate
from memory.decision import CurrentFact, decide, slot_of
from memory.engine import Memory
from memory.models import Fact, IncomingMessage
from memory.store.fact_decision import NewFact, apply_decision, current_facts
from memory.store.fact_time import fact_sources
from tests.helpers import GUILD, msg

ANA = "Ana"


async def ingest(mem: Memory, *items: IncomingMessage) -> None:
    for m in items:
        out = await mem.ingest_message(m, backpressure=True)
        assert out.status == "queued", out
    assert await mem.settle(60)


async def facts_by_text(mem: Memory) -> dict[str, Fact]:
    return {f.fact: f for f in await mem.facts.find(GUILD, limit=200)}


async def current_texts(mem: Memory) -> set[str]:
    return {t for t, f in (await facts_by_text(mem)).items() if f.valid_to is None}


# -- the rules, on plain values -------------------------------------------------------


def test_slots_from_the_rule_extractor_shapes() -> None:
    assert slot_of("Ana lives in New York.") == slot_of("Ana moved to New York.")
    lives = slot_of("Ana lives in New York.")
    assert lives is not None and lives.kind == "residence"
    assert slot_of("Ana works at Google.") != slot_of("Ana works as a nurse.")
    fav = slot_of("Ana's favorite color is blue.")
    assert fav == slot_of("Ana's favourite color is blue.")
    assert fav is not None and fav.key == ("color",)
    # A relative's facts are not the subject's slot.
    assert slot_of("Ana's sister lives in Paris.") is None
    learning, knows = slot_of("Ana is learning Rust."), slot_of("Ana knows Rust.")
    assert learning is not None and knows is not None
    assert (learning.kind, learning.key) == (knows.kind, knows.key)
    assert learning.value != knows.value
    assert slot_of("Ana has a dog.") is None
    # No object, no slot: "likes it" does not meet every other liking.
    assert slot_of("Ana likes it.") is None


def _cur(i: int, text: str, at: str = "2024-01-01T00:00:00.000Z") -> CurrentFact:
    return CurrentFact(i, text, at, at)


def test_decisions_on_plain_values() -> None:
    later = "2024-06-01T00:00:00.000Z"
    ny = [_cur(1, "Ana lives in New York.")]
    assert decide("Ana moved to Los Angeles.", later, ny).kind == "supersede"
    assert decide("Ana moved to Los Angeles.", later, ny).targets == (1,)
    assert decide("Ana moved to New York.", later, ny).kind == "noop"
    assert decide("Ana lives in Brooklyn, New York.", later, ny).kind == "update"
    js = [_cur(2, "Ana likes JavaScript.")]
    assert decide("Ana loves JavaScript.", later, js).kind == "noop"
    assert decide("Ana likes JavaScript for work.", later, js).kind == "update"
    assert decide("Ana doesn't like JavaScript.", later, js).kind == "supersede"
    assert decide("Ana is learning Rust.", later, js).kind == "add"
    rust = [_cur(3, "Ana is learning Rust.")]
    assert decide("Ana knows Rust.", later, rust).kind == "supersede"
    dog = [_cur(4, "Ana has a small brown dog.")]
    assert decide("Ana has a small brown dog named Rex.", later, dog, ANA).kind == "update"
    assert decide("Ana has a cat.", later, dog, ANA).kind == "add"
    # Older than the current value: kept as history, closed, never superseding.
    old = decide("Ana lives in Boston.", "2023-01-01T00:00:00.000Z", ny)
    assert (old.kind, old.targets, old.closed_at) == ("add", (), "2024-01-01T00:00:00.000Z")


# -- the pipeline end to end -----------------------------------------------------------


async def test_contradiction_supersedes_and_as_of_still_finds_the_old_fact(
    make_memory: Any, clock: Any
) -> None:
    mem = await make_memory(clock=clock)
    await ingest(
        mem,
        msg("I live in New York", id="910000000000000001", created_at="2023-01-10T10:00:00.000Z"),
        msg(
            "I moved to Los Angeles",
            id="910000000000000002",
            created_at="2024-03-01T10:00:00.000Z",
        ),
    )
    facts = await facts_by_text(mem)
    ny, la = facts["Alice lives in New York."], facts["Alice moved to Los Angeles."]
    # Closed, not archived: still active so that a question about the past finds it.
    assert ny.is_active and ny.valid_to == la.observed_at == "2024-03-01T10:00:00.000Z"
    assert la.valid_to is None
    query = "where does Alice live"
    now_hits = {h.text for h in await mem.search(GUILD, query, gate=False) if h.kind == "fact"}
    assert "Alice moved to Los Angeles." in now_hits
    assert "Alice lives in New York." not in now_hits
    then = datetime(2023, 6, 1, tzinfo=UTC)
    old_hits = {
        h.text for h in await mem.search(GUILD, query, gate=False, as_of=then) if h.kind == "fact"
    }
    assert "Alice lives in New York." in old_hits
    assert "Alice moved to Los Angeles." not in old_hits
    old_side = [h for h in await mem.facts.history(GUILD, ny.id) if h.event == "supersede"]
    new_side = [h for h in await mem.facts.history(GUILD, la.id) if h.event == "supersede"]
    assert len(old_side) == len(new_side) == 1
    assert f"superseded by fact {la.id}" in (old_side[0].reason or "")
    assert f"supersedes fact {ny.id}" in (new_side[0].reason or "")
    assert old_side[0].old_text == new_side[0].old_text == "Alice lives in New York."
    assert old_side[0].new_text == "Alice moved to Los Angeles."
    snapshot = await mem.refresh_snapshot()
    assert "Alice moved to Los Angeles." in snapshot
    assert "Alice lives in New York." not in snapshot
    counters = mem.admin.counters()
    assert counters["decision_adds"] == 1 and counters["decision_supersedes"] == 1
    rows = await mem.admin.action_log(kind="memory_decision")
    assert rows and sum((r.detail or {})["supersede"] for r in rows) == 1


async def test_refinement_updates_the_existing_row(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    await ingest(mem, msg("I like TypeScript"), msg("I like TypeScript for work"))
    facts = await facts_by_text(mem)
    assert "Alice likes TypeScript." not in facts
    refined = facts["Alice likes TypeScript for work."]
    assert refined.valid_to is None
    history = await mem.facts.history(GUILD, refined.id)
    assert [h.event for h in history] == ["add", "update"]
    assert history[1].old_text == "Alice likes TypeScript."
    assert mem.admin.counters()["decision_updates"] == 1


async def test_paraphrase_is_a_noop_with_a_second_source(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    first = msg("I like JavaScript", id="910000000000000011", created_at="2025-01-01T10:00:00Z")
    second = msg("I love JavaScript", id="910000000000000012", created_at="2025-02-01T10:00:00Z")
    await ingest(mem, first, second)
    facts = await facts_by_text(mem)
    assert list(facts) == ["Alice likes JavaScript."]
    fact = facts["Alice likes JavaScript."]
    assert fact.last_observed_at == "2025-02-01T10:00:00.000Z"
    found = await mem.db.read(fact_sources, GUILD, fact.id)
    assert [s.message_id for s in found] == [first.id, second.id]
    assert mem.admin.counters()["decision_noops"] == 1


async def test_unrelated_facts_are_added(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    await ingest(mem, msg("I live in Oslo"), msg("I work as a nurse"), msg("I have a dog"))
    assert await current_texts(mem) == {
        "Alice lives in Oslo.",
        "Alice works as a nurse.",
        "Alice has a dog.",
    }
    assert mem.admin.counters()["decision_adds"] == 3


async def test_an_older_imported_message_never_supersedes_a_newer_fact(
    make_memory: Any,
) -> None:
    mem = await make_memory(embeddings="none")
    await ingest(
        mem,
        msg("I live in Berlin", id="910000000000000021", created_at="2025-05-01T10:00:00.000Z"),
        msg("I live in Munich", id="910000000000000022", created_at="2021-05-01T10:00:00.000Z"),
    )
    facts = await facts_by_text(mem)
    berlin, munich = facts["Alice lives in Berlin."], facts["Alice lives in Munich."]
    assert berlin.valid_to is None
    # Kept as history: true from its message until the newer observation.
    assert munich.valid_from == "2021-05-01T10:00:00.000Z"
    assert munich.valid_to == berlin.observed_at
    assert await current_texts(mem) == {"Alice lives in Berlin."}
    assert [h.event for h in await mem.facts.history(GUILD, berlin.id)] == ["add"]


# -- arrival order does not change the current set -------------------------------------

CITIES = ("Lisbon", "Porto", "Berlin", "Tokyo", "Oslo")
START = datetime(2024, 1, 1, tzinfo=UTC)


def _at(hours: int) -> str:
    return (
        (START + timedelta(hours=hours)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


@st.composite
def observations(draw: st.DrawFn) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """3–5 observations of one slot at distinct times (values may repeat, the
    phrasing varies), in time order and in a shuffled arrival order."""
    n = draw(st.integers(3, 5))
    hours = sorted(draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n, unique=True)))
    obs = [
        (
            h,
            draw(st.sampled_from(("Ana lives in {}.", "Ana moved to {}."))).format(
                draw(st.sampled_from(CITIES))
            ),
        )
        for h in hours
    ]
    return obs, draw(st.permutations(obs))


@settings(max_examples=60, deadline=None)
@given(observations())
def test_the_newest_observation_is_current_in_any_arrival_order(
    case: tuple[list[tuple[int, str]], list[tuple[int, str]]],
) -> None:
    in_time, arrival = case
    con = sqlite.connect(":memory:")
    migrate(con)
    now = _at(20_000)
    for hours, text in arrival:
        new = NewFact(GUILD, None, "u1", text, "profile", None, None, 0.7, _at(hours))
        with con:
            decision = decide(text, _at(hours), current_facts(con, GUILD, "u1"), ANA)
            apply_decision(con, new, decision, now=now, actor="test")
    current = current_facts(con, GUILD, "u1")
    assert len(current) == 1, (arrival, current)
    assert slot_of(current[0].fact) == slot_of(in_time[-1][1])
    assert current[0].last_observed_at == _at(in_time[-1][0])


async def test_property_store_runs_in_a_file_database(tmp_path: Path) -> None:
    """The same store functions on a file database (the engine's kind)."""
    con = sqlite.connect(tmp_path / "p.db")
    migrate(con)
    for hours, city in ((5, "Porto"), (1, "Lisbon"), (9, "Oslo")):
        text = f"Ana lives in {city}."
        new = NewFact(GUILD, None, "u1", text, "profile", None, None, 0.7, _at(hours))
        with con:
            apply_decision(
                con,
                new,
                decide(text, _at(hours), current_facts(con, GUILD, "u1")),
                now=_at(10),
                actor="t",
            )
    assert [c.fact for c in current_facts(con, GUILD, "u1")] == ["Ana lives in Oslo."]


async def test_a_message_whose_facts_were_superseded_ranks_below_the_current_one(
    make_memory: Any,
) -> None:
    mem = await make_memory()
    old = msg("I live in Lisbon", id="910000000000000031", created_at="2023-01-10T10:00:00.000Z")
    new = msg("I live in Porto", id="910000000000000032", created_at="2024-03-01T10:00:00.000Z")
    await ingest(mem, old, new)

    async def ranked(**kw: Any) -> list[tuple[str, float]]:
        hits = await mem.search(GUILD, "I live in", scope="messages", gate=False, **kw)
        return [(h.id, h.parts.superseded) for h in hits]

    assert await ranked() == [(new.id, 0.0), (old.id, 1.0)]
    # Before the move nothing had superseded the Lisbon message yet.
    assert await ranked(as_of=datetime(2023, 6, 1, tzinfo=UTC)) == [(old.id, 0.0)]
