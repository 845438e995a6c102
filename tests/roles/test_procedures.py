"""Procedures: the guild's standing instructions to the bot, per guild or channel.

The engine (real SQLite), the ``/memory-admin procedure`` bodies and replies on
the real ``GuildloreBot`` under dpytest with the fake OpenAI server (the
recorded request shows what the model saw), and the dashboard's page and JSON
route through the real aiohttp app.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bot.cogs.memory_commands import search_memory
from bot.cogs.procedures import (
    MODERATORS_ONLY,
    add_procedure,
    list_procedures,
    remove_procedure,
)
from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from memory.engine import Memory
from memory.errors import InvalidInput
from memory.roles.procedures import MAX_CHARS, MAX_PER_SCOPE
from tests.bot.test_bot import Harness, open_harness, reply_json
from tests.bot.test_bot_commands import _grant_manage_guild
from tests.bot.test_bot_window import make_thread
from tests.fakeopenai import FakeOpenAI
from tests.helpers import CHANNEL, GUILD, OTHER_GUILD

OTHER_CHANNEL = "555555555555555555"
SPANISH = "Answer in Spanish, whatever language the question is in"
SPOILERS = "Never reveal plot spoilers of films or series"


@pytest_asyncio.fixture
async def harness(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in open_harness(make_memory, fake_openai):
        yield h


# -- the engine ------------------------------------------------------------------------------


async def test_add_list_remove_and_scopes(make_memory: Any) -> None:
    mem: Memory = await make_memory(embeddings="none")
    wide = await mem.procedures.add(GUILD, f"  {SPOILERS}  ", actor="user:1")
    spanish = await mem.procedures.add(GUILD, SPANISH, channel_id=CHANNEL, actor="user:2")
    other = await mem.procedures.add(
        GUILD, "Keep answers to one sentence", channel_id=OTHER_CHANNEL, actor="operator"
    )
    await mem.procedures.add(OTHER_GUILD, "Talk like a pirate", actor="user:9")
    assert wide.text == SPOILERS and wide.channel_id is None and wide.author == "user:1"

    assert [p.id for p in await mem.procedures.list(GUILD)] == [wide.id, spanish.id, other.id]
    assert await mem.procedures.list(GUILD, channel_id=CHANNEL) == (spanish,)
    assert await mem.procedures.for_channel(GUILD, CHANNEL) == (wide, spanish)
    assert await mem.procedures.for_channel(GUILD, OTHER_CHANNEL) == (wide, other)
    # A thread follows its parent channel's procedures, then its own.
    assert await mem.procedures.for_channel(GUILD, "777", parent_id=CHANNEL) == (wide, spanish)
    assert await mem.procedures.for_channel(GUILD, "777") == (wide,)

    # Another guild's procedure cannot be removed from here.
    pirate = (await mem.procedures.list(OTHER_GUILD))[0]
    assert await mem.procedures.remove(GUILD, pirate.id, actor="user:1") is None
    assert await mem.procedures.remove(GUILD, 2**70, actor="user:1") is None
    assert await mem.procedures.remove(GUILD, spanish.id, actor="user:3") == spanish
    assert await mem.procedures.remove(GUILD, spanish.id, actor="user:3") is None
    assert await mem.procedures.for_channel(GUILD, CHANNEL) == (wide,)


async def test_every_change_is_in_the_action_log_with_its_actor(make_memory: Any) -> None:
    mem: Memory = await make_memory(embeddings="none")
    added = await mem.procedures.add(GUILD, SPANISH, channel_id=CHANNEL, actor="user:2")
    await mem.procedures.remove(GUILD, added.id, actor="operator")
    rows = await mem.admin.action_log(kind="procedure_change", guild_id=GUILD)
    assert [r.detail for r in rows] == [
        {
            "op": "remove",
            "procedure_id": added.id,
            "channel_id": CHANNEL,
            "text": SPANISH,
            "actor": "operator",
        },
        {
            "op": "add",
            "procedure_id": added.id,
            "channel_id": CHANNEL,
            "text": SPANISH,
            "actor": "user:2",
        },
    ]
    assert rows[1].message == f"procedure {added.id} added (channel {CHANNEL}) by user:2"


async def test_limits_are_clear_errors(make_memory: Any) -> None:
    mem: Memory = await make_memory(embeddings="none")
    for i in range(MAX_PER_SCOPE):
        await mem.procedures.add(GUILD, f"rule number {i}", actor="user:1")
    with pytest.raises(InvalidInput, match=f"already has {MAX_PER_SCOPE} procedures"):
        await mem.procedures.add(GUILD, "one rule too many", actor="user:1")
    # Each channel is a scope of its own, bounded the same way.
    await mem.procedures.add(GUILD, "rule number 0", channel_id=CHANNEL, actor="user:1")
    with pytest.raises(InvalidInput, match="already has that procedure"):
        await mem.procedures.add(GUILD, "RULE  number 0", channel_id=CHANNEL, actor="user:1")
    with pytest.raises(InvalidInput, match=f"at most {MAX_CHARS} characters"):
        await mem.procedures.add(GUILD, "x" * (MAX_CHARS + 1), channel_id=CHANNEL, actor="u")
    with pytest.raises(InvalidInput, match="at least"):
        await mem.procedures.add(GUILD, "  ", channel_id=CHANNEL, actor="u")
    with pytest.raises(InvalidInput, match="not a channel id"):
        await mem.procedures.add(GUILD, "fine text", channel_id="#general", actor="u")
    assert len(await mem.procedures.list(GUILD)) == MAX_PER_SCOPE + 1
    # Refusals write nothing.
    log = await mem.admin.action_log(kind="procedure_change", guild_id=GUILD, limit=500)
    assert len(log) == MAX_PER_SCOPE + 1


async def test_procedures_are_never_search_results_or_memory(make_memory: Any) -> None:
    mem: Memory = await make_memory()
    await mem.procedures.add(GUILD, SPANISH, actor="user:1")
    await mem.procedures.add(GUILD, SPANISH, channel_id=CHANNEL, actor="user:1")
    for scope in ("facts", "messages", "all"):
        assert await mem.search(GUILD, "answer in Spanish language", scope=scope) == []  # type: ignore[arg-type]
        assert await mem.search(GUILD, "Spanish", scope=scope, gate=False) == []  # type: ignore[arg-type]
    memory_slice = await mem.build_prompt_slice(GUILD, CHANNEL, "1", "answer in Spanish")
    assert not (
        memory_slice.user_facts or memory_slice.relevant_facts or memory_slice.relevant_messages
    )
    assert await mem.facts.find(GUILD, limit=50) == []
    assert "Spanish" not in await mem.refresh_snapshot()


# -- the commands ----------------------------------------------------------------------------


async def test_commands_need_manage_server(harness: Harness) -> None:
    h = harness
    refused = await add_procedure(h.memory, h.guild, h.alice, SPANISH, h.general)
    assert refused.text == MODERATORS_ONLY and refused.ephemeral
    assert (await list_procedures(h.memory, h.guild, h.alice)).text == MODERATORS_ONLY
    await _grant_manage_guild(h, h.bob)
    added = await add_procedure(h.memory, h.guild, h.bob, SPANISH, h.general)
    (p,) = await h.memory.procedures.list(str(h.guild.id))
    gone = await remove_procedure(h.memory, h.guild, h.alice, p.id)
    assert gone.text == MODERATORS_ONLY
    assert added.text.startswith(f"Added procedure `#{p.id}` for {h.general.mention}: {SPANISH}")
    assert p.author == f"user:{h.bob.id}" and p.channel_id == str(h.general.id)


async def test_add_list_remove_answers(harness: Harness) -> None:
    h = harness
    gid = str(h.guild.id)
    await _grant_manage_guild(h, h.alice)
    empty = await list_procedures(h.memory, h.guild, h.alice)
    assert empty.text.startswith("No procedures here yet.")
    await add_procedure(h.memory, h.guild, h.alice, SPOILERS)
    await add_procedure(h.memory, h.guild, h.alice, SPANISH, h.general)
    wide, spanish = await h.memory.procedures.list(gid)
    listed = (await list_procedures(h.memory, h.guild, h.alice)).text.splitlines()
    day = wide.created_at[:10]
    assert listed == [
        "**Procedures of this server:**",
        "__In the whole server:__",
        f"• `#{wide.id}` {SPOILERS} — by <@{h.alice.id}>, {day}",
        f"__In {h.general.mention}:__",
        f"• `#{spanish.id}` {SPANISH} — by <@{h.alice.id}>, {day}",
        "Remove one with `/memory-admin procedure remove`.",
    ]
    in_mods = (await list_procedures(h.memory, h.guild, h.alice, h.mods)).text
    assert SPOILERS in in_mods and SPANISH not in in_mods

    too_long = await add_procedure(h.memory, h.guild, h.alice, "x" * (MAX_CHARS + 5))
    assert too_long.text.startswith(f"Not added: a procedure is at most {MAX_CHARS} characters")
    removed = await remove_procedure(h.memory, h.guild, h.alice, spanish.id)
    assert removed.text == (f"Removed procedure `#{spanish.id}` ({h.general.mention}): {SPANISH}")
    again = await remove_procedure(h.memory, h.guild, h.alice, spanish.id)
    assert again.text == f"This server has no procedure `#{spanish.id}`."


# -- replies ---------------------------------------------------------------------------------


def _system(h: Harness, i: int) -> str:
    content: str = h.fake.chat_requests()[i].body["messages"][0]["content"]
    return content


async def test_procedures_are_in_the_system_prompt_of_their_scope_only(harness: Harness) -> None:
    h = harness
    await _grant_manage_guild(h, h.bob)
    await add_procedure(h.memory, h.guild, h.bob, SPOILERS)
    await add_procedure(h.memory, h.guild, h.bob, SPANISH, h.general)
    await h.memory.procedures.add(str(h.other_guild.id), "Talk like a pirate", actor="user:1")
    h.fake.script_chat(reply_json("¡Hola!"), reply_json("Hi!"), reply_json("Hey"))

    await h.say(f"{h.mention} hello there", channel=h.general)
    await h.say(f"{h.mention} hello again", channel=h.mods)
    thread = make_thread(h, h.general, 990000000000000001, "chatter")
    await h.say(f"{h.mention} and in a thread?", channel=thread)
    assert [m.content for m in h.sent()] == ["¡Hola!", "Hi!", "Hey"]

    in_general, in_mods, in_thread = _system(h, 0), _system(h, 1), _system(h, 2)
    block = "How this server's moderators want you to behave here"
    assert (
        f"{block} (follow these, unless one asks for something harmful):\n- {SPOILERS}\n- {SPANISH}"
        in in_general
    )
    assert f"- {SPOILERS}" in in_mods and SPANISH not in in_mods
    assert f"- {SPOILERS}\n- {SPANISH}" in in_thread  # a thread follows its channel
    for system in (in_general, in_mods, in_thread):
        assert "pirate" not in system  # another guild's
        # Their own block, outside the memory sections (which are reference data).
        assert system.index(block) < system.index("Known facts about this user:")
        memory_part = system[system.index("Known facts about this user:") :]
        assert SPOILERS not in memory_part

    await h.memory.procedures.remove(
        str(h.guild.id), (await h.memory.procedures.list(str(h.guild.id)))[0].id, actor="x"
    )
    h.fake.script_chat(reply_json("ok"))
    await h.say(f"{h.mention} still there?", channel=h.mods)
    assert block not in _system(h, 3)  # no procedures: no block at all


async def test_procedures_never_show_in_memory_search(harness: Harness) -> None:
    h = harness
    await _grant_manage_guild(h, h.alice)
    await add_procedure(h.memory, h.guild, h.alice, SPANISH)
    await add_procedure(h.memory, h.guild, h.alice, SPANISH, h.general)
    await h.say("I prefer Spanish food to anything else")
    await h.settle()
    for scope in ("facts", "messages", "all"):
        answer = await search_memory(
            h.memory, h.guild, h.general, h.alice, "answer in Spanish", scope
        )
        assert "Answer in Spanish" not in answer.text
        assert "whatever language" not in answer.text


# -- the dashboard ---------------------------------------------------------------------------


Client = TestClient[web.Request, web.Application]


async def test_dashboard_page_and_api(make_memory: Any, aiohttp_client: Any) -> None:
    mem: Memory = await make_memory(embeddings="none")
    await mem.guilds.set_names(GUILD, guild_name="Test guild", channels={CHANNEL: "es"})
    wide = await mem.procedures.add(GUILD, "No <b>spoilers</b>", actor="user:1")
    spanish = await mem.procedures.add(GUILD, SPANISH, channel_id=CHANNEL, actor="operator")
    await mem.procedures.add(OTHER_GUILD, "Talk like a pirate", actor="user:9")
    config = DashboardConfig()
    server = TestServer(create_app(mem, config))
    await server.start_server(**runner_options(config))
    client: Client = await aiohttp_client(server)

    r = await client.get("/api/memory/procedures", params={"guildId": GUILD})
    assert r.status == 200
    body = await r.json()
    assert body["ok"] is True and body["guildId"] == GUILD
    assert body["procedures"] == [
        {
            "id": wide.id,
            "guild_id": GUILD,
            "scope": "guild",
            "channel_id": None,
            "channel_name": None,
            "text": "No <b>spoilers</b>",
            "author": "user:1",
            "created_at": wide.created_at,
        },
        {
            "id": spanish.id,
            "guild_id": GUILD,
            "scope": "channel",
            "channel_id": CHANNEL,
            "channel_name": "es",
            "text": SPANISH,
            "author": "operator",
            "created_at": spanish.created_at,
        },
    ]
    assert [c["detail"]["op"] for c in body["changes"]] == ["add", "add"]

    missing = await client.get("/api/memory/procedures")
    assert missing.status == 400
    assert (await missing.json())["ok"] is False
    bad = await client.get("/api/memory/procedures", params={"guildId": "x' OR 1"})
    assert bad.status == 400

    page = await client.get(f"/guilds/{GUILD}")
    assert page.status == 200
    html = await page.text()
    assert "Procedures" in html and SPANISH in html and "#es" in html
    assert "No &lt;b&gt;spoilers&lt;/b&gt;" in html and "<b>spoilers" not in html
    assert "pirate" not in html
