"""``/memory pin|unpin`` and ``/memory-admin purge-facts`` on the real
commands.Bot (dpytest): a member pins only their own facts, from an
autocomplete of their own; the purge needs Manage Server and a confirmation,
and deletes exactly the chosen facts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import discord
import pytest_asyncio
from discord import app_commands

from bot.cogs.answers import ConfirmView
from bot.cogs.member_commands import fact_choices
from bot.cogs.upkeep_commands import pin_answer, purge_prompt
from tests.bot.test_bot import Harness, open_harness
from tests.fakeopenai import FakeOpenAI


@pytest_asyncio.fixture
async def harness(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in open_harness(make_memory, fake_openai):
        yield h


def grant_manage_guild(h: Harness, member: discord.Member) -> None:
    from discord.ext.test import backend as dback

    role: Any = dback.make_role(
        "Moderators", h.guild, permissions=discord.Permissions(manage_guild=True).value
    )
    dback.update_member(member, roles=[role])
    assert member.guild_permissions.manage_guild


async def _facts(h: Harness, member: discord.Member) -> list[Any]:
    return await h.memory.facts.find(str(h.guild.id), subject=str(member.id), active=None)


async def test_the_commands_join_their_groups() -> None:
    from bot.client import DEFAULT_EXTENSIONS, GuildloreBot
    from bot.settings import ReplyConfig

    bot = GuildloreBot(memory=None, reply_config=ReplyConfig())  # type: ignore[arg-type]
    for ext in DEFAULT_EXTENSIONS:
        if ext.endswith(("memory_commands", "member_commands", "upkeep_commands")):
            await bot.load_extension(ext)
    tree = {c.name: c for c in bot.tree.get_commands()}
    assert set(tree) == {"memory", "memory-admin"}
    memory, admin = tree["memory"], tree["memory-admin"]
    assert isinstance(memory, app_commands.Group) and isinstance(admin, app_commands.Group)
    for name in ("pin", "unpin"):
        command = memory.get_command(name)
        assert isinstance(command, app_commands.Command)
        assert next(p for p in command.parameters if p.name == "fact").autocomplete
    assert admin.get_command("purge-facts") is not None
    await bot.unload_extension("bot.cogs.upkeep_commands")
    assert memory.get_command("pin") is None and admin.get_command("purge-facts") is None
    await bot.close()


async def test_a_member_pins_only_their_own_facts(harness: Harness) -> None:
    h = harness
    await h.say("I love hiking in the Alps.")
    await h.say("I love sailing on lakes.", member=h.bob)
    await h.settle()
    (hiking,) = await _facts(h, h.alice)
    (sailing,) = await _facts(h, h.bob)
    choices = await fact_choices(h.memory, h.guild, h.alice, "")
    assert [c.value for c in choices] == [str(hiking.id)]

    refused = await pin_answer(h.memory, h.guild, h.alice, str(sailing.id), True)
    assert "Nothing changed" in refused.text and refused.ephemeral
    assert await h.memory.upkeep.pinned_ids(str(h.guild.id)) == set()

    done = await pin_answer(h.memory, h.guild, h.alice, str(hiking.id), True)
    assert done.text.startswith("Pinned")
    assert await h.memory.upkeep.pinned_ids(str(h.guild.id)) == {hiking.id}
    history = await h.memory.facts.history(str(h.guild.id), hiking.id)
    assert (history[-1].event, history[-1].actor) == ("pin", f"user:{h.alice.id}")
    again = await pin_answer(h.memory, h.guild, h.alice, str(hiking.id), True)
    assert "already be pinned" in again.text
    undone = await pin_answer(h.memory, h.guild, h.alice, str(hiking.id), False)
    assert undone.text.startswith("Unpinned")
    assert await h.memory.upkeep.pinned_ids(str(h.guild.id)) == set()
    bad = await pin_answer(h.memory, h.guild, h.alice, "hiking", True)
    assert bad.text == "Pick one of your facts from the list."


async def test_purge_facts_needs_manage_server_and_a_confirmation(harness: Harness) -> None:
    h = harness
    await h.say("I love hiking in the Alps.")
    await h.say("I love baking sourdough bread.")
    await h.say("I love sailing on lakes.", member=h.bob)
    await h.settle()
    refused = purge_prompt(h.memory, h.guild, h.bob, h.alice)
    assert refused.view is None and "Manage Server" in refused.text
    grant_manage_guild(h, h.bob)

    member = purge_prompt(h.memory, h.guild, h.bob, h.alice)
    assert isinstance(member.view, ConfirmView) and member.view.owner_id == h.bob.id
    assert len(await _facts(h, h.alice)) == 2  # nothing before the button
    assert await member.view.action() == f"Deleted 2 facts about **{h.alice.name}** for good."
    assert await _facts(h, h.alice) == [] and len(await _facts(h, h.bob)) == 1

    everything = purge_prompt(h.memory, h.guild, h.bob, None)
    assert isinstance(everything.view, ConfirmView)
    assert await everything.view.action() == "Deleted 1 facts about this server for good."
    assert await h.memory.facts.find(str(h.guild.id), active=None) == []
    assert await h.memory.get_message(str(h.guild.id), str(h.general.last_message_id)) is not None
