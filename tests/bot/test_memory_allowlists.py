"""Consumer allowlists of memory types, enforced in the engine (``Memory.search``
and the prompt slice), configured per guild; and ``memory_query``'s
argument validation. The real engine; the dashboard's API through aiohttp."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from memory import InvalidInput, Memory, parse_guild_setting
from memory.memory_types import TypeNotAllowed, memory_type_of
from memory.models import Fact
from memory.reply.memory_query import QueryScope, parse_arguments, run_query
from memory.retrieval.filters import FactFilter
from tests.helpers import ALICE, CHANNEL, GUILD, msg

LORE = "the summer meetup is in Zermatt"


async def seeded(make_memory: Any) -> Memory:
    mem: Memory = await make_memory()
    assert await (
        await mem.ingest_message(msg("I love the summer meetup in the mountains."))
    ).wait()
    await mem.lore.remember(GUILD, LORE, source_text=LORE)
    assert await mem.settle()
    return mem


def types_of(hits: Any) -> set[str]:
    return {memory_type_of(h.fact_type) for h in hits}


async def test_search_keeps_to_the_consumers_allowlist(make_memory: Any) -> None:
    mem = await seeded(make_memory)
    assert types_of(await mem.search(GUILD, "summer meetup", consumer="api")) == {"facts", "lore"}
    await mem.guilds.set_setting(GUILD, "api_memory_types", "facts")
    hits = await mem.search(GUILD, "summer meetup Zermatt", consumer="api")
    assert hits and types_of(hits) == {"facts"}
    with pytest.raises(TypeNotAllowed, match="lore are not allowed for api"):
        await mem.search(GUILD, "summer meetup", consumer="api", types=["lore"])
    # Other consumers keep their own lists.
    lore = await mem.search(GUILD, "summer meetup Zermatt", consumer="tool", types=["lore"])
    assert lore and types_of(lore) == {"lore"}
    # Several consumers: only what all of them allow.
    with pytest.raises(TypeNotAllowed, match="tool within api"):
        await mem.search(GUILD, "summer", consumer=("tool", "api"), types=["lore"])


async def test_procedures_and_insights_only_for_consumers_that_list_them(
    make_memory: Any,
) -> None:
    mem = await seeded(make_memory)
    for t in ("insights", "procedures"):
        with pytest.raises(TypeNotAllowed, match="not allowed for api"):
            await mem.search(GUILD, "summer", consumer="api", types=[t])
    # Listed for replies by default, procedures are still never search results.
    with pytest.raises(TypeNotAllowed, match="not searchable"):
        await mem.search(GUILD, "summer", consumer="replies", types=["procedures"])
    with pytest.raises(InvalidInput, match="unknown memory type"):
        await mem.search(GUILD, "summer", consumer="api", types=["secrets"])


async def test_the_prompt_slice_keeps_to_the_replies_allowlist(make_memory: Any) -> None:
    mem = await seeded(make_memory)
    full = await mem.build_prompt_slice(GUILD, CHANNEL, ALICE, "summer meetup", consumer="replies")
    assert "lore" in types_of(full.relevant_facts)
    await mem.guilds.set_setting(GUILD, "reply_memory_types", "facts,episodes")
    narrowed = await mem.build_prompt_slice(
        GUILD, CHANNEL, ALICE, "summer meetup", consumer="replies"
    )
    assert narrowed.relevant_facts and types_of(narrowed.relevant_facts) == {"facts"}
    await mem.guilds.set_setting(GUILD, "reply_memory_types", "none")
    nothing = await mem.build_prompt_slice(
        GUILD, CHANNEL, ALICE, "summer meetup", consumer="replies"
    )
    assert nothing.user_facts == () and nothing.relevant_facts == ()


async def test_the_tool_answers_a_refused_type_with_an_error(make_memory: Any) -> None:
    mem = await seeded(make_memory)
    scope = QueryScope(GUILD, CHANNEL, frozenset({CHANNEL}))
    call = await run_query(
        mem, scope, {"query": "summer", "types": ["insights"]}, via="tool", render=str
    )
    assert call.hits == () and call.error is not None
    assert call.result.startswith("memory_query error: memory type(s) insights are not allowed")
    ok = await run_query(
        mem, scope, {"query": "summer meetup Zermatt", "about": ["lore"]}, via="tool", render=str
    )
    assert ok.error is None and ok.hits and types_of(ok.hits) == {"lore"}
    nobody = await run_query(
        mem, scope, {"query": "summer", "about": ["Zebedee"]}, via="tool", render=str
    )
    assert nobody.error == "no member of this server is called 'Zebedee'"


async def test_the_public_api_refuses_a_disallowed_type(
    make_memory: Any, aiohttp_client: Any
) -> None:
    mem = await seeded(make_memory)
    config = DashboardConfig()
    server = TestServer(create_app(mem, config))
    await server.start_server(**runner_options(config))
    client = await aiohttp_client(server)
    params = {"q": "summer meetup Zermatt", "guildId": GUILD}
    r = await client.get("/api/memory/search", params={**params, "types": "procedures"})
    body = await r.json()
    assert r.status == 400 and "not allowed for api" in body["error"]
    r = await client.get("/api/memory/search", params={**params, "types": "lore"})
    assert r.status == 200
    results = (await r.json())["results"]
    assert results and {h["fact_type"] for h in results} == {"lore"}


def test_allowlist_settings_are_validated() -> None:
    assert parse_guild_setting("tool_memory_types", "fact, lore") == "facts,lore"
    assert parse_guild_setting("api_memory_types", "none") == "none"
    assert parse_guild_setting("api_memory_types", "") is None
    with pytest.raises(InvalidInput, match="unknown memory type"):
        parse_guild_setting("reply_memory_types", "facts, gossip")


def test_memory_query_arguments_are_validated() -> None:
    q = parse_arguments(
        '{"query": " raid  night ", "about": "Alice", "types": ["episode"], "top_k": 3, '
        '"after": "2026-05-01", "budget_tokens": 200, "threshold": 0.5}'
    )
    assert (q.query, q.about, q.types, q.top_k, q.budget_tokens) == (
        "raid night",
        ("Alice",),
        ("episodes",),
        3,
        200,
    )
    assert q.after == datetime(2026, 5, 1, tzinfo=UTC)
    assert parse_arguments("plain words").query == "plain words"
    bad = {
        '{"query": "x", "top_k": 11}': "top_k must be from 1 to 10",
        '{"query": "x", "top_k": 2.5}': "top_k must be a whole number",
        '{"query": "x", "budget_tokens": 900}': "budget_tokens must be from 50 to 800",
        '{"query": "x", "threshold": 2}': "threshold must be a number from 0 to 1",
        '{"query": "x", "after": "last tuesday"}': "after must be an ISO date",
        '{"query": "x", "after": "2026-05-02", "before": "2026-05-01"}': "after must be earlier",
        '{"query": "x", "colour": "red"}': "unknown parameter",
        '{"query": ""}': "query is required",
        '{"query": "x", "types": ["gossip"]}': "unknown memory type",
        '{"query": "x", "about": [1]}': "about must be a list of strings",
        "{not json": "not valid JSON",
    }
    for raw, message in bad.items():
        with pytest.raises(InvalidInput, match=message):
            parse_arguments(raw)
    with pytest.raises(InvalidInput, match="too long"):
        parse_arguments({"query": "x" * 221})


def fact(fact_type: str, observed: str) -> Fact:
    return Fact(
        1, GUILD, None, ALICE, "x", fact_type, None, None, 0.6, True, observed, observed, observed
    )


def test_the_fact_filter_checks_type_and_observation_time() -> None:
    f = FactFilter(frozenset({"facts", "episodes"}), after="2026-05-01", before="2026-06-01")
    assert f.keep(fact("preference", "2026-05-10T00:00:00.000Z"))
    assert f.keep(fact("episode", "2026-05-10T00:00:00.000Z"))
    assert not f.keep(fact("lore", "2026-05-10T00:00:00.000Z"))
    assert not f.keep(fact("insight", "2026-05-10T00:00:00.000Z"))
    assert not f.keep(fact("other", "2026-04-30T00:00:00.000Z"))
    assert not f.keep(fact("other", "2026-06-02T00:00:00.000Z"))
