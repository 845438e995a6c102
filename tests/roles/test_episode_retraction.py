"""An episode goes with its messages: deleted, edited or forgotten, any one
of them retracts it whole, and what remains is summarised again; a guild
purge leaves no episode row."""

from __future__ import annotations

from typing import Any

from memory.engine import Memory
from tests.conftest import FakeClock
from tests.helpers import ALICE, BOB, CHANNEL, GUILD, fts_condition
from tests.ingest.test_decision import ingest
from tests.roles.test_episodes import engine, run_at, talk


async def _fts_rows(mem: Memory, word: str, fact_id: int) -> int:
    """FTS rows of ``fact_id`` matching ``word``."""

    def q(con: Any) -> int:
        match, words = fts_condition(con, "memory_facts_fts", [word])
        return int(
            con.execute(
                f"SELECT count(*) FROM memory_facts_fts WHERE {match} AND rowid = ?",
                (words, fact_id),
            ).fetchone()[0]
        )

    return int(await mem.db.read(q))


async def test_deleting_all_its_messages_retracts_it(make_memory: Any, clock: FakeClock) -> None:
    mem = await engine(make_memory, clock)
    messages = talk()
    await ingest(mem, *messages)
    (episode,) = await run_at(mem, clock, 40)
    assert "evening" in episode.text
    assert await _fts_rows(mem, "evening", episode.fact_id) == 1
    report = await mem.lifecycle.delete_messages(GUILD, [m.id for m in messages])
    assert report.facts_retracted >= 1
    assert await mem.episodes.find(GUILD) == []
    assert await mem.facts.get(GUILD, episode.fact_id) is None
    assert await _fts_rows(mem, "evening", episode.fact_id) == 0
    history = await mem.facts.history(GUILD, episode.fact_id)
    # The event trail stays, without the words.
    assert sorted(h.event for h in history) == ["add", "retract"]
    assert all(h.old_text is None and h.new_text is None for h in history)
    # Nothing is left to summarise again.
    assert (await mem.episodes.run()).rebuilt == 0
    assert await mem.episodes.find(GUILD) == []


async def test_deleting_one_message_rewrites_it_without_that_message(
    make_memory: Any, clock: FakeClock
) -> None:
    mem = await engine(make_memory, clock)
    messages = talk()
    await ingest(mem, *messages)
    (episode,) = await run_at(mem, clock, 40)
    said = messages[4]  # "Great, the dragon raid is Friday at nine then."
    assert "at nine" in episode.text
    await mem.lifecycle.delete_messages(GUILD, [said.id])
    # Retracted at once: the summary carried the deleted words.
    assert await mem.episodes.find(GUILD) == []
    assert await _fts_rows(mem, "nine", episode.fact_id) == 0
    done = await mem.episodes.run()
    assert done.rebuilt == 1
    (again,) = await mem.episodes.find(GUILD)
    again = await mem.episodes.get(GUILD, again.fact_id) or again
    assert set(again.source_ids) == {m.id for m in messages} - {said.id}
    assert "nine" not in again.text
    assert again.channel_id == CHANNEL


async def test_an_edited_message_rewrites_its_episode(make_memory: Any, clock: FakeClock) -> None:
    mem = await engine(make_memory, clock)
    messages = talk()
    await ingest(mem, *messages)
    (episode,) = await run_at(mem, clock, 40)
    assert "Friday at nine" in episode.text  # quoted from messages[4]
    edited = "Great, the dragon raid is Saturday at ten then."
    await mem.lifecycle.edit_message(GUILD, messages[4].id, edited)
    assert await mem.settle(60)
    assert await mem.episodes.find(GUILD) == []
    assert (await mem.episodes.run()).rebuilt == 1
    (again,) = await mem.episodes.find(GUILD)
    again = await mem.episodes.get(GUILD, again.fact_id) or again
    assert "nine" not in again.text
    # The edited message stays part of the conversation, with its new text.
    assert set(again.source_ids) == {m.id for m in messages}


async def test_forget_of_a_member_rewrites_episodes_without_them(
    make_memory: Any, clock: FakeClock
) -> None:
    mem = await engine(make_memory, clock)
    lines = [
        (ALICE, "Alice", "The dragon raid starts Friday at nine."),
        (BOB, "Bob", "My secret zeppelin strategy wins the dragon raid."),
        (ALICE, "Alice", "Healers meet at the dragon gate before the raid."),
        (BOB, "Bob", "Zeppelin strategy needs two tanks for the raid."),
        (ALICE, "Alice", "Carol tanks the dragon raid on Friday."),
        (ALICE, "Alice", "Bring potions to the dragon raid."),
    ]
    await ingest(mem, *talk(lines=lines))
    (episode,) = await run_at(mem, clock, 40)
    assert "Bob" in episode.text
    await mem.forget(GUILD, BOB)
    assert await mem.episodes.find(GUILD) == []
    # Forget erases the episode's history too, not only its text.
    assert await mem.facts.history(GUILD, episode.fact_id) == []
    assert (await mem.episodes.run()).rebuilt == 1
    (again,) = await mem.episodes.find(GUILD)
    again = await mem.episodes.get(GUILD, again.fact_id) or again
    assert again.message_count == 4
    assert "Bob" not in again.text and "zeppelin" not in again.text.lower()


async def test_a_forget_that_leaves_one_message_drops_the_episode(
    make_memory: Any, clock: FakeClock
) -> None:
    mem = await engine(make_memory, clock)
    lines = [(BOB, "Bob", f"Dragon raid plan number {i} for Friday.") for i in range(5)]
    lines.append((ALICE, "Alice", "Sounds good for the dragon raid."))
    await ingest(mem, *talk(lines=lines))
    await run_at(mem, clock, 40)
    await mem.forget(GUILD, BOB)
    done = await mem.episodes.run()
    assert done.rebuilt == 0 and mem.episodes.stats.rebuilds_dropped == 1
    assert await mem.episodes.find(GUILD) == []


async def test_a_guild_purge_leaves_no_episode_rows(make_memory: Any, clock: FakeClock) -> None:
    mem = await engine(make_memory, clock)
    messages = talk()
    await ingest(mem, *messages)
    await run_at(mem, clock, 40)
    # A rebuild waiting in the queue goes too.
    await mem.lifecycle.delete_messages(GUILD, [messages[0].id])
    await mem.retention.purge_guild(GUILD)

    def rows(con: Any) -> list[int]:
        return [
            int(con.execute(f"SELECT count(*) FROM {t} WHERE guild_id = ?", (GUILD,)).fetchone()[0])
            for t in ("episodes", "episode_marks", "episode_rebuilds")
        ]

    assert await mem.db.read(rows) == [0, 0, 0]
