"""Members leaving and re-joining, the bot removed from and added back to a
guild, through the real bot: the gateway payloads go through discord.py's own
parsing, which dispatches the events the lifecycle cog listens to; the timers
run from the scheduled job's body under an injected clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from types import SimpleNamespace
from typing import Any

import discord
import discord.ext.test as dpytest
import pytest
import pytest_asyncio
from discord.ext.test import factories as dfacts

from bot.cogs.lifecycle import still_away
from bot.jobs import Jobs
from memory import InvalidInput, parse_guild_setting
from tests.bot.test_bot import Harness, make_harness
from tests.bot.test_bot_lifecycle import gateway, journal_text
from tests.conftest import FakeClock
from tests.fakeopenai import FakeOpenAI
from tests.helpers import every_cell_text, inspect_db


@pytest_asyncio.fixture
async def harness(
    make_memory: Any, fake_openai: FakeOpenAI, clock: FakeClock
) -> AsyncIterator[Harness]:
    memory = await make_memory(clock=clock)
    h = await make_harness(memory, fake_openai)
    http = h.bot.http
    original = http.get_member

    # dpytest's fake HTTP fails on someone not in the guild; Discord answers 404.
    async def get_member(guild_id: int, member_id: int) -> Any:
        guild = h.bot.get_guild(int(guild_id))
        if guild is None or guild.get_member(int(member_id)) is None:
            gone = SimpleNamespace(status=404, reason="Not Found")
            raise discord.NotFound(gone, {"code": 10007, "message": "Unknown Member"})  # type: ignore[arg-type]
        return await original(guild_id, member_id)

    http.get_member = get_member  # type: ignore[method-assign,assignment]
    yield h
    await dpytest.empty_queue()
    h.bot.accepting = False


def jobs_of(h: Harness) -> Jobs:
    jobs = Jobs(h.memory)
    jobs.still_away = partial(still_away, h.bot)
    return jobs


async def facts_about(h: Harness, member: Any, guild: Any = None) -> list[str]:
    gid = str((guild or h.guild).id)
    return [f.fact for f in await h.memory.facts.find(gid, subject=str(member.id))]


async def leave(h: Harness, member: Any) -> None:
    await gateway(
        "guild_member_remove",
        {"guild_id": str(h.guild.id), "user": dfacts.dict_from_user(member._user)},
    )


async def join(h: Harness, member: Any) -> None:
    data = dfacts.dict_from_member(member)
    data["guild_id"] = str(h.guild.id)
    data.setdefault("roles", [])
    await gateway("guild_member_add", data)


async def two_members_talk(h: Harness) -> None:
    await h.say("I love hiking in the Alps.")
    await h.say("I love sailing on lakes.", member=h.bob)
    await h.settle()
    assert await facts_about(h, h.alice) and await facts_about(h, h.bob)


async def test_a_leave_forgets_the_member_when_the_timer_is_due(
    harness: Harness, clock: FakeClock
) -> None:
    h = harness
    await h.memory.guilds.set_setting(str(h.guild.id), "member_leave_policy", "forget:30d")
    await two_members_talk(h)
    jobs = jobs_of(h)

    await leave(h, h.alice)
    [timer] = await h.memory.retention.timers(str(h.guild.id))
    assert (timer.user_id, timer.action) == (str(h.alice.id), "forget")

    clock.advance(days=29, hours=23)
    await jobs.retention()
    assert await facts_about(h, h.alice)

    clock.advance(hours=2)
    await jobs.retention()
    assert await facts_about(h, h.alice) == []
    assert await facts_about(h, h.bob)
    assert "hiking in the Alps" not in await journal_text(h)
    assert "sailing on lakes" in await journal_text(h)
    assert await h.memory.retention.timers() == []
    con = inspect_db(h.memory)
    rows = con.execute(
        "SELECT event, actor FROM fact_history WHERE subject = ? AND fact_id IS NULL",
        (str(h.alice.id),),
    ).fetchall()
    con.close()
    assert [tuple(r) for r in rows] == [("forget", "retention")]


async def test_a_rejoin_cancels_the_timed_forget(harness: Harness, clock: FakeClock) -> None:
    h = harness
    await h.memory.guilds.set_setting(str(h.guild.id), "member_leave_policy", "forget:30d")
    await two_members_talk(h)
    jobs = jobs_of(h)

    await leave(h, h.alice)
    clock.advance(days=10)
    await join(h, h.alice)
    assert await h.memory.retention.timers() == []

    clock.advance(days=60)
    await jobs.retention()
    assert await facts_about(h, h.alice)
    kinds = [e.kind for e in await h.memory.admin.action_log(guild_id=str(h.guild.id))]
    assert "retention_scheduled" in kinds and "retention_cancelled" in kinds


async def test_a_rejoin_the_bot_missed_cancels_the_timer_when_it_is_due(
    harness: Harness, clock: FakeClock
) -> None:
    h = harness
    await h.memory.guilds.set_setting(str(h.guild.id), "member_leave_policy", "forget:1d")
    await two_members_talk(h)
    # The leave was seen, the re-join was not (the bot was offline): Alice is
    # in the guild when the timer comes due.
    await h.memory.retention.member_left(str(h.guild.id), str(h.alice.id))
    clock.advance(days=2)

    done = await h.memory.retention.run_due(partial(still_away, h.bot))

    assert done.cancelled == 1 and done.forgotten == []
    assert await facts_about(h, h.alice)


async def test_keep_is_the_default_and_a_leave_changes_nothing(
    harness: Harness, clock: FakeClock
) -> None:
    h = harness
    await two_members_talk(h)
    await leave(h, h.alice)
    assert await h.memory.retention.timers() == []
    clock.advance(days=3650)
    await jobs_of(h).retention()
    assert await facts_about(h, h.alice)


async def test_guild_removal_purges_after_the_delay(harness: Harness, clock: FakeClock) -> None:
    h = harness
    gid = str(h.guild.id)
    await h.memory.guilds.set_setting(gid, "guild_leave_policy", "purge:7d")
    await two_members_talk(h)
    await h.say("I love the northern lights.", member=h.stranger, channel=h.other_general)
    await h.settle()
    jobs = jobs_of(h)

    await gateway("guild_delete", {"id": gid})
    assert h.bot.get_guild(h.guild.id) is None
    [timer] = await h.memory.retention.timers(gid)
    assert (timer.user_id, timer.action) == ("", "purge")

    clock.advance(days=6)
    await jobs.retention()
    assert await facts_about(h, h.alice)

    clock.advance(days=2)
    await jobs.retention()
    assert await h.memory.facts.find(gid) == []
    assert await h.memory.guilds.raw_settings(gid) == {}
    assert "hiking in the Alps" not in await journal_text(h)
    assert "hiking in the Alps" not in await h.memory.refresh_snapshot()
    # The other guild keeps its memory.
    assert await facts_about(h, h.stranger, h.other_guild)
    assert "northern lights" in await journal_text(h)
    # Not in the data dir's files (the SQLite file and its WAL), nor in any
    # table (what PostgreSQL holds outside it).
    for path in h.memory.config.db_path.parent.rglob("*"):
        if path.is_file():
            assert b"hiking in the Alps" not in path.read_bytes(), path
    con = inspect_db(h.memory)
    try:
        assert not [t for t in every_cell_text(con) if "hiking in the Alps" in t]
    finally:
        con.close()


async def test_the_bot_added_back_cancels_the_purge(harness: Harness, clock: FakeClock) -> None:
    h = harness
    gid = str(h.guild.id)
    await h.memory.guilds.set_setting(gid, "guild_leave_policy", "purge:7d")
    await two_members_talk(h)
    roles = [dfacts.dict_from_role(r) for r in h.guild.roles]
    data = dfacts.make_guild_dict(h.guild.name, h.guild.owner_id or 0, roles, id_num=h.guild.id)

    await gateway("guild_delete", {"id": gid})
    assert len(await h.memory.retention.timers(gid)) == 1
    await gateway("guild_create", data)
    assert h.bot.get_guild(h.guild.id) is not None
    assert await h.memory.retention.timers(gid) == []

    clock.advance(days=30)
    await jobs_of(h).retention()
    assert await facts_about(h, h.alice)


def test_leave_policy_values() -> None:
    assert parse_guild_setting("member_leave_policy", "forget:30") == "forget:30d"
    assert parse_guild_setting("member_leave_policy", " Forget: 7d ") == "forget:7d"
    assert parse_guild_setting("member_leave_policy", "keep") == "keep"
    assert parse_guild_setting("guild_leave_policy", "purge:0d") == "purge:0d"
    assert parse_guild_setting("guild_leave_policy", "") is None
    for key, bad in (
        ("member_leave_policy", "purge:30d"),
        ("guild_leave_policy", "forget:30d"),
        ("member_leave_policy", "forget:-1d"),
        ("member_leave_policy", "forget:99999d"),
        ("member_leave_policy", "soon"),
    ):
        with pytest.raises(InvalidInput):
            parse_guild_setting(key, bad)
