"""Consent for sensitive facts: the classifier, the queue with its 7-day expiry
and the ``sensitive_facts`` setting, through the real engine (SQLite, the
pipeline, the fake OpenAI server for the LLM labels)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from memory.clock import iso
from memory.engine import Memory
from memory.extract.llm import LLMExtractor
from memory.extract.sensitivity import CATEGORIES, classify_text
from memory.models import IncomingMessage
from tests.conftest import FakeClock
from tests.fakeopenai import FakeOpenAI, Fault
from tests.helpers import inspect_db

GUILD, CHANNEL, ALICE = "100000000000000001", "200000000000000001", "300000000000000001"
SENSITIVE = "I am a practising Catholic."
PLAIN = "I love hiking in the Alps."

_seq = iter(range(10**6))


def message(text: str, when: datetime | None = None) -> IncomingMessage:
    return IncomingMessage(
        id=str(400000000000000000 + next(_seq)),
        guild_id=GUILD,
        channel_id=CHANNEL,
        author_id=ALICE,
        author_name="Alice",
        content=text,
        created_at=iso(when or datetime(2026, 11, 22, 11, 0, tzinfo=UTC)),
    )


async def say(mem: Memory, text: str) -> IncomingMessage:
    msg = message(text)
    assert await (await mem.ingest_message(msg)).wait()
    assert await mem.settle(30)
    return msg


async def facts(mem: Memory) -> list[str]:
    return [f.fact for f in await mem.facts.find(GUILD, subject=ALICE)]


def raw_rows(mem: Memory, sql: str) -> list[tuple[Any, ...]]:
    con = inspect_db(mem)
    try:
        return [tuple(r) for r in con.execute(sql)]
    finally:
        con.close()


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("Alice has diabetes.", "health"),
        ("Alice ist schwanger.", "health"),
        ("Alice leidet an Dépression.", "health"),
        ("Alice is bisexual.", "sexuality"),
        ("Alice prays every morning.", "religion"),
        ("Alice voted for the Greens.", "politics"),
        ("Alice is Hispanic.", "ethnicity"),
        ("Alice is paying off a mortgage.", "finances"),
        ("Alice was arrested in 2019.", "legal"),
        ("Alice lives at 12 Baker Street.", "location"),
        ("Alice's e-mail is alice@example.com.", "contact"),
        ("Alice can be reached on +49 170 1234567.", "contact"),
        ("Alice's number is +491701234567.", "contact"),
        ("Alice's number is 0170 1234567.", "contact"),
        ("Call Alice on 5551234567.", "contact"),
        ("Alice is 34 years old.", "age"),
        ("Alice came out as bisexual last year.", "sexuality"),
        ("Alice was born on 3 May 1990.", "age"),
        ("Alice was born in 1990.", "age"),
    ],
)
def test_offline_lists_find_each_category(text: str, category: str) -> None:
    assert category in CATEGORIES
    assert classify_text(text) == category


@pytest.mark.parametrize(
    "text",
    [
        "Alice loves hiking in the Alps.",
        "Alice sprays graffiti.",  # "pray" only as a whole word
        "Alice is a systematic thinker.",
        "Alice was born in Lisbon.",  # a city of birth is not an age
        "Alice worked there 2019-2024.",  # a span of years is not a phone number
        "Alice lives in Berlin.",  # a city is not a precise location
        "Alice is level 50 in the game.",
        # Everyday words that once flagged ordinary talk as special:
        "Alice baked a lemon tart for her sister's birthday yesterday.",
        "The tart came out a bit sour but everyone had seconds.",
        "The new patch came out today.",
        # Ids are not phone numbers: a segment name, a Discord snowflake.
        "The segment 20230827161847 looks like it has a column of text near the edge.",
        "See message 1108134343295127592 in the other channel.",
    ],
)
def test_offline_lists_leave_ordinary_facts_alone(text: str) -> None:
    assert classify_text(text) is None


async def test_ask_queues_then_accept_stores(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    msg = await say(mem, f"{SENSITIVE} {PLAIN}")
    assert await facts(mem) == ["Alice loves hiking in the Alps."]
    pending = await mem.consent.pending(GUILD, ALICE)
    assert [(p.fact, p.category, p.message_id) for p in pending] == [
        ("Alice is a practising Catholic.", "religion", msg.id)
    ]
    assert mem.pipeline.gate.stats.queued == 1
    assert mem.admin.counters()["sensitive_queued"] == 1
    # Only the member's own queue: another member sees nothing, and cannot decide it.
    assert await mem.consent.pending(GUILD, "399999999999999999") == []
    assert await mem.consent.accept(GUILD, "399999999999999999", pending[0].id) is None
    assert await mem.consent.counts() == {GUILD: {"religion": 1}}

    stored = await mem.consent.accept(GUILD, ALICE, pending[0].id)
    assert stored is not None and stored.fact == "Alice is a practising Catholic."
    assert stored.source_message_id == msg.id
    assert sorted(await facts(mem)) == [
        "Alice is a practising Catholic.",
        "Alice loves hiking in the Alps.",
    ]
    history = await mem.facts.history(GUILD, stored.id)
    assert [(h.event, h.actor) for h in history] == [
        ("add", f"user:{ALICE}"),
        ("consent_accept", f"user:{ALICE}"),
    ]
    assert await mem.consent.pending(GUILD, ALICE) == []
    assert await mem.consent.counts() == {}
    # Accepting twice does nothing.
    assert await mem.consent.accept(GUILD, ALICE, pending[0].id) is None
    decisions = raw_rows(
        mem, "SELECT event, actor, old_text, new_text FROM fact_history WHERE event LIKE 'consent%'"
    )
    assert decisions == [
        ("consent_asked", "extractor", None, None),
        ("consent_accept", f"user:{ALICE}", None, None),
    ]


async def test_reject_stores_nothing_and_keeps_no_text(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    await say(mem, SENSITIVE)
    (item,) = await mem.consent.pending(GUILD, ALICE)
    assert await mem.consent.reject(GUILD, ALICE, item.id)
    assert await facts(mem) == []
    assert await mem.consent.pending(GUILD, ALICE) == []
    assert raw_rows(mem, "SELECT count(*) FROM consent_queue") == [(0,)]
    history = raw_rows(
        mem,
        "SELECT event, actor, old_text, new_text, reason FROM fact_history "
        "WHERE event = 'consent_reject'",
    )
    assert history == [("consent_reject", f"user:{ALICE}", None, None, "religion")]
    actions = raw_rows(mem, "SELECT message, detail FROM action_log WHERE kind = 'memory_consent'")
    assert len(actions) == 1 and "Catholic" not in json.dumps(actions)
    assert not await mem.consent.reject(GUILD, ALICE, item.id)


async def test_expiry_after_seven_days_stores_nothing(make_memory: Any) -> None:
    clock = FakeClock(datetime(2026, 11, 22, 12, 0, tzinfo=UTC))
    mem = await make_memory(embeddings="none", clock=clock)
    await say(mem, SENSITIVE)
    (item,) = await mem.consent.pending(GUILD, ALICE)
    clock.advance(days=6, hours=23)
    assert await mem.consent.expire() == 0
    assert len(await mem.consent.pending(GUILD, ALICE)) == 1
    clock.advance(hours=1)
    # Expired: neither listed nor acceptable, even before the job ran.
    assert await mem.consent.pending(GUILD, ALICE) == []
    assert await mem.consent.accept(GUILD, ALICE, item.id) is None
    assert await mem.consent.expire() == 1
    assert await facts(mem) == []
    assert raw_rows(mem, "SELECT count(*) FROM consent_queue") == [(0,)]
    assert raw_rows(
        mem, "SELECT actor, new_text FROM fact_history WHERE event = 'consent_expire'"
    ) == [("system", None)]


async def test_never_drops_and_counts(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    await mem.guilds.set_setting(GUILD, "sensitive_facts", "never")
    await say(mem, f"{SENSITIVE} {PLAIN}")
    assert await facts(mem) == ["Alice loves hiking in the Alps."]
    assert await mem.consent.pending(GUILD, ALICE) == []
    assert mem.pipeline.gate.stats.dropped == 1
    assert mem.admin.counters()["sensitive_dropped"] == 1
    (row,) = raw_rows(mem, "SELECT detail FROM action_log WHERE kind = 'memory_sensitive'")
    assert json.loads(row[0])["dropped"] == 1 and "Catholic" not in row[0]


async def test_store_keeps(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    await mem.guilds.set_setting(GUILD, "sensitive_facts", "store")
    await say(mem, SENSITIVE)
    assert await facts(mem) == ["Alice is a practising Catholic."]
    assert await mem.consent.pending(GUILD, ALICE) == []


async def test_pending_fact_goes_with_its_deleted_message(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    msg = await say(mem, SENSITIVE)
    assert len(await mem.consent.pending(GUILD, ALICE)) == 1
    await mem.delete_messages(GUILD, [msg.id])
    assert await mem.consent.pending(GUILD, ALICE) == []


async def test_forget_erases_pending_facts(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    await say(mem, SENSITIVE)
    await mem.forget(GUILD, ALICE)
    assert raw_rows(mem, "SELECT count(*) FROM consent_queue") == [(0,)]


def _extraction(fact: str) -> str:
    return json.dumps(
        {"facts": [{"fact": fact, "type": "profile", "confidence": 0.8, "evidence": None}]}
    )


def _labels(*categories: str) -> str:
    return json.dumps(
        {"labels": [{"index": i, "category": c} for i, c in enumerate(categories, start=1)]}
    )


async def test_llm_label_queues_what_the_lists_miss(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    extractor = LLMExtractor(fake_openai.client(), "extract-model", timeout_s=30.0)
    mem = await make_memory(embeddings="none", extractor=extractor)
    fake_openai.script_chat(_extraction("Alice takes insulin every morning."), _labels("health"))
    await say(mem, "I take insulin every morning.")
    assert classify_text("Alice takes insulin every morning.") is None
    assert [p.category for p in await mem.consent.pending(GUILD, ALICE)] == ["health"]
    assert await facts(mem) == []
    label_call = fake_openai.chat_requests()[-1].body
    assert "sensitive_labels" in json.dumps(label_call["response_format"])
    assert "Alice takes insulin every morning." in label_call["messages"][1]["content"]


async def test_llm_label_none_is_stored(make_memory: Any, fake_openai: FakeOpenAI) -> None:
    extractor = LLMExtractor(fake_openai.client(), "extract-model", timeout_s=30.0)
    mem = await make_memory(embeddings="none", extractor=extractor)
    fake_openai.script_chat(_extraction("Alice sings in a church choir."), _labels("none"))
    await say(mem, "I sing in a church choir.")
    assert await facts(mem) == ["Alice sings in a church choir."]


async def test_llm_label_failure_falls_back_to_the_lists(
    make_memory: Any, fake_openai: FakeOpenAI
) -> None:
    extractor = LLMExtractor(fake_openai.client(), "extract-model", timeout_s=30.0)
    mem = await make_memory(embeddings="none", extractor=extractor)
    fake_openai.script_chat(_extraction("Alice has diabetes."), Fault.status(500))
    await say(mem, "I have diabetes.")
    assert [p.category for p in await mem.consent.pending(GUILD, ALICE)] == ["health"]
    assert mem.pipeline.gate.classifier.fallbacks == 1  # type: ignore[attr-defined]
    fake_openai.script_chat(_extraction("Alice has asthma."), '{"labels": "nope"}')
    await say(mem, "I have asthma.")
    assert sorted(p.fact for p in await mem.consent.pending(GUILD, ALICE)) == [
        "Alice has asthma.",
        "Alice has diabetes.",
    ]
    assert mem.pipeline.gate.classifier.fallbacks == 2  # type: ignore[attr-defined]


async def test_store_mode_makes_no_label_call(make_memory: Any, fake_openai: FakeOpenAI) -> None:
    extractor = LLMExtractor(fake_openai.client(), "extract-model", timeout_s=30.0)
    mem = await make_memory(embeddings="none", extractor=extractor)
    await mem.guilds.set_setting(GUILD, "sensitive_facts", "store")
    fake_openai.script_chat(_extraction("Alice has diabetes."))
    await say(mem, "I have diabetes.")
    assert await facts(mem) == ["Alice has diabetes."]
    assert len(fake_openai.chat_requests()) == 1


async def test_benchmark_ingest_keeps_sensitive_facts(local_embedder: Any, tmp_path: Any) -> None:
    from evals.common import ingest, offline_memory

    async with offline_memory(data_dir=tmp_path / "bench", embedder=local_embedder) as mem:
        await ingest(mem, [message(SENSITIVE)])
        assert await facts(mem) == ["Alice is a practising Catholic."]
        assert await mem.consent.pending(GUILD, ALICE) == []
