"""``Memory.catch_up``, the engine's side of reading back what Discord holds:
where a read starts, what it ingests, and what it may judge deleted or
edited (only what was read; nothing when the read failed). On both backends;
the adapter's side, with real processes, is in tests/bot/test_catch_up_processes.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory.clock import DISCORD_EPOCH, iso
from memory.models import IncomingMessage
from memory.roles.catch_up import snowflake_before
from memory.store import messages as store_messages
from tests.helpers import ALICE, BOB, CHANNEL, GUILD, ScriptedExtractor, echo_fact, msg

OTHER_CHANNEL = "333333333333333334"
# Three hours ago, so everything here is in the past (a forget's time is now).
BASE = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)


def at(minutes: float) -> datetime:
    return BASE + timedelta(minutes=minutes)


def snowflake(when: datetime, n: int = 0) -> str:
    return str(((when - DISCORD_EPOCH) // timedelta(milliseconds=1)) << 22 | n)


def discord_msg(
    text: str,
    minutes: float,
    *,
    n: int = 0,
    author: str = ALICE,
    channel: str = CHANNEL,
    edited: float | None = None,
) -> IncomingMessage:
    """A message as Discord returns it, its id made from its time."""
    when = at(minutes)
    return IncomingMessage(
        id=snowflake(when, n),
        guild_id=GUILD,
        channel_id=channel,
        author_id=author,
        author_name="Alice" if author == ALICE else "Bob",
        content=text,
        created_at=iso(when),
        edited_at=iso(at(edited)) if edited is not None else None,
    )


async def stored(mem: Any, *messages: IncomingMessage) -> None:
    for m in messages:
        assert await (await mem.ingest_message(m)).wait()
    assert await mem.settle()


async def facts_saying(mem: Any, word: str) -> list[str]:
    return [f.fact for f in await mem.facts.find(GUILD, limit=200) if word in f.fact.lower()]


async def read(run: Any, channel: str, messages: list[IncomingMessage], *, complete: bool) -> None:
    reading = await run.channel(channel)
    for m in messages:
        await reading.add(m)
    await reading.close(complete=complete)


async def plan(mem: Any, reconcile_min: float = 60, **kw: Any) -> Any:
    options: dict[str, Any] = {"channel_limit": 1000, "guild_limit": 20_000}
    options.update(kw)
    return await mem.catch_up.plan(
        GUILD, [CHANNEL, OTHER_CHANNEL], reconcile_s=reconcile_min * 60, **options
    )


@pytest.fixture
async def mem(make_memory: Any) -> Any:
    return await make_memory(extractor=ScriptedExtractor(fn=echo_fact), embeddings="none")


async def test_nothing_stored_means_nothing_to_catch_up(mem: Any) -> None:
    assert await plan(mem) is None
    # Voice transcripts are not Discord's messages: they start nothing.
    await stored(mem, msg("I sing in the choir", source="voice", id=snowflake(at(0))))
    assert await plan(mem) is None


async def test_the_start_is_the_newest_stored_message_less_the_window(mem: Any) -> None:
    await stored(
        mem,
        discord_msg("I keep bees on the roof", 0),
        discord_msg("I keep goats in the yard", 20, channel=OTHER_CHANNEL),
    )
    run = await plan(mem, reconcile_min=15)
    assert run.start == iso(at(5))
    assert run.after == snowflake_before(iso(at(5))) < int(snowflake(at(5)))
    assert await mem.catch_up.newest(GUILD, [CHANNEL, OTHER_CHANNEL, "9"]) == {
        CHANNEL: (snowflake(at(0)), iso(at(0))),
        OTHER_CHANNEL: (snowflake(at(20)), iso(at(20))),
    }
    # Turning memory off and on again moves it to the change: what was said
    # while it was off is not read back.
    await mem.guilds.set_setting(GUILD, "memory_enabled", "false")
    await mem.guilds.set_setting(GUILD, "memory_enabled", "true")
    run = await plan(mem, reconcile_min=15)
    assert run.start > iso(datetime.now(UTC) - timedelta(minutes=1))
    assert await plan(mem, channel_limit=0) is None


async def test_a_purged_guild_is_never_read_back_from_before_the_purge(mem: Any) -> None:
    await stored(mem, discord_msg("I keep bees on the roof", 0))
    await mem.retention.purge_guild(GUILD)
    assert await plan(mem) is None  # nothing stored: nothing to start from
    # The bot stays; a member talks again: the start is the purge, not the
    # hour before this message.
    now = datetime.now(UTC)
    await stored(
        mem,
        IncomingMessage(
            id=snowflake(now),
            guild_id=GUILD,
            channel_id=CHANNEL,
            author_id=ALICE,
            author_name="Alice",
            content="I keep goats in the yard",
            created_at=iso(now),
        ),
    )
    [purged] = await mem.admin.action_log(kind="guild_purged")
    run = await plan(mem)
    assert run.start == purged.created_at > iso(now - timedelta(minutes=1))


async def test_new_messages_are_ingested_once_and_deletes_and_edits_applied(mem: Any) -> None:
    kept = discord_msg("I keep bees on the roof", 0)
    deleted = discord_msg("My locker code is nebulawombat", 10)
    changed = discord_msg("I keep a kayak in the red shed", 20)
    await stored(mem, kept, deleted, changed)
    assert await facts_saying(mem, "nebulawombat")

    now_said = discord_msg("My favourite drink is mango lassi", 20, edited=25)
    new = [discord_msg("I play chess on Sundays", 30), discord_msg("I brew cider", 40, n=1)]
    run = await plan(mem)
    await read(run, CHANNEL, [kept, now_said, *new], complete=True)
    report = await run.finish()

    assert (report.read, report.ingested, report.deleted, report.edited) == (4, 2, 1, 1)
    assert await mem.settle()
    assert await mem.get_message(GUILD, deleted.id) is None
    assert await facts_saying(mem, "nebulawombat") == []
    edited = await mem.get_message(GUILD, changed.id)
    assert edited is not None and edited.content == "My favourite drink is mango lassi"
    assert await facts_saying(mem, "mango") and not await facts_saying(mem, "red shed")
    for m in new:
        got = await mem.get_message(GUILD, m.id)
        assert got is not None and got.state == "done"
    entries = await mem.admin.action_log(kind="catch_up")
    assert len(entries) == 1 and entries[0].detail["deleted"] == 1

    # Read again (a second restart): nothing changes, nothing is logged.
    again = await plan(mem)
    await read(again, CHANNEL, [kept, now_said, *new], complete=True)
    report = await again.finish()
    assert (report.ingested, report.deleted, report.edited) == (0, 0, 0)
    assert len(await mem.admin.action_log(kind="catch_up")) == 1
    assert len(await facts_saying(mem, "chess")) == 1


async def test_only_what_was_read_is_judged(mem: Any) -> None:
    early = discord_msg("I keep bees on the roof", 0)
    first = discord_msg("I keep goats in the yard", 30)
    second = discord_msg("I keep a canoe in the barn", 40)
    third = discord_msg("I keep a drum in the attic", 50)
    await stored(mem, early, first, second, third)

    # Stopped at a limit (or a shutdown) after ``first``: ``second`` and
    # ``third`` were not read, so they are not judged.
    run = await plan(mem, reconcile_min=30)
    assert int(early.id) <= run.after < int(first.id)
    await read(run, CHANNEL, [first], complete=False)
    # A read that failed judges nothing, even what it read.
    reading = await run.channel(OTHER_CHANNEL)
    await reading.failed("HTTPException: 503 Service Unavailable")
    report = await run.finish()
    assert (report.deleted, report.limited, report.failed) == (0, 1, 1)
    for m in (early, first, second, third):
        assert await mem.get_message(GUILD, m.id) is not None

    # Read to the end: what is missing after the start is gone; ``early``,
    # before the start, is never judged.
    run = await plan(mem, reconcile_min=30)
    await read(run, CHANNEL, [third], complete=True)
    report = await run.finish()
    assert report.deleted == 2
    assert await mem.get_message(GUILD, early.id) is not None
    assert await mem.get_message(GUILD, first.id) is None
    assert await mem.get_message(GUILD, second.id) is None


async def test_a_failed_read_judges_nothing(mem: Any) -> None:
    gone = discord_msg("I keep bees on the roof", 0)
    await stored(mem, gone)
    run = await plan(mem)
    reading = await run.channel(CHANNEL)
    await reading.add(discord_msg("I play chess on Sundays", 5))
    await reading.failed("Forbidden: 403 Missing Access")
    report = await run.finish()
    assert (report.failed, report.deleted, report.ingested) == (1, 0, 1)
    assert await mem.get_message(GUILD, gone.id) is not None


async def test_an_edit_needs_discords_mark_and_a_stored_text_unchanged_since(mem: Any) -> None:
    said = discord_msg("I keep a kayak in the red shed", 0)
    await stored(mem, said)
    # Not marked edited: the text shown differently (a mention's name) is no edit.
    run = await plan(mem)
    await read(run, CHANNEL, [discord_msg("I keep a kayak in the RED shed", 0)], complete=True)
    assert (await run.finish()).edited == 0
    # A live edit received after the read began is newer than what it returned.
    run = await plan(mem)
    reading = await run.channel(CHANNEL)
    await mem.edit_message(GUILD, said.id, "I keep a kayak in the green shed")
    await reading.add(discord_msg("I keep a kayak in the blue shed", 0, edited=1))
    await reading.close(complete=True)
    assert (await run.finish()).edited == 0
    got = await mem.get_message(GUILD, said.id)
    assert got is not None and got.content == "I keep a kayak in the green shed"
    # Without the message text (no Message Content intent) nothing is judged edited.
    run = await plan(mem, texts=False)
    await read(run, CHANNEL, [discord_msg("", 0, edited=2)], complete=True)
    assert (await run.finish()).edited == 0
    # Edited down to nothing: a delete.
    run = await plan(mem)
    await read(run, CHANNEL, [discord_msg("  ", 0, edited=3)], complete=True)
    report = await run.finish()
    assert (report.edited, report.deleted) == (1, 0)
    assert await mem.get_message(GUILD, said.id) is None


async def test_a_forgotten_members_messages_are_not_read_back(mem: Any) -> None:
    bob_said = discord_msg("I keep a rowboat in the cove", 0, author=BOB)
    await stored(mem, discord_msg("I keep bees on the roof", 5), bob_said)
    await mem.forget(GUILD, BOB)
    after_forget = datetime.now(UTC) + timedelta(seconds=5)
    later = IncomingMessage(
        id=snowflake(after_forget),
        guild_id=GUILD,
        channel_id=CHANNEL,
        author_id=BOB,
        author_name="Bob",
        content="I keep a sailboat in the harbour",
        created_at=iso(after_forget),
    )
    run = await plan(mem)
    await read(run, CHANNEL, [bob_said, later], complete=True)
    report = await run.finish()
    assert (report.forgotten, report.ingested) == (1, 1)
    assert await mem.get_message(GUILD, bob_said.id) is None
    assert await mem.get_message(GUILD, later.id) is not None


async def test_the_guild_limit_bounds_a_run(mem: Any) -> None:
    await stored(mem, discord_msg("I keep bees on the roof", 0))
    run = await plan(mem, channel_limit=2, guild_limit=3)
    reading = await run.channel(CHANNEL)
    assert reading.limit == 2
    for i in range(2):
        await reading.add(discord_msg(f"I keep jar {i} on the shelf", 10 + i))
    await reading.close(complete=False)
    reading = await run.channel(OTHER_CHANNEL)
    assert reading.limit == 1
    await reading.add(discord_msg("I keep a lamp", 20, channel=OTHER_CHANNEL))
    await reading.close(complete=False)
    assert run.spent
    run.skip(4)
    report = await run.finish()
    assert (report.read, report.ingested, report.limited, report.not_read) == (3, 3, 2, 4)
    entry = (await mem.admin.action_log(kind="catch_up"))[0]
    assert "2 channels read in part, 4 not read" in entry.message


@pytest.mark.sqlite_only("SQLite's query planner: it may pick the index on time alone")
async def test_the_newest_message_is_found_by_seeking_the_channel_index(mem: Any) -> None:
    await stored(mem, discord_msg("I keep bees on the roof", 0))

    def plan_of(con: Any) -> str:
        rows = con.execute(
            "EXPLAIN QUERY PLAN SELECT id, created_at FROM messages WHERE guild_id = ? "
            "AND channel_id = ? AND source != 'voice' ORDER BY created_at DESC LIMIT 1",
            (GUILD, CHANNEL),
        ).fetchall()
        return " ".join(str(r[-1]) for r in rows)

    found = await mem.db.read(plan_of)
    assert "messages_guild_channel_time" in found and "TEMP B-TREE" not in found, found
    assert await mem.db.read(store_messages.newest_in_channels, GUILD, [CHANNEL]) == {
        CHANNEL: (snowflake(at(0)), iso(at(0)))
    }
