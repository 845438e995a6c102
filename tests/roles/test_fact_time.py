"""Facts dated by their messages: observation time, the messages a fact was
seen in, recency from the latest observation, and search ``as_of`` a past
time — through the real engine, pipeline, SQLite and dashboard app."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from memory.clock import iso
from memory.engine import Memory
from memory.models import Fact, IncomingMessage
from memory.store import facts as store
from memory.store.fact_time import FactSource, fact_sources
from tests.helpers import ALICE, BOB, GUILD, msg

Client = TestClient[web.Request, web.Application]


async def ingest(mem: Memory, *items: IncomingMessage) -> None:
    for m in items:
        out = await mem.ingest_message(m, backpressure=True)
        assert out.status == "queued", out
    assert await mem.settle(60)


async def only_fact(mem: Memory, text: str) -> Fact:
    found = [f for f in await mem.facts.find(GUILD, limit=100) if f.fact == text]
    assert len(found) == 1, [f.fact for f in await mem.facts.find(GUILD, limit=100)]
    return found[0]


async def sources(mem: Memory, fact_id: int) -> list[FactSource]:
    result: list[FactSource] = await mem.db.read(fact_sources, GUILD, fact_id)
    return result


async def test_imported_fact_keeps_its_message_time_and_ranks_as_old(
    make_memory: Any, clock: Any
) -> None:
    mem = await make_memory(clock=clock)
    await ingest(
        mem,
        msg("I play the cello", id="900000000000000001", created_at="2024-03-01T09:30:00.000Z"),
        msg(
            "I play the violin",
            author=BOB,
            name="Bob",
            id="900000000000000002",
            created_at=iso(clock() - timedelta(hours=1)),
        ),
    )
    cello = await only_fact(mem, "Alice plays the cello.")
    assert cello.observed_at == "2024-03-01T09:30:00.000Z"
    assert cello.valid_from == cello.last_observed_at == cello.observed_at
    assert cello.valid_to is None
    assert cello.created_at == iso(clock())  # when it was processed
    assert await sources(mem, cello.id) == [
        FactSource("900000000000000001", "2024-03-01T09:30:00.000Z")
    ]
    hits = await mem.search(GUILD, "who plays an instrument", gate=False, limit=10)
    recency = {h.text: h.parts.recency for h in hits if h.kind == "fact"}
    # 1 / (1 + ~996 days / 45): the two-year-old fact is old, the new one is new.
    assert recency["Alice plays the cello."] < 0.05
    assert recency["Bob plays the violin."] > 0.95


async def test_older_observation_never_moves_the_latest_backwards(
    make_memory: Any, clock: Any
) -> None:
    mem = await make_memory(clock=clock, embeddings="none")
    await ingest(
        mem, msg("I love chess", id="900000000000000011", created_at="2025-06-01T10:00:00.000Z")
    )
    first = await only_fact(mem, "Alice loves chess.")
    # An import of older history sees the same fact again.
    await ingest(
        mem, msg("I love chess", id="900000000000000012", created_at="2024-01-01T10:00:00.000Z")
    )
    again = await only_fact(mem, "Alice loves chess.")
    assert again.id == first.id
    assert again.last_observed_at == "2025-06-01T10:00:00.000Z"
    assert again.observed_at == again.valid_from == "2024-01-01T10:00:00.000Z"
    # A newer observation moves it forward.
    await ingest(
        mem, msg("I love chess", id="900000000000000013", created_at="2026-02-01T10:00:00.000Z")
    )
    latest = await only_fact(mem, "Alice loves chess.")
    assert latest.last_observed_at == "2026-02-01T10:00:00.000Z"
    assert latest.observed_at == "2024-01-01T10:00:00.000Z"
    assert [s.message_id for s in await sources(mem, first.id)] == [
        "900000000000000012",
        "900000000000000011",
        "900000000000000013",
    ]


async def test_fact_sources_are_idempotent_and_follow_deletes(make_memory: Any, clock: Any) -> None:
    mem = await make_memory(clock=clock, embeddings="none")
    await ingest(
        mem, msg("I love chess", id="900000000000000021", created_at="2025-06-01T10:00:00.000Z")
    )
    fact = await only_fact(mem, "Alice loves chess.")

    def observe_again(con: Any) -> None:
        store.upsert_fact(
            con,
            guild_id=GUILD,
            channel_id=fact.channel_id,
            subject=ALICE,
            fact=fact.fact,
            fact_type=fact.fact_type,
            evidence=None,
            source_message_id="900000000000000021",
            confidence=0.5,
            now=iso(clock()),
            actor="extractor",
        )

    await mem.db.write(observe_again)
    again = await only_fact(mem, "Alice loves chess.")
    # Without an explicit time the source message's own time is used.
    assert again.last_observed_at == "2025-06-01T10:00:00.000Z"
    assert len(await sources(mem, fact.id)) == 1
    await mem.facts.delete(GUILD, fact.id)
    count = await mem.db.read(lambda c: c.execute("SELECT count(*) FROM fact_sources").fetchone())
    assert count[0] == 0


async def test_lore_takes_its_source_message_time_else_the_clock(
    make_memory: Any, clock: Any
) -> None:
    mem = await make_memory(clock=clock, embeddings="none")
    await ingest(
        mem,
        msg(
            "the raid night is every Thursday",
            id="900000000000000031",
            created_at="2025-05-05T20:00:00.000Z",
        ),
    )
    with_source = await mem.lore.remember(
        GUILD,
        "raid night is every Thursday",
        source_text="the raid night is every Thursday",
        source_message_id="900000000000000031",
    )
    assert with_source is not None
    assert with_source.fact.observed_at == "2025-05-05T20:00:00.000Z"
    without = await mem.lore.remember(
        GUILD, "the guild bank opens on Sundays", source_text="the guild bank opens on Sundays"
    )
    assert without is not None
    assert without.fact.observed_at == iso(clock())
    assert await sources(mem, without.fact.id) == []


async def _two_homes(mem: Memory) -> tuple[Fact, Fact]:
    await ingest(
        mem,
        msg("I live in Lisbon", id="900000000000000041", created_at="2023-01-10T10:00:00.000Z"),
        msg("I live in Porto", id="900000000000000042", created_at="2024-03-01T10:00:00.000Z"),
    )
    lisbon = await only_fact(mem, "Alice lives in Lisbon.")
    porto = await only_fact(mem, "Alice lives in Porto.")

    # Closing Lisbon when Porto was observed is the write decision's job
    # (supersede); here it is set directly so that only the reading is tested.
    def close(con: Any) -> None:
        con.execute(
            "UPDATE memory_facts SET valid_to = ? WHERE id = ?", (porto.observed_at, lisbon.id)
        )

    await mem.db.write(close)
    return lisbon, porto


async def test_search_as_of_returns_the_facts_valid_then(make_memory: Any, clock: Any) -> None:
    mem = await make_memory(clock=clock)
    lisbon, porto = await _two_homes(mem)
    query = "where does Alice live"

    async def found(**kw: Any) -> set[str]:
        hits = await mem.search(GUILD, query, gate=False, limit=10, **kw)
        return {h.text for h in hits if h.kind == "fact"}

    assert "Alice lives in Porto." in await found()
    assert "Alice lives in Lisbon." not in await found()
    mid_2023 = datetime(2023, 7, 1, tzinfo=UTC)
    assert "Alice lives in Lisbon." in await found(as_of=mid_2023)
    assert "Alice lives in Porto." not in await found(as_of=mid_2023)
    assert await found(as_of=datetime(2022, 1, 1, tzinfo=UTC)) == set()
    # valid_to is exclusive: at the moment Porto was observed, Porto holds.
    at_move = datetime(2024, 3, 1, 10, tzinfo=UTC)
    assert {"Alice lives in Porto."} <= await found(as_of=at_move)
    assert "Alice lives in Lisbon." not in await found(as_of=at_move)
    # The prompt slice reads the same way.
    sl = await mem.build_prompt_slice(GUILD, None, ALICE, query, as_of=mid_2023)
    texts = {h.text for h in (*sl.user_facts, *sl.relevant_facts)}
    assert "Alice lives in Lisbon." in texts and "Alice lives in Porto." not in texts
    sl_now = await mem.build_prompt_slice(GUILD, None, ALICE, query)
    texts_now = {h.text for h in (*sl_now.user_facts, *sl_now.relevant_facts)}
    assert "Alice lives in Porto." in texts_now and "Alice lives in Lisbon." not in texts_now
    # Messages written after as_of are left out.
    msgs = await mem.search(
        GUILD, "live Lisbon Porto", scope="messages", gate=False, as_of=mid_2023
    )
    assert [h.id for h in msgs] == ["900000000000000041"]
    every = await mem.search(GUILD, "live Lisbon Porto", scope="messages", gate=False)
    assert {h.id for h in every} == {"900000000000000041", "900000000000000042"}
    assert lisbon.id != porto.id


async def test_api_search_as_of(make_memory: Any, clock: Any, aiohttp_client: Any) -> None:
    mem = await make_memory(clock=clock)
    await _two_homes(mem)
    config = DashboardConfig()
    server = TestServer(create_app(mem, config))
    await server.start_server(**runner_options(config))
    client: Client = await aiohttp_client(server)

    async def facts(**params: str) -> tuple[int, Any]:
        r = await client.get(
            "/api/memory/search",
            params={"q": "where does Alice live", "guildId": GUILD, "scope": "facts", **params},
        )
        return r.status, await r.json()

    status, body = await facts(asOf="2023-07-01T00:00:00Z")
    assert status == 200 and body["asOf"] == "2023-07-01T00:00:00.000Z"
    assert [h["fact"] for h in body["results"]] == ["Alice lives in Lisbon."]
    status, body = await facts()
    assert status == 200 and body["asOf"] is None
    assert [h["fact"] for h in body["results"]] == ["Alice lives in Porto."]
    for bad in ("yesterday", "2023-13-01", "2023-07-01T25:00", "1" * 41):
        status, body = await facts(asOf=bad)
        assert status == 400, bad
        assert body == {"ok": False, "error": body["error"], "status": 400}
        assert "asOf" in body["error"]
