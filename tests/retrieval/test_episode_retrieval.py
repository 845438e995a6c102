"""Episodes are found: by search (words and vectors), in a reply's prompt
slice within the replies' allowlist, and only where the asker can see their
channel."""

from __future__ import annotations

from typing import Any

from memory.engine import Memory
from memory.reply.conversation import render_sections
from tests.conftest import FakeClock
from tests.helpers import ALICE, BOB, CHANNEL, GUILD
from tests.ingest.test_decision import ingest
from tests.roles.test_episodes import ELSEWHERE, PRIVATE, START, engine, run_at, talk


async def test_search_and_the_prompt_slice_find_an_episode(
    make_memory: Any, clock: FakeClock
) -> None:
    mem = await engine(make_memory, clock)
    await ingest(mem, *talk())
    (episode,) = await run_at(mem, clock, 40)
    hits = await mem.search(GUILD, "what did we decide about the dragon raid?")
    assert str(episode.fact_id) in [h.id for h in hits]
    only = await mem.search(GUILD, "dragon raid", types=["episodes"])
    assert [h.fact_type for h in only] == ["episode"]
    # A member asking in another channel that can see the raid channel.
    piece = await mem.build_prompt_slice(
        GUILD,
        ELSEWHERE,
        ALICE,
        "when is the dragon raid?",
        visible_channels={CHANNEL, ELSEWHERE},
        consumer="replies",
    )
    assert [h.id for h in piece.episodes] == [str(episode.fact_id)]
    text = render_sections(piece, {CHANNEL: "raids"})
    assert "Past conversations in this server:" in text and "#raids" in text
    # An operator who takes episodes out of the replies' list takes them out of the slice.
    await mem.guilds.set_setting(GUILD, "reply_memory_types", "facts,lore")
    piece = await mem.build_prompt_slice(
        GUILD, CHANNEL, ALICE, "when is the dragon raid?", consumer="replies"
    )
    assert piece.episodes == ()
    assert "Past conversations" not in render_sections(piece)


async def test_a_private_channels_episode_stays_in_it(make_memory: Any, clock: FakeClock) -> None:
    mem = await engine(make_memory, clock)
    await ingest(mem, *talk(channel=PRIVATE))
    (episode,) = await run_at(mem, clock, 40)
    assert episode.channel_id == PRIVATE
    outside = await mem.search(GUILD, "dragon raid", visible_channels={CHANNEL}, gate=False)
    assert str(episode.fact_id) not in [h.id for h in outside]
    piece = await mem.build_prompt_slice(
        GUILD, CHANNEL, BOB, "dragon raid", visible_channels={CHANNEL}, consumer="replies"
    )
    assert piece.episodes == ()
    inside = await mem.build_prompt_slice(
        GUILD, PRIVATE, BOB, "dragon raid", visible_channels={PRIVATE}, consumer="replies"
    )
    assert [h.id for h in inside.episodes] == [str(episode.fact_id)]


async def test_an_episode_gets_a_vector(make_memory: Any, clock: FakeClock) -> None:
    clock.now = START
    mem: Memory = await make_memory(clock=clock)
    await ingest(mem, *talk())
    (episode,) = await run_at(mem, clock, 40)
    assert await mem.embeddings.settle(60)

    def vectors(con: Any) -> int:
        return int(
            con.execute(
                "SELECT count(*) FROM memory_fact_vectors WHERE fact_id = ?", (episode.fact_id,)
            ).fetchone()[0]
        )

    assert await mem.db.read(vectors) == 1
    # A paraphrase with no word in common with the summary's topic words.
    hits = await mem.search(GUILD, "evening boss fight schedule", types=["episodes"], gate=False)
    assert str(episode.fact_id) in [h.id for h in hits]
