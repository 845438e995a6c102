"""Relations on write: when a fact's vector is written it links to its
nearest active facts of the guild (cosine ≥ 0.6, at most 5), each pair
once; a related candidate adds a small visible boost to the score; the
prompt slice may add 1–2 related facts; edges go with their facts."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from memory.config import RetrievalConfig
from memory.engine import Memory
from memory.retrieval.related import RELATED_WEIGHT
from memory.store.relations import LINK_MIN, MAX_LINKS, all_edges, relate
from memory.store.vectors import stored_vectors
from tests.helpers import CHANNEL, GUILD

CLOSE = (
    "the guild raid on Friday starts at 9 pm",
    "the Friday raid starts at nine in the evening",
    "the guild raid night is Friday",
    "raid night on Friday begins at 21:00",
    "the Friday guild raid begins at 9 pm sharp",
    "our raid group meets Friday at 9 pm",
    "the weekly raid is on Friday at 9 pm",
)
FAR = "the guild mascot is a red fox"


async def lore(mem: Memory, line: str) -> int:
    got = await mem.lore.remember(GUILD, line, source_text=line, channel_id=CHANNEL)
    assert got is not None
    return got.fact.id


async def edges(mem: Memory) -> list[tuple[int, int, float]]:
    return await mem.db.read(all_edges, GUILD)


async def test_facts_link_to_near_neighbours_once_and_at_most_five(make_memory: Any) -> None:
    mem = await make_memory()
    ids = [await lore(mem, line) for line in CLOSE]
    far = await lore(mem, FAR)
    assert await mem.embeddings.settle()
    got = await edges(mem)
    assert got, "close paraphrases must be related"
    pairs = [(a, b) for a, b, _ in got]
    assert len(pairs) == len(set(pairs)) and all(a < b for a, b in pairs)  # undirected, once
    assert all(s >= LINK_MIN for _, _, s in got)
    assert all(far not in (a, b) for a, b in pairs)
    # Written last, the newest fact linked to at most five neighbours.
    newest = ids[-1]
    assert 1 <= sum(newest in p for p in pairs) <= MAX_LINKS
    # Relating again (the vector written again) leaves one edge per pair.
    model = mem.embeddings.model_for_guild(GUILD)
    assert model is not None
    blob = (await mem.db.read(stored_vectors, "facts", model, [newest]))[newest]
    for _ in range(2):
        await mem.db.write(relate, model, GUILD, newest, blob, "2026-11-22T12:00:00+00:00")
    again = await edges(mem)
    assert sorted((a, b) for a, b, _ in again) == sorted(set((a, b) for a, b, _ in again))
    assert {(a, b) for a, b, _ in again if newest in (a, b)} == {
        (a, b) for a, b in pairs if newest in (a, b)
    }


async def test_edges_go_with_their_facts(make_memory: Any) -> None:
    mem = await make_memory()
    ids = [await lore(mem, line) for line in CLOSE[:3]]
    assert await mem.embeddings.settle()
    assert any(ids[0] in (a, b) for a, b, _ in await edges(mem))
    assert await mem.facts.delete(GUILD, ids[0])
    assert all(ids[0] not in (a, b) for a, b, _ in await edges(mem))


async def test_a_related_candidate_boosts_the_score_visibly(make_memory: Any) -> None:
    mem = await make_memory()
    for line in CLOSE[:3]:
        await lore(mem, line)
    assert await mem.embeddings.settle()
    hits = await mem.search(GUILD, "when is the Friday raid", scope="facts", gate=False)
    boosted = [h for h in hits if h.parts is not None and h.parts.related > 0]
    assert boosted
    for h in boosted:
        assert h.parts is not None and 0 < h.parts.related <= RELATED_WEIGHT
        assert h.parts.passed


async def test_the_prompt_slice_adds_related_facts(make_memory: Any) -> None:
    mem = await make_memory(retrieval=RetrievalConfig(user_facts=1, relevant_facts=1))
    for line in CLOSE[:4]:
        await lore(mem, line)
    assert await mem.embeddings.settle()
    got = await mem.build_prompt_slice(
        GUILD, CHANNEL, "someone", "raid night", visible_channels={CHANNEL}
    )
    ranked, *extra = got.relevant_facts
    assert 1 <= len(extra) <= 2
    linked = {(a, b) for a, b, _ in await edges(mem)}
    for h in extra:
        assert h.parts is not None and h.parts.related > 0
        assert h.id != ranked.id
        assert tuple(sorted((int(h.id), int(ranked.id)))) in linked
    # A reader who may not see the facts' channel gets no related facts either.
    hidden = await mem.build_prompt_slice(
        GUILD, CHANNEL, "someone", "raid night", visible_channels={"999"}
    )
    assert not hidden.relevant_facts


async def test_a_facts_page_shows_its_related_facts(make_memory: Any, aiohttp_client: Any) -> None:
    mem = await make_memory()
    ids = [await lore(mem, line) for line in CLOSE[:3]]
    far = await lore(mem, FAR)
    assert await mem.embeddings.settle()
    config = DashboardConfig()
    server = TestServer(create_app(mem, config))
    await server.start_server(**runner_options(config))
    client = await aiohttp_client(server)
    related = {b if a == ids[0] else a for a, b, _ in await edges(mem) if ids[0] in (a, b)}
    assert related
    r = await client.get(f"/facts/{ids[0]}", params={"guildId": GUILD})
    assert r.status == 200
    page = await r.text()
    section = page[page.index('<ul id="related">') : page.index("Replies that used it")]
    for other in related:
        assert f"/facts/{other}?" in section
    assert f"/facts/{far}?" not in section
