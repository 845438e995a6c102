"""``/memory about-me``, ``export-me``, ``correct`` and ``forget-fact``: the
command bodies with dpytest's real guild objects and the real engine (dpytest
does not dispatch application commands), and the registered tree."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import discord
import pytest_asyncio
from discord import app_commands

from bot.cogs.member_commands import (
    about_me_answer,
    correct_answer,
    export_me_answer,
    fact_choices,
    forget_fact_answer,
)
from tests.bot.test_bot import Harness, make_private, open_harness
from tests.fakeopenai import FakeOpenAI
from tests.helpers import inspect_db


@pytest_asyncio.fixture
async def harness(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in open_harness(make_memory, fake_openai):
        yield h


async def test_the_commands_join_the_memory_group() -> None:
    from bot.client import DEFAULT_EXTENSIONS, GuildloreBot
    from bot.settings import ReplyConfig

    bot = GuildloreBot(memory=None, reply_config=ReplyConfig())  # type: ignore[arg-type]
    for ext in DEFAULT_EXTENSIONS:
        if ext.endswith(("memory_commands", "member_commands")):
            await bot.load_extension(ext)
    tree = {c.name: c for c in bot.tree.get_commands()}
    assert set(tree) == {"memory", "memory-admin"}
    group = tree["memory"]
    assert isinstance(group, app_commands.Group)
    names = {c.name for c in group.commands}
    assert {"about-me", "export-me", "correct", "forget-fact", "about", "forget-me"} <= names
    for name in ("correct", "forget-fact"):
        command = group.get_command(name)
        assert isinstance(command, app_commands.Command)
        fact = next(p for p in command.parameters if p.name == "fact")
        assert fact.autocomplete
    await bot.unload_extension("bot.cogs.member_commands")
    assert "about-me" not in {c.name for c in group.commands}
    await bot.close()


async def _talk(h: Harness) -> None:
    await h.say("I work as a nurse in Berlin.", channel=h.mods)
    await h.say("I love hiking in the Alps.")
    await h.say("I love baking sourdough bread.")
    await h.say("I love sailing on lakes.", member=h.bob)
    await h.settle()
    # Alice can no longer read the channel she spoke in.
    make_private(h, h.mods, h.bob)


def _texts(h: Harness, author: discord.Member) -> list[str]:
    con = inspect_db(h.memory)
    try:
        rows = con.execute(
            "SELECT content FROM messages WHERE guild_id = ? AND author_id = ?",
            (str(h.guild.id), str(author.id)),
        ).fetchall()
    finally:
        con.close()
    return [r[0] for r in rows]


async def _fact(h: Harness, member: discord.Member, word: str) -> Any:
    facts = await h.memory.facts.find(str(h.guild.id), subject=str(member.id))
    return next(f for f in facts if word in f.fact)


async def test_about_me_shows_own_facts_and_counts_the_hidden(harness: Harness) -> None:
    h = harness
    await _talk(h)

    answer = await about_me_answer(h.memory, h.guild, h.alice)

    assert answer.ephemeral
    assert "hiking in the Alps" in answer.text and "sourdough" in answer.text
    assert "nurse" not in answer.text
    assert "1 more facts from channels you can't read" in answer.text
    assert "sailing" not in answer.text
    assert "your stored messages: 3" in answer.text
    # The quote of her own message, linked to it (a channel she can read).
    assert '): "I love hiking in the Alps."' in answer.text
    assert f"from [your message](<https://discord.com/channels/{h.guild.id}/" in answer.text


async def test_export_is_about_me_plus_own_messages_and_nothing_else(harness: Harness) -> None:
    h = harness
    await _talk(h)
    gid = str(h.guild.id)

    answer = await export_me_answer(h.memory, h.guild, h.alice)

    assert answer.ephemeral
    by_name = {f.filename: f.fp.read().decode("utf-8") for f in answer.files}
    stem = f"guildlore-{h.guild.id}-{h.alice.id}"
    assert set(by_name) == {f"{stem}.json", f"{stem}.md"}
    doc = json.loads(by_name[f"{stem}.json"])
    record = await h.memory.members.about(gid, str(h.alice.id), {str(h.general.id)})
    assert doc["schema"] == "guildlore.member-export/1"
    assert (doc["guild_id"], doc["user_id"]) == (gid, str(h.alice.id))
    # What about-me shows ...
    assert [(f["id"], f["fact"]) for f in doc["facts"]] == [(f.id, f.fact) for f in record.facts]
    assert doc["hidden_facts"] == record.hidden_facts == 1
    assert doc["message_counts"] == record.message_counts
    about = (await about_me_answer(h.memory, h.guild, h.alice)).text
    assert all(f["fact"] in about for f in doc["facts"])
    # ... plus exactly her own messages ...
    assert sorted(m["content"] for m in doc["messages"]) == sorted(_texts(h, h.alice))
    # ... and nothing of anyone else.
    for other in _texts(h, h.bob):
        for text in by_name.values():
            assert other not in text and "sailing" not in text
    assert str(h.bob.id) not in by_name[f"{stem}.json"]
    markdown = by_name[f"{stem}.md"]
    assert "hiking in the Alps" in markdown and "1 more from channels you cannot read" in markdown


async def test_correct_changes_only_own_facts(harness: Harness) -> None:
    h = harness
    await _talk(h)
    gid = str(h.guild.id)
    mine = await _fact(h, h.alice, "hiking")
    bobs = await _fact(h, h.bob, "sailing")

    refused = await correct_answer(h.memory, h.guild, h.alice, str(bobs.id), "Bob hates boats.")
    assert refused.text == "You can only correct facts about yourself."
    assert (await h.memory.facts.get(gid, bobs.id)).fact == bobs.fact  # type: ignore[union-attr]
    hidden = await _fact(h, h.alice, "nurse")
    refused = await correct_answer(h.memory, h.guild, h.alice, str(hidden.id), "I am a teacher.")
    # Hers, but from a channel she can no longer read: said so, not "not yours".
    assert "comes from a channel you can't read" in refused.text
    assert (await correct_answer(h.memory, h.guild, h.alice, "hiking", "x y z w")).text.startswith(
        "Pick one"
    )

    done = await correct_answer(
        h.memory, h.guild, h.alice, str(mine.id), "Alice loves hiking in the Dolomites."
    )

    assert done.ephemeral and "Dolomites" in done.text
    # The correction supersedes the fact (issue 31): a new fact, the old one closed.
    old = await h.memory.facts.get(gid, mine.id)
    assert old is not None and old.fact == mine.fact and old.valid_to is not None
    changed = await _fact(h, h.alice, "Dolomites")
    assert changed.fact == "Alice loves hiking in the Dolomites." and changed.valid_to is None
    assert changed.evidence_text == "Alice loves hiking in the Dolomites."
    last = (await h.memory.facts.history(gid, mine.id))[-1]
    assert (last.event, last.actor, last.new_text) == (
        "supersede",
        f"user:{h.alice.id}",
        changed.fact,
    )
    bad = await correct_answer(h.memory, h.guild, h.alice, str(mine.id), "ok")
    assert bad.text.startswith("Not changed:")


async def test_forget_fact_deletes_only_own_facts(harness: Harness) -> None:
    h = harness
    await _talk(h)
    gid = str(h.guild.id)
    mine = await _fact(h, h.alice, "sourdough")
    bobs = await _fact(h, h.bob, "sailing")

    refused = await forget_fact_answer(h.memory, h.guild, h.alice, str(bobs.id))
    assert refused.text == "You can only make me forget facts about yourself."
    assert await h.memory.facts.get(gid, bobs.id) is not None
    unknown = await forget_fact_answer(h.memory, h.guild, h.alice, "987654321")
    assert unknown.text.startswith("I have no fact #987654321.")

    await h.settle()
    done = await forget_fact_answer(h.memory, h.guild, h.alice, str(mine.id))

    assert done.ephemeral and done.text.startswith(f"Forgotten: {mine.fact}\nDeletion receipt `R-")
    assert await h.memory.facts.get(gid, mine.id) is None
    history = await h.memory.facts.history(gid, mine.id)
    assert (history[-1].event, history[-1].actor) == ("delete", f"user:{h.alice.id}")
    assert all(e.old_text is None and e.new_text is None for e in history)
    # Its bytes go with the rewrite of the file that the delete asked for.
    assert h.memory.compactor.pending
    await h.settle()
    assert not h.memory.compactor.pending


async def test_autocomplete_lists_only_own_visible_facts(harness: Harness) -> None:
    h = harness
    await _talk(h)
    mine = {f.id for f in await h.memory.facts.find(str(h.guild.id), subject=str(h.alice.id))}
    hidden = await _fact(h, h.alice, "nurse")

    choices = await fact_choices(h.memory, h.guild, h.alice, "")
    assert {int(c.value) for c in choices} == mine - {hidden.id}
    assert all(len(c.name) <= 100 for c in choices)
    [only] = await fact_choices(h.memory, h.guild, h.alice, "SOURDOUGH")
    assert "sourdough" in only.name
    assert await fact_choices(h.memory, h.guild, h.alice, "sailing") == []
    bob = await fact_choices(h.memory, h.guild, h.bob, "")
    assert {c.name for c in bob} == {(await _fact(h, h.bob, "sailing")).fact}
