"""Consolidation with an LLM (the fake OpenAI server through the real
``openai`` client): pairs in the cosine band go to the model in batches,
under numbers rather than row ids; its verdicts merge or supersede; a failed
call changes nothing and its pairs are asked again next time."""

from __future__ import annotations

import json
from typing import Any

from memory.clock import iso
from memory.engine import Memory
from memory.roles.consolidation.llm import PairChecker
from memory.store.facts import upsert_fact
from tests.conftest import FakeClock
from tests.fakeopenai import FakeOpenAI, Fault
from tests.helpers import ALICE, CHANNEL, GUILD, msg

ROWS = (
    "Alice has a dog named Rex.",
    "Alice owns a dog called Rex.",
    "Alice plays the cello.",
    "Alice plays cello in an orchestra.",
    "Alice lives in Paris.",
    "Alice lives in Lyon.",
)


async def seed(mem: Memory, clock: FakeClock) -> dict[str, int]:
    ids: dict[str, int] = {}
    for n, text in enumerate(ROWS):
        clock.advance(minutes=5)
        now = iso(clock())
        up = await mem.db.write(
            lambda con, t=text, i=n, at=now: upsert_fact(
                con,
                guild_id=GUILD,
                channel_id=CHANNEL,
                subject=ALICE,
                fact=t,
                fact_type="other",
                evidence=None,
                source_message_id=f"91000000000000000{i}",
                confidence=0.8,
                now=at,
                actor="import",
                observed_at=at,
            )
        )
        ids[text] = up.fact.id
    await mem.embeddings.embed_facts(GUILD, list(ids.values()))
    return ids


def verdicts(*items: tuple[int, str]) -> str:
    return json.dumps({"verdicts": [{"pair": n, "verdict": v, "reason": "test"} for n, v in items]})


async def test_the_llm_judges_the_pairs_in_the_band(
    make_memory: Any, clock: FakeClock, fake_openai: FakeOpenAI, fake_llm_client: Any
) -> None:
    mem = await make_memory(clock=clock)
    ids = await seed(mem, clock)
    checker = PairChecker(fake_llm_client, "fake-model")
    fake_openai.script_chat(verdicts((1, "different"), (2, "same")))
    done = await mem.consolidation.run(GUILD, checker=checker)
    rep = done.report
    assert rep["mode"] == "llm" and rep["llm_calls"] == 1 and rep["llm_errors"] == 0
    (request,) = fake_openai.chat_requests()
    shown = request.body["messages"][1]["content"]
    # Newest candidates first; the older fact of a pair is A.
    assert shown.splitlines() == [
        "Pair 1: A <<<Alice plays the cello.>>> / B <<<Alice plays cello in an orchestra.>>>",
        "Pair 2: A <<<Alice has a dog named Rex.>>> / B <<<Alice owns a dog called Rex.>>>",
    ]
    applied = {(a["action"], a["keep"], a["drop"]) for a in rep["applied"]}
    assert applied == {
        ("merge", ids["Alice has a dog named Rex."], ids["Alice owns a dog called Rex."]),
        # The same-slot pair is judged offline, never sent.
        ("supersede", ids["Alice lives in Lyon."], ids["Alice lives in Paris."]),
    }
    (row,) = [
        h
        for h in await mem.facts.history(GUILD, ids["Alice owns a dog called Rex."])
        if h.event == "merge"
    ]
    assert row.reason and "same fact (LLM)" in row.reason
    cello = await mem.facts.get(GUILD, ids["Alice plays cello in an orchestra."])
    assert cello is not None and cello.is_active and cello.valid_to is None


async def test_a_failed_call_changes_nothing_and_is_asked_again(
    make_memory: Any, clock: FakeClock, fake_openai: FakeOpenAI, fake_llm_client: Any
) -> None:
    mem = await make_memory(clock=clock)
    ids = await seed(mem, clock)
    checker = PairChecker(fake_llm_client, "fake-model")
    fake_openai.script_chat(Fault.status(500))
    first = await mem.consolidation.run(GUILD, checker=checker)
    assert first.report["llm_errors"] == 1
    dog = await mem.facts.get(GUILD, ids["Alice owns a dog called Rex."])
    assert dog is not None and dog.is_active
    clock.advance(hours=1)
    fake_openai.script_chat(verdicts((1, "different"), (2, "same")))
    second = await mem.consolidation.run(GUILD, checker=checker)
    assert second.report["llm_calls"] == 1 and second.report["checked"] == 2
    assert [a["drop"] for a in second.report["applied"]] == [ids["Alice owns a dog called Rex."]]


def insights_reply(*items: tuple[str, list[int]]) -> str:
    return json.dumps({"insights": [{"summary": s, "facts": f} for s, f in items]})


async def test_an_active_member_gets_cited_insights_once_a_day_and_undo_removes_them(
    make_memory: Any, clock: FakeClock, fake_openai: FakeOpenAI, fake_llm_client: Any
) -> None:
    mem = await make_memory(clock=clock, embeddings="none")
    ids = await seed(mem, clock)
    await mem.ingest_message(msg("hello everyone", created_at=iso(clock())))
    assert await mem.drain()
    checker = PairChecker(fake_llm_client, "fake-model")
    long = "Alice " + "x" * 300
    fake_openai.script_chat(
        insights_reply(
            ("Alice connects music and routine: cello practice shapes her week.", [3, 4]),
            ("Alice cares for her dog Rex.", [99]),  # cites nothing shown: dropped
            (long, [1]),  # too long: dropped
        )
    )
    before = await mem.db.read(
        lambda con: sorted(tuple(r) for r in con.execute("SELECT * FROM memory_facts"))
    )
    done = await mem.consolidation.run(GUILD, checker=checker)
    (request,) = fake_openai.chat_requests()  # no embeddings: no pair in the band
    shown = request.body["messages"][1]["content"]
    # The member's current facts, newest first, under aliases (never row ids).
    assert shown.splitlines()[2:] == [
        f"[F{n}] <<<{text}>>>" for n, text in enumerate(reversed(ROWS), 1)
    ]
    (made,) = done.report["insights"]
    insight = await mem.facts.get(GUILD, made["fact_id"])
    assert insight is not None and insight.fact_type == "insight" and insight.subject == ALICE
    assert len(insight.fact) <= 280
    assert made["cites"] == sorted(
        [ids["Alice plays cello in an orchestra."], ids["Alice plays the cello."]]
    )
    # Never evidence: the default consumers do not see insights.
    hits = await mem.search(GUILD, "cello practice week", scope="facts", gate=False)
    assert made["fact_id"] not in {int(h.id) for h in hits}
    # One insight run a day per member.
    clock.advance(hours=2)
    again = await mem.consolidation.run(GUILD, checker=checker)
    assert again.report["insight_members"] == 0 and len(fake_openai.chat_requests()) == 1
    # The undo of the first run removes the insight and closes what it closed.
    await mem.consolidation.undo(GUILD, done.run_id)
    assert await mem.facts.get(GUILD, made["fact_id"]) is None
    after = await mem.db.read(
        lambda con: sorted(tuple(r) for r in con.execute("SELECT * FROM memory_facts"))
    )
    assert after == before
