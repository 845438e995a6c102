"""Search answers "when did we talk about X?" from past messages by default:
the dashboard's API and the model's ``memory_query`` look in facts and
messages together unless the caller narrows to fields only facts have
(memory types, members, observation times)."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from memory import DEFAULT_SEARCH_SCOPE
from memory.reply.conversation import render_lookup
from memory.reply.memory_query import QueryScope, run_query
from tests.helpers import ALICE, BOB, CHANNEL, GUILD, ScriptedExtractor, msg

QUESTION = "when did we talk about Plato's grave?"
NEWS = "Did you see the news? Plato's grave was found in the garden of the Academy."


async def _chat(make_memory: Any) -> tuple[Any, str]:
    mem = await make_memory(extractor=ScriptedExtractor(fn=lambda text, author: []))
    lines = [
        (
            ALICE,
            "Alice",
            "The scans of the new fragments arrive next week.",
            "2024-04-20T10:00:00Z",
        ),
        (BOB, "Bob", NEWS, "2024-04-23T14:20:05Z"),
        (ALICE, "Alice", "Wow, that is a find. Where was it presented?", "2024-04-23T14:25:00Z"),
        (BOB, "Bob", "I'm making tea and reading ink labels tonight.", "2024-05-02T20:00:00Z"),
    ]
    news = ""
    for author, name, text, when in lines:
        m = msg(text, author=author, name=name, created_at=when)
        assert await (await mem.ingest_message(m)).wait()
        news = m.id if text == NEWS else news
    await mem.lore.remember(GUILD, "the guild meets on Fridays", source_text="meets on Fridays")
    assert await mem.settle()
    return mem, news


async def test_the_api_and_the_tool_answer_when_from_messages(
    make_memory: Any, aiohttp_client: Any
) -> None:
    assert DEFAULT_SEARCH_SCOPE == "all"
    mem, news = await _chat(make_memory)
    config = DashboardConfig()
    server = TestServer(create_app(mem, config))
    await server.start_server(**runner_options(config))
    client = await aiohttp_client(server)
    r = await client.get("/api/memory/search", params={"q": QUESTION, "guildId": GUILD})
    body = await r.json()
    assert body["scope"] == "all"
    top = body["results"][0]
    assert top["kind"] == "message" and top["id"] == news
    assert top["created_at"].startswith("2024-04-23")
    # Naming memory types asks for facts: messages have no type.
    r = await client.get(
        "/api/memory/search", params={"q": QUESTION, "guildId": GUILD, "types": "lore"}
    )
    body = await r.json()
    assert body["scope"] == "facts" and all(h["kind"] == "fact" for h in body["results"])

    scope = QueryScope(GUILD, CHANNEL, frozenset({CHANNEL}))
    call = await run_query(mem, scope, {"query": QUESTION}, via="tool", render=render_lookup)
    assert call.error is None and call.hits and call.hits[0].id == news
    assert "[M1] (2024-04-23) Bob:" in call.result and "Plato's grave" in call.result
    narrowed = await run_query(
        mem, scope, {"query": QUESTION, "about": ["Bob"]}, via="tool", render=render_lookup
    )
    assert all(h.kind == "fact" for h in narrowed.hits)
