"""The daily series and the request log, on every backend: what is counted on
which day, that a restart resets nothing, that two engines on one database
add up, and the request log's filters, pages and prune."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

from memory.config import MemoryConfig, UsageConfig
from memory.engine import Memory
from memory.extract.llm import LLMExtractor
from memory.store import usage as store_usage
from memory.usage.recorder import safe_reason
from tests.conftest import FakeClock
from tests.fakeopenai import FakeOpenAI, Fault
from tests.helpers import BOB, GUILD, OTHER_GUILD, msg


def _on(day: str, hour: int = 10) -> str:
    return f"{day}T{hour:02d}:00:00.000Z"


def _by_day(window: Any, name: str) -> dict[str, float]:
    return {d: v for d, v in zip(window.days, window.series[name], strict=True) if v}


async def _history(mem: Memory) -> None:
    """Four messages over three days of early 2024, the last contradicting
    the first (a supersede on its own day)."""
    for day, text in (
        ("2024-02-01", "I live in Berlin."),
        ("2024-02-01", "I work as a nurse."),
        ("2024-02-03", "hello there everyone"),
        ("2024-02-05", "I live in Oslo now."),
    ):
        outcome = await mem.ingest_message(msg(text, created_at=_on(day)))
        await outcome.wait()
    await mem.settle()


async def test_history_counts_on_its_own_days_and_the_work_on_the_day_it_was_done(
    make_memory: Callable[..., Any], clock: FakeClock
) -> None:
    mem = await make_memory(embeddings="none", clock=clock)
    await _history(mem)
    old = await mem.usage.window(GUILD, 30, date(2024, 2, 10))
    assert _by_day(old, "messages") == {"2024-02-01": 2, "2024-02-03": 1, "2024-02-05": 1}
    assert _by_day(old, "facts_added") == {"2024-02-01": 2, "2024-02-05": 1}
    assert _by_day(old, "facts_superseded") == {"2024-02-05": 1}
    assert old.message_days == ("2024-02-01", "2024-02-05")
    # The extraction calls were made today (the clock's day), not in 2024.
    assert old.total("extractions") == 0
    today = await mem.usage.window(GUILD, 30)
    assert today.days[-1] == "2026-11-22" and len(today.days) == 30
    assert today.total("messages") == 0
    assert _by_day(today, "extractions") == {"2026-11-22": 4}
    # All guilds together, and another guild on its own.
    assert (await mem.usage.window(None, 30, date(2024, 2, 10))).total("messages") == 4
    assert (await mem.usage.window(OTHER_GUILD, 30, date(2024, 2, 10))).total("messages") == 0


async def test_the_series_and_the_request_log_survive_a_restart(
    make_memory: Callable[..., Any], clock: FakeClock, tmp_path: Path
) -> None:
    data = tmp_path / "restart"
    mem = await make_memory(embeddings="none", clock=clock, data_dir=data)
    await _history(mem)
    await mem.search(GUILD, "where does Alice live", consumer="api")
    await mem.search(GUILD, "zzqxv nothing matches", consumer="api")
    mem.usage.record_reply(
        GUILD, 850.0, model="chat-model", prompt_tokens=120, completion_tokens=30
    )
    before_old = await mem.usage.window(GUILD, 90, date(2024, 2, 10))
    before_now = await mem.usage.window(GUILD, 30)
    assert before_now.total("searches") == 2 and before_now.total("replies") == 1
    await mem.close()  # writes what the recorder held

    again = await make_memory(embeddings="none", clock=clock, data_dir=data)
    assert await again.usage.window(GUILD, 90, date(2024, 2, 10)) == before_old
    after_now = await again.usage.window(GUILD, 30)
    assert after_now == before_now
    assert after_now.total("tokens_prompt") == 120 and after_now.total("reply_ms") == 850.0
    rows = await again.usage.requests(guild_id=GUILD)
    assert [(r.kind, r.outcome) for r in rows[:3]] == [
        ("reply", "ok"),
        ("search", "empty"),
        ("search", "ok"),
    ]
    assert rows[0].model == "chat-model" and rows[0].prompt_tokens == 120
    assert rows[1].detail == "via api, 0 hits" and rows[1].model == "lexical"
    # The words searched for are nowhere in the log.
    assert not any("Alice" in (r.detail or "") or "zzqxv" in (r.detail or "") for r in rows)


async def test_two_engines_on_one_database_add_up(
    make_memory: Callable[..., Any],
    clock: FakeClock,
    tmp_path: Path,
    database_url_for: Callable[[Path], str | None],
) -> None:
    """A bot process and a dashboard process (or two shards) on one database:
    each counts what it does, the totals are the sum, either sees them."""
    data = tmp_path / "shared"
    bot = await make_memory(embeddings="none", clock=clock, data_dir=data)
    cfg = MemoryConfig.for_data_dir(data, database_url=database_url_for(data))
    cfg = replace(cfg, embedding=replace(cfg.embedding, provider="none"))
    dash = Memory(cfg, extractor=None, clock=clock)
    await dash.start(ingest=False)
    try:
        await _history(bot)
        for _ in range(3):
            await bot.search(GUILD, "where does Alice live")
        for _ in range(5):
            await dash.search(GUILD, "what does Alice do")
        await bot.usage.flush()
        await dash.usage.flush()
        for mem in (bot, dash):
            w = await mem.usage.window(GUILD, 30)
            assert w.total("searches") == 8
            assert w.total("extractions") == 4
            assert (await mem.usage.window(GUILD, 30, date(2024, 2, 10))).total("messages") == 4
            assert len(await mem.usage.requests(kind="search")) == 8
    finally:
        await dash.close()


async def test_the_fold_changes_no_total(make_memory: Callable[..., Any], clock: FakeClock) -> None:
    mem = await make_memory(embeddings="none", clock=clock)
    await _history(mem)
    before = await mem.usage.window(GUILD, 30, date(2024, 2, 10))
    # Increments as the write path makes them, then a fold.
    await mem.db.write(lambda con: store_usage.add(con, [(GUILD, "2024-02-03", "messages", 2)]))
    assert await mem.db.write(store_usage.fold) == 1
    after = await mem.usage.window(GUILD, 30, date(2024, 2, 10))
    assert _by_day(after, "messages") == {**_by_day(before, "messages"), "2024-02-03": 3}
    pending = await mem.db.read(
        lambda con: con.execute("SELECT count(*) FROM usage_delta").fetchone()[0]
    )
    assert pending == 0


async def test_the_request_log_filters_pages_and_prunes(
    make_memory: Callable[..., Any], clock: FakeClock
) -> None:
    mem = await make_memory(
        embeddings="none",
        clock=clock,
        usage=UsageConfig(request_log_keep_days=7, request_log_max_rows=6, prune_chunk=2),
    )
    for i in range(4):
        mem.usage.record_reply(GUILD, 100.0 + i, model="chat-model")
    mem.usage.record_reply(OTHER_GUILD, 300.0, model="chat-model", error=TimeoutError("slow"))
    clock.advance(days=3)
    await mem.search(GUILD, "anything at all")
    await mem.usage.flush()
    since_day3 = "2026-11-25T00:00:00.000Z"

    assert len(await mem.usage.requests()) == 6
    assert [r.kind for r in await mem.usage.requests(kind="search")] == ["search"]
    failed = await mem.usage.requests(outcome="error")
    assert [(r.guild_id, r.detail) for r in failed] == [(OTHER_GUILD, "TimeoutError: slow")]
    assert len(await mem.usage.requests(guild_id=GUILD)) == 5
    assert [r.kind for r in await mem.usage.requests(since=since_day3)] == ["search"]
    assert len(await mem.usage.requests(until=since_day3)) == 5
    page1 = await mem.usage.requests(limit=4)
    page2 = await mem.usage.requests(limit=4, before_id=page1[-1].id)
    assert len(page1) == 4 and len(page2) == 2
    assert {r.id for r in page1}.isdisjoint(r.id for r in page2)
    assert [r.id for r in page1 + page2] == sorted((r.id for r in page1 + page2), reverse=True)

    # The series keep what the log prunes.
    mem.usage.record_reply(GUILD, 10.0, model="chat-model")
    await mem.usage.flush()
    assert await mem.usage.prune_requests() == 1  # beyond the newest 6 rows
    clock.advance(days=6)  # the first five are now older than 7 days
    assert await mem.usage.prune_requests() == 4
    assert len(await mem.usage.requests()) == 2
    assert (await mem.usage.window(None, 30)).total("replies") == 6


async def test_llm_extraction_logs_its_model_tokens_and_failures(
    make_memory: Callable[..., Any], clock: FakeClock, fake_openai: FakeOpenAI
) -> None:
    client = fake_openai.client()
    try:
        extractor = LLMExtractor(client, "extract-model", timeout_s=5.0)
        mem = await make_memory(embeddings="none", clock=clock, extractor=extractor)
        fake_openai.script_chat(
            '{"facts": [{"fact": "Bob works as a nurse.", "type": "profile", '
            '"confidence": 0.9, "evidence": "I work as a nurse"}]}'
        )
        done = await mem.ingest_message(msg("I work as a nurse", author=BOB, name="Bob"))
        await done.wait()
        fake_openai.fail_next("chat", Fault.status(500), times=5)
        failed = await mem.ingest_message(msg("I play the cello", author=BOB, name="Bob"))
        await failed.wait()
        await mem.settle()
        rows = await mem.usage.requests(kind="extraction")
        assert [r.outcome for r in rows] == ["error", "ok"]
        ok, error = rows[1], rows[0]
        assert ok.model == "extract-model" and ok.detail == "1 message, 1 candidate"
        assert ok.prompt_tokens and ok.prompt_tokens > 0 and ok.completion_tokens
        assert error.model == "extract-model" and error.detail is not None
        assert error.detail.startswith("ExtractionError") and "cello" not in error.detail
        w = await mem.usage.window(GUILD, 30)
        assert w.total("extractions") == 2 and w.total("extraction_errors") == 1
        assert w.total("tokens_prompt") >= ok.prompt_tokens
    finally:
        await client.close()


async def test_a_guild_purge_takes_its_series_and_requests(
    make_memory: Callable[..., Any], clock: FakeClock
) -> None:
    mem = await make_memory(embeddings="none", clock=clock)
    await _history(mem)
    await mem.search(GUILD, "where does Alice live")
    mem.usage.record_reply(OTHER_GUILD, 5.0, model="m")
    await mem.usage.flush()
    await mem.retention.purge_guild(GUILD)
    assert (await mem.usage.window(GUILD, 30, date(2024, 2, 10))).total("messages") == 0
    assert (await mem.usage.window(GUILD, 30)).total("searches") == 0
    assert await mem.usage.requests(guild_id=GUILD) == []
    assert len(await mem.usage.requests(guild_id=OTHER_GUILD)) == 1


def test_an_error_in_the_log_keeps_no_quoted_text() -> None:
    exc = ValueError("extractor reply is not a JSON object: 'Alice said she is pregnant'")
    assert safe_reason(exc) == "ValueError: extractor reply is not a JSON object"
    assert safe_reason(TimeoutError()) == "TimeoutError"
    http = RuntimeError("chat completion failed (m): Error code: 500 - {'error': 'boom'}")
    assert safe_reason(http) == "RuntimeError: chat completion failed (m): Error code: 500"
