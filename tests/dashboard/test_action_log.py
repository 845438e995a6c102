"""The action log: every kind of the observability contract is written, and the
log is pruned by age and by row count so it cannot grow forever."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory.config import ActionLogConfig, EmbeddingConfig, MemoryConfig
from memory.engine import Memory
from tests.fakeopenai import FakeOpenAI, Fault
from tests.helpers import GUILD, OTHER_GUILD, ScriptedExtractor, echo_fact, msg


async def _messages(mem: Any) -> list[str]:
    return [e.message for e in reversed(await mem.admin.action_log(limit=500))]


async def test_prune_drops_rows_older_than_the_keep_days(make_memory: Any, clock: Any) -> None:
    mem = await make_memory(
        embeddings="none", clock=clock, action_log=ActionLogConfig(keep_days=7, max_rows=0)
    )
    await mem.admin.log_action("bot_error", "old one")
    clock.advance(days=3)
    await mem.admin.log_action("bot_error", "old two")
    clock.advance(days=5)
    await mem.admin.log_action("bot_error", "recent")
    clock.advance(days=1)
    # "old one" is 9 days old, "old two" 6 days, "recent" 1 day.
    assert await mem.admin.prune_action_log() == 1
    assert await _messages(mem) == ["old two", "recent"]
    clock.advance(days=2)
    assert await mem.admin.prune_action_log() == 1
    assert await _messages(mem) == ["recent"]


async def test_prune_keeps_the_newest_rows_up_to_the_cap(make_memory: Any, clock: Any) -> None:
    mem = await make_memory(
        embeddings="none", clock=clock, action_log=ActionLogConfig(keep_days=0, max_rows=3)
    )
    for i in range(7):
        await mem.admin.log_action("bot_error", f"row {i}")
    assert await mem.admin.prune_action_log() == 4
    assert await _messages(mem) == ["row 4", "row 5", "row 6"]
    assert await mem.admin.prune_action_log() == 0


async def test_prune_deletes_a_large_backlog_in_chunks(make_memory: Any, clock: Any) -> None:
    mem = await make_memory(
        embeddings="none",
        clock=clock,
        action_log=ActionLogConfig(keep_days=1, max_rows=0, prune_chunk=100),
    )
    await mem.db.write(
        lambda con: con.executemany(
            "INSERT INTO action_log (kind, message, created_at) VALUES ('bot_error', ?, ?)",
            [(f"old {i}", "2020-01-01T00:00:00.000Z") for i in range(1050)],
        )
    )
    await mem.admin.log_action("bot_error", "today")
    assert await mem.admin.prune_action_log() == 1050
    assert await _messages(mem) == ["today"]


async def test_zero_settings_keep_everything(make_memory: Any, clock: Any) -> None:
    mem = await make_memory(
        embeddings="none", clock=clock, action_log=ActionLogConfig(keep_days=0, max_rows=0)
    )
    await mem.admin.log_action("bot_error", "ancient")
    clock.advance(days=4000)
    assert await mem.admin.prune_action_log() == 0
    assert await _messages(mem) == ["ancient"]


# -- embedding calls and errors ------------------------------------------------------


def _counts(rows: list[Any], source: str) -> tuple[int, int]:
    picked = [r.detail for r in rows if r.detail and r.detail["source"] == source]
    return sum(d["facts"] for d in picked), sum(d["messages"] for d in picked)


async def test_background_embedding_is_logged_once_a_minute_per_guild_with_counts(
    make_memory: Any, clock: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    mem = await make_memory(extractor=ScriptedExtractor(echo_fact), clock=clock, data_dir=data)
    assert await (await mem.ingest_message(msg("I grow tomatoes in pots."))).wait()
    assert await (await mem.ingest_message(msg("I paint murals.", guild=OTHER_GUILD))).wait()
    assert await mem.embeddings.settle()
    first = await mem.admin.action_log(kind="memory_embedding_call")
    # The first batch of each guild is logged at once.
    assert {r.guild_id for r in first} == {GUILD, OTHER_GUILD}
    assert all(r.detail and r.detail["model"] == mem.embeddings.default_model for r in first)
    for text in ("I repair old bikes.", "I brew cider at home.", "I sing in a choir."):
        assert await (await mem.ingest_message(msg(text))).wait()
        assert await mem.embeddings.settle()
    # Batches within the minute are tallied, not logged one by one.
    assert len(await mem.admin.action_log(kind="memory_embedding_call")) == len(first)
    clock.advance(seconds=61)
    assert await (await mem.ingest_message(msg("I collect stamps."))).wait()
    assert await mem.embeddings.settle()
    assert len(await mem.admin.action_log(kind="memory_embedding_call")) > len(first)
    stats = mem.embeddings.stats
    written = (stats.fact_vectors, stats.message_vectors)
    assert written == (6, 6)
    await mem.close()  # writes what is still tallied
    again = await make_memory(clock=clock, data_dir=data)
    rows = await again.admin.action_log(kind="memory_embedding_call")
    assert _counts(rows, "background") == written
    assert _counts([r for r in rows if r.guild_id == OTHER_GUILD], "background") == (1, 1)


async def test_a_reindex_run_is_logged_with_its_counts(make_memory: Any, clock: Any) -> None:
    mem = await make_memory(clock=clock)
    mem.embeddings.defer_messages = True  # as the importer does: messages wait for reindex
    for text in ("I knit scarves.", "I fly kites on the beach."):
        assert await (await mem.ingest_message(msg(text))).wait()
    assert await mem.embeddings.settle()
    report = await mem.admin.reindex()
    assert (report.facts, report.messages) == (0, 2)
    (row,) = [
        r
        for r in await mem.admin.action_log(kind="memory_embedding_call")
        if r.detail and r.detail["source"] == "reindex"
    ]
    assert row.guild_id == GUILD and (row.detail["facts"], row.detail["messages"]) == (0, 2)


async def test_embedding_errors_are_logged_at_most_once_a_minute(
    fake_openai: FakeOpenAI, clock: Any, tmp_path: Path
) -> None:
    client = fake_openai.client()
    cfg = MemoryConfig.for_data_dir(tmp_path / "data", embedding=EmbeddingConfig(provider="openai"))
    mem = await Memory.open(
        cfg, extractor=ScriptedExtractor(echo_fact), clock=clock, embedding_client=client
    )
    try:
        fake_openai.fail_next("embeddings", Fault.status(500), times=100)
        assert await (await mem.ingest_message(msg("I climb on weekends."))).wait()
        assert await mem.embeddings.settle()
        (first,) = await mem.admin.action_log(kind="memory_embedding_error")
        assert first.guild_id == GUILD and first.detail is not None
        assert first.detail["errors"] == 1 and first.detail["source"] in ("facts", "messages")
        # A failing query, within the minute: counted, not logged.
        assert await mem.embeddings.embed_query(GUILD, "who climbs on weekends") is None
        assert len(await mem.admin.action_log(kind="memory_embedding_error")) == 1
        clock.advance(seconds=61)
        assert await mem.embeddings.embed_query(GUILD, "who climbs at night") is None
        newest = (await mem.admin.action_log(kind="memory_embedding_error"))[0]
        assert newest.detail is not None and newest.detail["source"] == "query"
        held = mem.embeddings.stats.errors - 2  # the errors between the two rows
        assert newest.detail["errors"] == held + 1
        assert not await mem.admin.action_log(kind="memory_embedding_call")
        fake_openai.reset()
        assert await mem.embeddings.embed_query(GUILD, "who climbs at dawn") is not None
    finally:
        await mem.close()
        await client.close()
