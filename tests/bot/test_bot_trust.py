"""Trust inside Discord (issue 31) through the real discord.py bot under
dpytest, with the real engine and the fake OpenAI server: the message
commands are registered, the why card shows only what the viewer may see
(with jump links), its buttons correct and forget, a reply's citations link
their sources, members opt out and back in, forget-me can keep them
forgotten, and ``/memory privacy`` follows the settings.

dpytest does not dispatch application commands or component interactions,
so the command bodies and the view's methods are called directly with the
real guild objects, as the other ``test_bot_*`` files do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import discord
import pytest_asyncio
from discord import app_commands
from discord.ext.test import backend as dback

from bot.cogs.member_commands import forget_fact_answer
from bot.cogs.provenance import (
    TAKEN_MENU,
    WHY_MENU,
    CorrectionModal,
    WhyView,
    taken_card,
    why_reply_card,
)
from bot.cogs.trust_commands import (
    ForgetMeView,
    forget_me_prompt,
    opt_in_answer,
    opt_out_answer,
    privacy_embeds,
)
from memory import Deployment
from tests.bot.test_bot import Harness, open_harness, overwrite, reply_json, set_overwrites
from tests.fakeopenai import FakeOpenAI, ToolCalls


@pytest_asyncio.fixture
async def harness(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in open_harness(make_memory, fake_openai):
        yield h


def link_prefix(h: Harness, channel: Any) -> str:
    return f"https://discord.com/channels/{h.guild.id}/{channel.id}/"


def private(h: Harness, channel: Any, *readers: discord.Member) -> None:
    assert h.guild.me is not None
    set_overwrites(
        channel,
        overwrite(h.guild.default_role, read_messages=False),
        overwrite(h.guild.me, read_messages=True, send_messages=True),
        *(overwrite(m, read_messages=True, send_messages=True) for m in readers),
    )


async def moderator(h: Harness, member: discord.Member) -> None:
    role: Any = dback.make_role(
        "Moderators", h.guild, permissions=discord.Permissions(manage_guild=True).value
    )
    dback.update_member(member, roles=[role])
    assert member.guild_permissions.manage_guild


async def test_the_message_commands_and_member_commands_are_registered() -> None:
    from bot.client import DEFAULT_EXTENSIONS, GuildloreBot
    from bot.settings import ReplyConfig

    bot = GuildloreBot(memory=None, reply_config=ReplyConfig())  # type: ignore[arg-type]
    for ext in DEFAULT_EXTENSIONS:
        await bot.load_extension(ext)
    menus = bot.tree.get_commands(type=discord.AppCommandType.message)
    assert sorted(m.name for m in menus) == sorted([WHY_MENU, TAKEN_MENU])
    for menu in menus:
        assert isinstance(menu, app_commands.ContextMenu) and menu.guild_only
        assert menu.to_dict(bot.tree)["type"] == discord.AppCommandType.message.value
    group = bot.tree.get_command("memory")
    assert isinstance(group, app_commands.Group)
    assert {"opt-out", "opt-in", "privacy", "forget-me", "why"} <= {c.name for c in group.commands}
    await bot.unload_extension("bot.cogs.provenance")
    assert bot.tree.get_commands(type=discord.AppCommandType.message) == []
    await bot.close()


async def _shared_memory(h: Harness) -> tuple[Any, Any]:
    """#mods only Alice reads; #team Alice and Bob read. Alice's facts come from
    #mods (a nurse) and #general (hiking); she asks the bot in #team, whose
    reply may use both (it answers her)."""
    team = dback.make_text_channel("team", h.guild)
    private(h, h.mods, h.alice)
    private(h, team, h.alice, h.bob)
    await h.say("I work as a nurse in Berlin.", channel=h.mods)
    await h.say("I love hiking in the Alps.", channel=h.general)
    await h.settle()
    h.sent()
    h.fake.script_chat(reply_json("You are a nurse who loves hiking."))
    await h.say(f"{h.mention} do I work as a nurse, and where do I love hiking?", channel=team)
    (reply,) = h.sent()
    return team, reply


async def test_the_why_card_shows_only_what_the_viewer_can_read(harness: Harness) -> None:
    h = harness
    team, reply = await _shared_memory(h)

    mine = await why_reply_card(h.memory, h.guild, h.alice, reply)
    assert mine.ephemeral and "nurse in Berlin" in mine.text and "hiking" in mine.text
    assert link_prefix(h, h.mods) in mine.text and link_prefix(h, h.general) in mine.text
    assert "it's about you" in mine.text and f"you said this in <#{h.general.id}> on " in mine.text

    bobs = await why_reply_card(h.memory, h.guild, h.bob, reply)
    # The memory from #mods is not listed, not linked, not counted.
    assert "hiking in the Alps" in bobs.text and link_prefix(h, h.general) in bobs.text
    assert "nurse" not in bobs.text and link_prefix(h, h.mods) not in bobs.text
    assert str(h.mods.id) not in bobs.text
    assert "can't read" not in bobs.text and "more" not in bobs.text
    assert f"it's about {h.alice.display_name}" in bobs.text
    assert isinstance(bobs.view, WhyView)
    assert [f.text for f in bobs.view.facts] == [
        f"{h.alice.display_name} loves hiking in the Alps."
    ]

    # On a member's message the other card answers, and vice versa.
    assert (
        "isn't one of my replies"
        in (await why_reply_card(h.memory, h.guild, h.alice, await h.say("hello there"))).text
    )


async def test_what_did_you_take_from_this(harness: Harness) -> None:
    h = harness
    said = await h.say("I love hiking in the Alps. I am a practising Catholic.")
    await h.settle()
    own = await taken_card(h.memory, h.guild, h.alice, said)
    assert own.ephemeral and "loves hiking in the Alps" in own.text
    assert link_prefix(h, h.general) + str(said.id) in own.text
    assert "1 personal detail(s) from it wait for your answer" in own.text
    assert "out of search and replies" in own.text
    # Bob sees what was taken, not that Alice has something pending.
    bobs = await taken_card(h.memory, h.guild, h.bob, said)
    assert "loves hiking" in bobs.text and "personal detail" not in bobs.text
    assert "Catholic" not in bobs.text
    nothing = await h.say("hello there, how are you all")
    await h.settle()
    assert "took no facts" in (await taken_card(h.memory, h.guild, h.bob, nothing)).text


async def test_the_cards_buttons_correct_and_forget(harness: Harness) -> None:
    h = harness
    gid = str(h.guild.id)
    await h.say("I live in Berlin.")
    await h.say("I love chess.", member=h.bob)
    await h.settle()
    h.fake.script_chat(
        ToolCalls.one("memory_query", {"query": "chess", "about": [h.bob.display_name]}),
        reply_json("Berlin, and Bob plays chess [M1]."),
    )
    await h.say(f"{h.mention} do I live in Berlin, and does {h.bob.display_name} love chess?")
    (reply,) = h.sent()
    card = await why_reply_card(h.memory, h.guild, h.alice, reply)
    view = card.view
    assert isinstance(view, WhyView)
    labels = [c.label for c in view.children if isinstance(c, discord.ui.Button)]
    assert labels == ["This is wrong", "Forget this"]
    assert isinstance(view.children[0], discord.ui.Select)
    berlin = next(f for f in view.facts if "Berlin" in f.text)
    chess = next(f for f in view.facts if "chess" in f.text)
    modal = CorrectionModal(view, berlin)
    assert [type(c) for c in modal.children] == [discord.ui.TextInput]

    # This is wrong, on her own fact: rewritten in the third person.
    said = await view.correct(berlin, "Actually I moved: I live in Leiden now.")
    assert (
        said == f"Thanks — corrected. I now remember: {h.alice.display_name} lives in Leiden now."
    )
    # Forget this, on Bob's fact: not hers to forget.
    refused = await view.forget(chess)
    assert refused.startswith("You can only make me forget facts about yourself")
    assert chess.fact_id is not None and await h.memory.facts.get(gid, chess.fact_id) is not None
    # A moderator may forget any fact; the answer carries a receipt.
    await moderator(h, h.alice)
    done = await view.forget(chess)
    assert done.startswith(f"Forgotten: {chess.text}\nDeletion receipt `R-")
    assert await h.memory.facts.get(gid, chess.fact_id) is None
    again = await view.forget(chess)
    assert again == (
        f"I have no fact #{chess.fact_id}. `/memory about-me` lists the facts I keep about you."
    )
    # Forgetting one's own fact twice says it is already forgotten.
    assert berlin.fact_id is not None
    first = await forget_fact_answer(h.memory, h.guild, h.alice, str(berlin.fact_id))
    assert first.text.startswith("Forgotten:")
    second = await forget_fact_answer(h.memory, h.guild, h.alice, str(berlin.fact_id))
    assert second.text.startswith("That fact is already forgotten (since ")


async def test_a_members_corrections_of_others_are_capped(harness: Harness) -> None:
    h = harness
    await h.memory.guilds.set_setting(str(h.guild.id), "daily_cap_facts_about_others", "1")
    await h.say("I love chess.", member=h.bob)
    await h.say("I love sailing on lakes.", member=h.bob)
    await h.settle()
    h.fake.script_chat(
        ToolCalls.one("memory_query", {"query": "chess sailing", "about": [h.bob.display_name]}),
        reply_json("Bob likes chess and sailing [M1] [M2]."),
    )
    await h.say(f"{h.mention} does {h.bob.display_name} love chess and sailing on lakes?")
    (reply,) = h.sent()
    view = (await why_reply_card(h.memory, h.guild, h.alice, reply)).view
    assert isinstance(view, WhyView) and len(view.facts) == 2
    ok = await view.correct(view.facts[0], "Bob loves blitz chess.")
    assert ok.startswith("Thanks — corrected.")
    held = await view.correct(view.facts[1], "Bob hates water.")
    assert "today's limit of 1" in held and "moderators" in held
    logged = await h.memory.admin.action_log(kind="memory_cap", guild_id=str(h.guild.id))
    assert [(e.detail or {}).get("text") for e in logged] == ["Bob hates water."]


async def test_this_is_wrong_on_someone_elses_fact_waits_for_review_when_it_is_on(
    harness: Harness,
) -> None:
    h = harness
    gid = str(h.guild.id)
    await h.say("I love chess.", member=h.bob)
    await h.settle()
    h.fake.script_chat(
        ToolCalls.one("memory_query", {"query": "chess", "about": [h.bob.display_name]}),
        reply_json("Bob loves chess [M1]."),
    )
    await h.say(f"{h.mention} what does {h.bob.display_name} love?")
    (reply,) = h.sent()
    await h.memory.guilds.set_setting(gid, "review_policy", "flagged")
    view = (await why_reply_card(h.memory, h.guild, h.alice, reply)).view
    assert isinstance(view, WhyView) and len(view.facts) == 1
    (chess,) = view.facts
    answer = await view.correct(chess, "Bob loves blitz chess.")
    assert answer.startswith("That memory is not about you, so the moderators decide")
    # Nothing changed yet: the fact stands until a moderator approves.
    assert chess.fact_id is not None
    still = await h.memory.facts.get(gid, chess.fact_id)
    assert still is not None and still.fact == chess.text and still.valid_to is None
    waiting = await h.memory.review.pending(gid)
    assert [(i.kind, i.fact, i.target_fact_id) for i in waiting] == [
        ("correction", "Bob loves blitz chess.", chess.fact_id)
    ]


async def test_cited_memories_link_their_sources_in_a_footer(harness: Harness) -> None:
    h = harness
    await h.say("I love hiking in the Alps.")
    await h.settle()
    h.sent()
    h.fake.script_chat(
        ToolCalls.one("memory_query", {"query": "hiking", "about": ["me"]}),
        reply_json("You love hiking in the Alps [M1]."),
    )
    await h.say(f"{h.mention} what do I do on weekends?")
    (reply,) = h.sent()
    text, footer = reply.content.split("\n", 1)
    assert text == "You love hiking in the Alps [M1]."
    assert footer.startswith("-# Sources: [M1](<" + link_prefix(h, h.general))


async def test_opt_out_and_opt_in_through_the_bot(harness: Harness) -> None:
    h = harness
    gid = str(h.guild.id)
    out = await opt_out_answer(h.memory, h.guild, h.alice)
    assert out.ephemeral and "from now on I don't remember" in out.text
    assert "already opted out" in (await opt_out_answer(h.memory, h.guild, h.alice)).text
    quiet = await h.say("I love sailing on lakes.")
    await h.settle()
    assert await h.memory.get_message(gid, str(quiet.id)) is None
    assert await h.memory.facts.find(gid, subject=str(h.alice.id)) == []
    card = await taken_card(h.memory, h.guild, h.alice, quiet)
    assert "you opted out" in card.text

    back = await opt_in_answer(h.memory, h.guild, h.alice)
    assert "again, from now on" in back.text
    assert "weren't opted out" in (await opt_in_answer(h.memory, h.guild, h.alice)).text
    heard = await h.say("I love hiking in the Alps.")
    await h.settle()
    assert await h.memory.get_message(gid, str(heard.id)) is not None
    assert [f.fact for f in await h.memory.facts.find(gid, subject=str(h.alice.id))] == [
        f"{h.alice.display_name} loves hiking in the Alps."
    ]


async def test_forget_me_can_keep_a_member_forgotten(harness: Harness) -> None:
    h = harness
    gid = str(h.guild.id)
    await h.say("I love hiking in the Alps.")
    await h.settle()
    prompt = forget_me_prompt(h.memory, h.guild, h.alice)
    assert isinstance(prompt.view, ForgetMeView)
    labels = [c.label for c in prompt.view.children if isinstance(c, discord.ui.Button)]
    assert labels == ["Forget everything about me", "Cancel", "…and stop remembering me"]
    text = await prompt.view.stay_forgotten()
    assert text.startswith("Done. Erased 1 facts, 1 messages")
    assert "Deletion receipt `R-" in text and "nothing they write here is remembered" in text
    assert await h.memory.opt_outs.is_out(gid, str(h.alice.id))
    receipt_id = text.split("`")[1]
    found = await h.memory.receipts.verify(receipt_id)
    assert found is not None and found.clean and found.receipt.counts["facts"] == 1
    later = await h.say("I love baking bread.")
    await h.settle()
    assert await h.memory.get_message(gid, str(later.id)) is None
    # The plain choice says how to stop being remembered.
    plain = await forget_me_prompt(h.memory, h.guild, h.bob).view.action()  # type: ignore[union-attr]
    assert "`/memory opt-out` stops that" in plain


async def test_memory_privacy_follows_the_settings(harness: Harness) -> None:
    h = harness
    offline = Deployment()
    pages = await privacy_embeds(h.memory, h.guild, offline)
    text = "\n".join(f"{e.title}\n{e.description}" for page in pages for e in page)
    assert sum(len(e.title or "") + len(e.description or "") for e in pages[0]) <= 6000
    assert f"Privacy in {h.guild.name}: What is collected" in text
    assert "are not stored until you agree" in text
    assert "No message or fact is sent to any model provider" in text
    assert "When a member leaves the server, what is kept about them stays" in text

    gid = str(h.guild.id)
    await h.memory.guilds.set_setting(gid, "sensitive_facts", "never")
    await h.memory.guilds.set_setting(gid, "member_leave_policy", "forget:30d")
    online = Deployment(chat_endpoint="llm.example.org", extract_endpoint="llm.example.org")
    after = await privacy_embeds(h.memory, h.guild, online)
    text = "\n".join(f"{e.title}\n{e.description}" for page in after for e in page)
    assert "are never stored" in text and "not stored until you agree" not in text
    assert "erased 30 days later, unless they rejoin" in text
    assert "Fact extraction: messages are sent to llm.example.org." in text
