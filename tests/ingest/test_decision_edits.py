"""Lore lines (``memoryLine``) and operator edits go through the write
decision like extracted candidates: a paraphrase of known lore is a noop
with a source, a contradiction supersedes, an operator's correction closes
the fact of the same slot it contradicts — with history rows naming reason
and actor."""

from __future__ import annotations

import json
from typing import Any

from aiohttp.test_utils import TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from memory.engine import Memory
from memory.ingest.llm_decision import LLMDecider
from memory.models import LORE_SUBJECT
from memory.store.fact_time import fact_sources
from tests.dashboard.http import csrf_header
from tests.fakeopenai import FakeOpenAI
from tests.helpers import GUILD, msg
from tests.ingest.test_decision import ingest


async def sources(mem: Memory, fact_id: int) -> list[str]:
    return [s.message_id for s in await mem.db.read(fact_sources, GUILD, fact_id)]


async def test_a_lore_line_paraphrasing_known_lore_is_a_noop_with_a_source(
    make_memory: Any,
) -> None:
    mem = await make_memory(embeddings="none")
    line = "the summer meetup is in Zermatt"
    first = await mem.lore.remember(GUILD, line, source_text=line, source_message_id="m1")
    short = "the meetup is in Zermatt"
    again = await mem.lore.remember(
        GUILD, short, source_text=short, source_message_id="m2", actor="user:42"
    )
    assert first is not None and again is not None
    assert (first.event, again.event) == ("add", "noop")
    assert again.fact.id == first.fact.id and again.fact.fact.endswith(
        "the summer meetup is in Zermatt."
    )
    assert await sources(mem, first.fact.id) == ["m1", "m2"]
    noop = [h for h in await mem.facts.history(GUILD, first.fact.id) if h.event == "noop"]
    assert [(h.actor, h.new_text) for h in noop] == [
        ("user:42", "Memory line: the meetup is in Zermatt.")
    ]
    assert noop[0].reason and "paraphrase" in noop[0].reason
    assert len(await mem.facts.find(GUILD, subject=LORE_SUBJECT)) == 1


async def test_a_lore_line_that_contradicts_lore_supersedes_it(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    old = "the guild's favourite game is Valheim"
    new = "the guild's favourite game is Elden Ring"
    first = await mem.lore.remember(GUILD, old, source_text=old)
    second = await mem.lore.remember(GUILD, new, source_text=new, actor="user:7")
    assert first is not None and second is not None and second.event == "supersede"
    closed = await mem.facts.get(GUILD, first.fact.id)
    assert closed is not None and closed.valid_to is not None and closed.is_active
    (row,) = [h for h in await mem.facts.history(GUILD, first.fact.id) if h.event == "supersede"]
    assert (row.actor, row.linked_fact_id) == ("user:7", second.fact.id)
    assert mem.admin.counters()["decision_supersedes"] == 1
    snapshot = await mem.refresh_snapshot()
    assert "Elden Ring" in snapshot and "Valheim" not in snapshot


async def test_a_lore_line_goes_to_the_llm_decision_when_one_is_configured(
    make_memory: Any, fake_openai: FakeOpenAI, fake_llm_client: Any
) -> None:
    answer = {"candidate": 1, "decision": "noop", "target": 1, "text": None, "reason": "same"}
    fake_openai.script_decisions(json.dumps({"decisions": [answer]}))
    mem = await make_memory(embeddings="none", decider=LLMDecider(fake_llm_client, "m"))
    first = await mem.lore.remember(GUILD, "raids start at nine", source_text="raids start at nine")
    line = "our raids begin at 9 pm"
    again = await mem.lore.remember(GUILD, line, source_text=line, source_message_id="m9")
    assert first is not None and again is not None and again.event == "noop"
    assert again.fact.id == first.fact.id
    (request,) = fake_openai.chat_requests()
    assert "the server (lore)" in request.body["messages"][1]["content"]
    assert "m9" in await sources(mem, first.fact.id)
    reasons = [h.reason for h in await mem.facts.history(GUILD, first.fact.id)]
    assert "llm: same" in reasons


async def _paris_and_sister(mem: Memory) -> tuple[int, int]:
    await ingest(
        mem,
        msg("I live in Paris", created_at="2024-01-01T10:00:00.000Z"),
        msg("I play chess", created_at="2024-01-02T10:00:00.000Z"),
    )
    facts = {f.fact: f.id for f in await mem.facts.find(GUILD)}
    return facts["Alice lives in Paris."], facts["Alice plays chess."]


async def test_an_operator_edit_that_contradicts_a_current_fact_supersedes_it(
    make_memory: Any,
) -> None:
    mem = await make_memory(embeddings="none")
    paris, chess = await _paris_and_sister(mem)
    # The operator corrects a fact into where she lives now.
    edited = await mem.facts.edit(GUILD, chess, text="Alice lives in Rome.", actor="operator:ana")
    assert edited is not None and edited.valid_to is None
    closed = await mem.facts.get(GUILD, paris)
    assert closed is not None and closed.valid_to is not None
    (row,) = [h for h in await mem.facts.history(GUILD, paris) if h.event == "supersede"]
    assert row.actor == "operator:ana" and row.linked_fact_id == chess
    assert (row.reason or "").startswith("operator edit, new residence")
    # An edit that contradicts nothing closes nothing.
    await mem.facts.edit(GUILD, chess, text="Alice lives in Rome with two cats.")
    current = {f.fact for f in await mem.facts.find(GUILD) if f.valid_to is None}
    assert current == {"Alice lives in Rome with two cats."}


async def test_the_dashboard_edit_api_goes_through_the_same_decision(
    make_memory: Any, aiohttp_client: Any
) -> None:
    mem = await make_memory(embeddings="none")
    paris, chess = await _paris_and_sister(mem)
    config = DashboardConfig()
    server = TestServer(create_app(mem, config))
    await server.start_server(**runner_options(config))
    client = await aiohttp_client(server)
    r = await client.patch(
        f"/api/memory/facts/{chess}",
        params={"guildId": GUILD},
        json={"text": "Alice lives in Lyon."},
        headers=await csrf_header(client),
    )
    assert r.status == 200, await r.text()
    history = await (
        await client.get(f"/api/memory/facts/{paris}/history", params={"guildId": GUILD})
    ).json()
    (row,) = [e for e in history["history"] if e["event"] == "supersede"]
    assert row["actor"] == "operator" and row["linked_fact_id"] == chess
    assert row["reason"].startswith("operator edit")
