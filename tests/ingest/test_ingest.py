"""The durable inbox and its queue: persist-first, dedupe, overflow, drain, order."""

from __future__ import annotations

import asyncio
from typing import Any

from memory.clock import iso
from memory.config import IngestConfig
from memory.models import Candidate
from memory.store import messages as store_messages
from tests.helpers import (
    ALICE,
    BOB,
    GUILD,
    ScriptedExtractor,
    echo_fact,
    eventually,
    journal_files,
    msg,
)


class GatedExtractor(ScriptedExtractor):
    """Every extraction waits for ``gate``: the queue fills up behind it."""

    def __init__(self, gate: asyncio.Event, fn: Any) -> None:
        super().__init__(fn)
        self.gate = gate

    async def extract_batch(self, items: Any, max_facts: int) -> Any:
        await self.gate.wait()
        return await super().extract_batch(items, max_facts)


async def _states_are(mem: Any, outs: list[Any], state: str) -> bool:
    rows = [await mem.get_message(GUILD, o.message_id) for o in outs]
    return all(r is not None and r.state == state for r in rows)


async def _facts(mem: Any, subject: str = ALICE, active: bool | None = True) -> list[Any]:
    return await mem.facts.find(GUILD, subject=subject, active=active, limit=500)


async def test_message_becomes_fact_journal_and_snapshot(make_memory: Any) -> None:
    mem = await make_memory()
    out = await mem.ingest_message(msg("I work as a nurse in Berlin and I love hiking."))
    assert out.status == "queued"
    assert await out.wait() is True
    facts = await _facts(mem)
    assert facts, "the rule extractor should find a durable fact"
    assert all(f.subject == ALICE and f.guild_id == GUILD for f in facts)
    days = await journal_files(mem)
    assert len(days) == 1
    assert "I work as a nurse in Berlin" in days[0].read_text()
    md = await mem.refresh_snapshot()
    assert "# Durable Memory Snapshot" in md and "Alice" in md


async def test_persisted_before_processing(make_memory: Any) -> None:
    slow = ScriptedExtractor(echo_fact, delay_s=0.3)
    mem = await make_memory(extractor=slow)
    m = msg("I keep bees on the roof.")
    out = await mem.ingest_message(m)
    # Acknowledged: the row is durable although extraction is still running.
    row = await mem.get_message(GUILD, m.id)
    assert row is not None and row.state == "pending"
    assert await out.wait()
    row = await mem.get_message(GUILD, m.id)
    assert row is not None and row.state == "done"


async def test_duplicate_ids_queued_in_flight_and_done_are_noops(make_memory: Any) -> None:
    ext = ScriptedExtractor(echo_fact, delay_s=0.2)
    mem = await make_memory(extractor=ext)
    m = msg("I play the cello every weekend.")
    first = await mem.ingest_message(m)
    again_queued = await mem.ingest_message(m)
    assert again_queued.status == "duplicate"
    await asyncio.sleep(0.05)  # now in flight
    again_in_flight = await mem.ingest_message(m)
    assert again_in_flight.status == "duplicate"
    assert await first.wait() and await again_queued.wait() and await again_in_flight.wait()
    after_done = await mem.ingest_message(m)
    assert after_done.status == "duplicate" and await after_done.wait()
    assert sum(len(c) for c in ext.calls) == 1, "processed exactly once"
    facts = await _facts(mem)
    assert len(facts) == 1


async def test_duplicate_after_restart_is_noop(make_memory: Any, tmp_path: Any) -> None:
    ext = ScriptedExtractor(echo_fact)
    mem = await make_memory(extractor=ext, data_dir=tmp_path / "d")
    m = msg("I collect vintage maps of Rome.")
    assert await (await mem.ingest_message(m)).wait()
    await mem.close()
    ext2 = ScriptedExtractor(echo_fact)
    mem2 = await make_memory(extractor=ext2, data_dir=tmp_path / "d")
    out = await mem2.ingest_message(m)
    assert out.status == "duplicate" and await out.wait()
    assert ext2.calls == []


async def test_overflow_drops_oldest_counts_logs_and_keeps_row(make_memory: Any) -> None:
    gate = asyncio.Event()
    mem = await make_memory(
        extractor=GatedExtractor(gate, echo_fact),
        ingest=IngestConfig(queue_capacity=5, workers=1, batch_size=1),
    )
    outs = [await mem.ingest_message(msg(f"I like fruit number {i} a lot.")) for i in range(8)]
    # One job is in flight (blocked); five are queued; the two oldest queued were dropped.
    dropped = [o for o in outs if o.done.done() and o.done.result() is False]
    assert len(dropped) == 2
    assert mem.queue.stats.dropped == 2
    # The rows are kept for replay, not lost (the mark is written off the ack path).
    assert await eventually(lambda: _states_are(mem, dropped, "dropped"))
    log = await mem.admin.action_log(kind="bot_error")
    assert any("memory_ingest_queue_overflow" in e.message for e in log)
    gate.set()
    # Once the burst has passed, dropped rows are caught up without a restart.
    assert await eventually(lambda: _states_are(mem, dropped, "done"))
    assert await mem.drain(30)


async def test_overflow_catch_up_runs_while_the_start_up_replay_is_still_reading(
    make_memory: Any,
) -> None:
    # A drop seen while the start-up replay is still running must schedule a
    # catch-up of its own: the replay may have read the rows before they were
    # marked dropped, and would otherwise leave them unprocessed.
    gate = asyncio.Event()
    mem = await make_memory(
        extractor=GatedExtractor(gate, echo_fact),
        ingest=IngestConfig(queue_capacity=3, workers=1, batch_size=1),
    )
    slow_start_up = asyncio.Event()
    mem.inbox._replay_task = asyncio.create_task(slow_start_up.wait())
    outs = [await mem.ingest_message(msg(f"I collect stamp number {i} now.")) for i in range(6)]
    dropped = [o for o in outs if o.done.done() and o.done.result() is False]
    assert len(dropped) == 2
    gate.set()
    assert await eventually(lambda: _states_are(mem, dropped, "done"))
    slow_start_up.set()


async def test_a_replay_skips_a_message_that_finished_while_it_waited_for_room(
    make_memory: Any,
) -> None:
    # The start-up replay and an overflow catch-up can read the same row; the
    # one that waits for room must not process it a second time.
    gate = asyncio.Event()
    ext = GatedExtractor(gate, echo_fact)
    mem = await make_memory(
        extractor=ext, ingest=IngestConfig(queue_capacity=1, workers=1, batch_size=1)
    )
    await mem.ingest_message(msg("I knit scarves on the train."))
    await mem.ingest_message(msg("I knit hats on the bus."))  # the queue is full now
    late = msg("I knit socks at home.")
    waiting = asyncio.create_task(mem.queue.enqueue_replay(late))
    await asyncio.sleep(0)
    assert not waiting.done(), "waits for room"
    mem.queue._remember_done(late.id, True)  # the other replay finished it meanwhile
    replayed = mem.queue.stats.replayed
    gate.set()
    fut = await waiting
    assert fut is not None and await fut is True
    assert await mem.drain(30)
    assert mem.queue.stats.replayed == replayed
    assert all(late.content not in call for call in ext.calls)


async def test_dropped_messages_are_replayed_on_restart(make_memory: Any, tmp_path: Any) -> None:
    gate = asyncio.Event()
    mem = await make_memory(
        extractor=GatedExtractor(gate, echo_fact),
        ingest=IngestConfig(queue_capacity=2, workers=1, batch_size=1),
        data_dir=tmp_path / "d",
    )
    ids = []
    for i in range(6):
        o = await mem.ingest_message(msg(f"I grow tomato variety {i} at home."))
        ids.append(o.message_id)
    gate.set()
    await mem.drain(30)
    await mem.close()
    mem2 = await make_memory(extractor=ScriptedExtractor(echo_fact), data_dir=tmp_path / "d")

    async def all_done() -> bool:
        rows = [await mem2.get_message(GUILD, i) for i in ids]
        return all(row is not None and row.state == "done" for row in rows)

    # The start-up replay runs in the background: wait for its outcome, not
    # for a guess at how long it takes.
    assert await eventually(all_done)


async def test_drain_waits_for_workers_and_times_out(make_memory: Any) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(echo_fact, delay_s=0.3))
    await mem.ingest_message(msg("I am learning Japanese this year."))
    assert await mem.drain(0.1) is False  # minimum 0.1 s, still busy
    assert await mem.drain(30) is True
    assert mem.queue.idle()


async def test_close_drains_accepted_messages(make_memory: Any, tmp_path: Any) -> None:
    mem = await make_memory(
        extractor=ScriptedExtractor(echo_fact, delay_s=0.05), data_dir=tmp_path / "d"
    )
    outs = [await mem.ingest_message(msg(f"I bake sourdough bread type {i}.")) for i in range(10)]
    await mem.close()
    assert all(o.done.result() for o in outs)


async def test_per_author_order_is_kept_with_batching(make_memory: Any) -> None:
    seen: list[str] = []

    def record(text: str, author: str) -> list[Candidate]:
        seen.append(text)
        return echo_fact(text, author)

    mem = await make_memory(
        extractor=ScriptedExtractor(record, delay_s=0.01),
        ingest=IngestConfig(workers=4, batch_size=3),
    )
    outs = []
    for i in range(30):
        author = ALICE if i % 2 == 0 else BOB
        channel = str(900 + (i % 3))
        outs.append(
            await mem.ingest_message(
                msg(f"note {i:02d} about gardens", author=author, channel=channel)
            )
        )
    for o in outs:
        assert await o.wait()
    # Facts are written in message order per author: ids grow with the note number.
    for author in (ALICE, BOB):
        facts = sorted(await _facts(mem, author), key=lambda f: f.id)
        numbers = [int(f.fact.split("note ")[1][:2]) for f in facts]
        assert numbers == sorted(numbers), numbers


async def test_extraction_failure_is_logged_and_the_message_kept_for_a_retry(
    make_memory: Any,
) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(echo_fact, fail=True))
    m = msg("I run a small bakery in Lyon.")
    assert await (await mem.ingest_message(m)).wait() is False
    row = await mem.get_message(GUILD, m.id)
    assert row is not None and row.state == "retry"
    errors = await mem.admin.action_log(kind="memory_extract_error")
    assert errors and m.id in str(errors[0].detail)
    assert "Lyon" in (await journal_files(mem))[0].read_text()


async def test_archive_keeps_newest_80_per_subject(make_memory: Any, clock: Any) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(echo_fact), clock=clock)
    for i in range(85):
        clock.advance(seconds=1)
        assert await (await mem.ingest_message(msg(f"I own board game number {i:03d}."))).wait()
    active = await _facts(mem, active=True)
    archived = await _facts(mem, active=False)
    assert len(active) == 80 and len(archived) == 5
    assert {f.fact for f in archived} == {
        f"Alice said I own board game number {i:03d}." for i in range(5)
    }
    hist = await mem.facts.history(GUILD, archived[0].id)
    assert [h.event for h in hist] == ["add", "archive"]


async def test_reextraction_updates_and_reactivates(make_memory: Any, clock: Any) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(echo_fact), clock=clock)
    text = "I drink green tea every morning."
    assert await (await mem.ingest_message(msg(text))).wait()
    fact = (await _facts(mem))[0]
    await mem.facts.set_active(GUILD, fact.id, False)
    clock.advance(hours=1)
    assert await (await mem.ingest_message(msg(text))).wait()  # new message id, same fact
    again = await mem.facts.get(GUILD, fact.id)
    assert again is not None and again.is_active
    events = [h.event for h in await mem.facts.history(GUILD, fact.id)]
    assert events == ["add", "archive", "update"]
    assert len(await _facts(mem)) == 1


async def test_history_rows_are_stamped_by_the_injected_clock(make_memory: Any, clock: Any) -> None:
    clock.now = clock.now.replace(year=2031)
    mem = await make_memory(extractor=ScriptedExtractor(echo_fact), clock=clock)
    text = "I keep bees on the roof."
    assert await (await mem.ingest_message(msg(text))).wait()
    added_at = iso(clock.now)
    fact = (await _facts(mem))[0]
    clock.advance(hours=2)
    assert await (await mem.ingest_message(msg(text))).wait()
    updated_at = iso(clock.now)
    hist = await mem.facts.history(GUILD, fact.id)
    assert [(h.event, h.created_at) for h in hist] == [
        ("add", added_at),
        ("update", updated_at),
    ]


async def test_other_bots_messages_are_extracted_unless_bot_ingestion_is_off(
    make_memory: Any, tmp_path: Any
) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(echo_fact))
    bot = "666666666666666666"
    m = msg("I am the scoreboard bot for the chess club.", author=bot, name="ScoreBot", is_bot=True)
    assert await (await mem.ingest_message(m)).wait()
    (fact,) = await _facts(mem, subject=bot)
    assert "chess club" in fact.fact
    await mem.guilds.set_setting(GUILD, "ingest_bots", "false")
    out = await mem.ingest_message(msg("I am also a trivia bot.", author=bot, is_bot=True))
    assert out.status == "rejected"
    off = await make_memory(
        data_dir=tmp_path / "off", ingest=IngestConfig(ingest_bot_messages=False)
    )
    out = await off.ingest_message(msg("I am the trivia bot.", author=bot, is_bot=True))
    assert out.status == "rejected"


async def test_rejections_are_clear_and_counted(make_memory: Any) -> None:
    mem = await make_memory()
    out = await mem.ingest_message(msg("hello there", guild=None))
    assert out.status == "rejected" and "missing guild" in (out.reason or "")
    out = await mem.ingest_message(msg("hello there", id="not an id!"))
    assert out.status == "rejected" and "message id" in (out.reason or "")
    out = await mem.ingest_message(msg("hello", author="x" * 100))
    assert out.status == "rejected"
    out = await mem.ingest_message(msg("hello", created_at="yesterday-ish"))
    assert out.status == "rejected" and "ISO" in (out.reason or "")
    assert mem.admin.counters()["ingest_rejected"] == 4
    assert not await out.wait()


async def test_nasty_content_never_crashes_and_loses_nothing(make_memory: Any) -> None:
    mem = await make_memory()
    nasty = [
        "",
        " ",
        "x" * 100_000,
        "ctrl\x00\x01\x02\x1b[31m chars I like tea\x7f",
        "zero\u200bwidth \u200e\u200f and I love \u202eRTL\u202c text",
        "lone surrogate \ud800 I am a teacher",
        "emoji 🎉 <:party:123456789012345678> <@444444444444444444>",
        "'; DROP TABLE messages; -- I like SQL",
        "<script>alert(1)</script> I like HTML",
        '{"broken": json',
        "Москва — я живу в Москве",
        "我住在东京，我喜欢寿司",
    ]
    outs = [await mem.ingest_message(msg(t)) for t in nasty]
    assert all(o.status == "queued" for o in outs)
    for o in outs:
        assert await o.wait() is True
    states = await mem.db.read(store_messages.message_states, [o.message_id for o in outs])
    assert len(states) == len(nasty)
    assert {s for s, _ in states.values()} <= {"done", "skipped"}
    big = await mem.get_message(GUILD, outs[2].message_id)
    assert big is not None and len(big.content) == 2000
    journal = (await journal_files(mem))[0].read_text()
    assert "\x00" not in journal and "\ud800" not in journal
    md = await mem.refresh_snapshot()
    assert md.startswith("# Durable Memory Snapshot")


async def test_remember_line_says_whether_it_added_or_knew_it(make_memory: Any, clock: Any) -> None:
    # The clock stands still, so the fact's timestamps cannot tell a new line
    # from a repeated one: only the store knows, and lore.remember passes it on.
    mem = await make_memory(clock=clock)
    line = "the summer meetup is in Zermatt"
    first = await mem.lore.remember(GUILD, line, source_text=line)
    again = await mem.lore.remember(GUILD, line, source_text=line)
    assert first is not None and again is not None
    assert (first.event, again.event) == ("add", "noop")
    assert again.fact.id == first.fact.id
    assert again.fact.created_at == again.fact.updated_at
    await mem.traces.record(GUILD, "c1", "m1", stored=[first, again])
    traces = await mem.traces.for_message(GUILD, "m1")
    assert sorted(t.action for t in traces) == ["stored", "updated"]


async def test_opened_without_ingest_it_leaves_the_inbox_to_the_bot(tmp_path: Any) -> None:
    # What CLI commands beside a running bot use: reads, edits and searches,
    # but no queue, no workers, no replay of the bot's unfinished messages.
    from memory import Memory, MemoryConfig
    from memory.clock import iso, system_clock
    from memory.config import EmbeddingConfig

    cfg = MemoryConfig.for_data_dir(tmp_path / "d", embedding=EmbeddingConfig(provider="none"))
    left = msg("I grow tomatoes on my balcony.")
    quiet = await Memory.open(cfg, ingest=False)
    await quiet.db.write(store_messages.insert_messages, [left], iso(system_clock()))
    refused = await quiet.ingest_message(msg("I also keep bees."))
    assert refused.status == "rejected" and refused.reason == "opened without ingest"
    assert not await refused.wait()
    await quiet.guilds.set_names(GUILD, guild_name="Tomato Club")
    assert [g["guild_id"] for g in await quiet.guilds.overview()] == [GUILD]
    row = await quiet.get_message(GUILD, left.id)
    assert row is not None and row.state == "pending"
    await quiet.close()
    assert not quiet.snapshot_path.exists(), "a read-only close writes no snapshot"
    assert not quiet.db.is_open

    # The bot (or any engine opened with ingest) replays it.
    mem = await Memory.open(cfg, extractor=ScriptedExtractor(echo_fact))
    try:

        async def processed() -> bool:
            row = await mem.get_message(GUILD, left.id)
            return row is not None and row.state == "done"

        assert await eventually(processed)
    finally:
        await mem.close()
