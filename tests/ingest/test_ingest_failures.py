"""When processing fails: extraction outages wait and retry with back-off, a
message that cannot be processed fails alone (quarantined, retryable by an
operator), and timestamps outside Discord's era are refused up front.

Real engine on tmp_path; the LLM extractor talks to the fake OpenAI server
through the real ``openai`` client; the engine clock is a ``FakeClock``, so a
back-off elapses when the test moves the clock, never by sleeping.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory.clock import iso
from memory.config import IngestConfig
from memory.extract.llm import LLMExtractor
from tests.fakeopenai import FakeOpenAI, Fault, echo_facts_reply
from tests.helpers import (
    ALICE,
    BOB,
    GUILD,
    ScriptedExtractor,
    echo_fact,
    eventually,
    inspect_db,
    is_postgresql,
    journal_files,
    msg,
)


def _ingest_cfg(**kw: Any) -> IngestConfig:
    # A quick poll so the retry loop notices the moved clock at once.
    base: dict[str, Any] = {"retry_base_s": 30.0, "retry_poll_s": 0.02, "batch_wait_s": 0.0}
    return IngestConfig(**{**base, **kw})


async def _state(mem: Any, message_id: str) -> str | None:
    row = await mem.get_message(GUILD, message_id)
    return None if row is None else str(row.state)


async def _facts(mem: Any, subject: str = ALICE) -> list[str]:
    return [f.fact for f in await mem.facts.find(GUILD, subject=subject, limit=100)]


# A call that should answer is given all the time a loaded machine needs (a
# 0.5 s timeout once failed a healthy call at a load average of 13–16); only
# a call meant to time out gets a short one, against a server that never
# answers within the test.
ANSWER_TIMEOUT_S = 30.0
SHORT_TIMEOUT_S = 0.5
NEVER_S = 600.0


async def _llm_memory(
    make_memory: Any,
    fake: FakeOpenAI,
    clock: Any,
    timeout_s: float = ANSWER_TIMEOUT_S,
    **ingest: Any,
) -> Any:
    fake.chat_handler = echo_facts_reply
    extractor = LLMExtractor(fake.client(), "gpt-4o-mini", timeout_s=timeout_s)
    return await make_memory(
        extractor=extractor, clock=clock, embeddings="none", ingest=_ingest_cfg(**ingest)
    )


# -- extraction outages ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        Fault.status(500),
        Fault.status(429),
        Fault.timeout(NEVER_S),
        Fault.malformed(),
        Fault.garbage("Sorry, I am overloaded right now."),
        Fault.garbage('{"facts": "not a list"}'),
    ],
    ids=["500", "429", "timeout", "non-json-body", "non-json-content", "wrong-shape"],
)
async def test_failed_extraction_waits_for_a_retry_and_then_gets_its_facts(
    make_memory: Any, fake_openai: FakeOpenAI, clock: Any, fault: Fault
) -> None:
    fake_openai.fail_next("chat", fault)
    timeout = SHORT_TIMEOUT_S if fault.kind == "timeout" else ANSWER_TIMEOUT_S
    mem = await _llm_memory(make_memory, fake_openai, clock, timeout_s=timeout)
    m = msg("I restore old sailing boats in Kiel.")
    out = await mem.ingest_message(m)
    assert await out.wait() is False, "not processed: its extraction failed"
    mem.extractor.timeout_s = ANSWER_TIMEOUT_S  # the retry must not time out
    assert await _state(mem, m.id) == "retry"
    assert await _facts(mem) == []
    [waiting] = await mem.inbox.failures()
    assert waiting.id == m.id and waiting.state == "retry" and waiting.attempts == 1
    assert waiting.retry_at is not None and _seconds(waiting.retry_at, clock.now) == 30
    assert waiting.reason and "extraction failed" in waiting.reason
    errors = await mem.admin.action_log(kind="memory_extract_error")
    assert errors and m.id in str(errors[0].detail)
    # The journal line is written once, whatever the extraction does.
    assert "sailing boats" in (await journal_files(mem))[0].read_text()

    # Nothing happens before the back-off has passed ...
    await asyncio.sleep(0.1)
    assert len(fake_openai.chat_requests()) == 1
    # ... and once it has, the running engine retries on its own.
    clock.advance(seconds=31)
    assert await eventually(lambda: _state_is(mem, m.id, "done"))
    assert await _facts(mem) == ["Alice said I restore old sailing boats in Kiel."]
    assert await mem.inbox.failures() == []
    text = (await journal_files(mem))[0].read_text()
    assert text.count("sailing boats") == 1


async def _state_is(mem: Any, message_id: str, state: str) -> bool:
    return await _state(mem, message_id) == state


async def test_back_off_doubles_and_gives_up_at_the_cap(
    make_memory: Any, fake_openai: FakeOpenAI, clock: Any
) -> None:
    fake_openai.fail_next("chat", Fault.status(503), times=100)
    mem = await _llm_memory(make_memory, fake_openai, clock, retry_max_attempts=3)
    m = msg("I brew cider from my own apples.")
    await (await mem.ingest_message(m)).wait()
    first = (await mem.inbox.failures())[0]
    assert first.attempts == 1 and first.state == "retry"
    clock.advance(seconds=31)
    assert await eventually(lambda: _attempts_are(mem, 2))
    second = (await mem.inbox.failures())[0]
    assert second.state == "retry"
    # 30 s, then 60 s: the second wait is twice the first.
    assert second.retry_at is not None and _seconds(second.retry_at, clock.now) == 60
    clock.advance(seconds=61)
    assert await eventually(lambda: _state_is(mem, m.id, "failed"))
    [failed] = await mem.inbox.failures()
    assert failed.attempts == 3 and failed.retry_at is None
    assert failed.reason and "gave up after 3 attempts" in failed.reason and "503" in failed.reason
    # Shown to the operator, with the way out.
    health = await mem.admin.health()
    assert health["messages_failed"] == 1 and not health["ok"]
    assert any("guildlore retry" in w for w in health["warnings"])
    assert mem.admin.counters()["ingest_failed"] >= 1

    # No further attempts on its own, however long it waits ...
    calls = len(fake_openai.chat_requests())
    clock.advance(days=30)
    await asyncio.sleep(0.1)
    assert len(fake_openai.chat_requests()) == calls
    # ... until the operator asks (the LLM is back).
    fake_openai.reset()
    assert await mem.inbox.retry_failed() == 1
    assert await eventually(lambda: _state_is(mem, m.id, "done"))
    assert await _facts(mem) == ["Alice said I brew cider from my own apples."]


def _seconds(at: str, now: datetime) -> float:
    return (datetime.fromisoformat(at.replace("Z", "+00:00")) - now).total_seconds()


async def _attempts_are(mem: Any, n: int) -> bool:
    rows = await mem.inbox.failures()
    return bool(rows) and rows[0].attempts == n


async def test_messages_waiting_for_a_retry_are_retried_at_start_up(
    make_memory: Any, fake_openai: FakeOpenAI, clock: Any, tmp_path: Path
) -> None:
    fake_openai.fail_next("chat", Fault.status(500))
    data = tmp_path / "d"
    fake_openai.chat_handler = echo_facts_reply
    extractor = LLMExtractor(fake_openai.client(), "gpt-4o-mini", timeout_s=ANSWER_TIMEOUT_S)
    cfg = _ingest_cfg(retry_base_s=3600.0)
    mem = await make_memory(
        extractor=extractor, clock=clock, embeddings="none", ingest=cfg, data_dir=data
    )
    m = msg("I repair antique clocks in Basel.")
    assert await (await mem.ingest_message(m)).wait() is False
    assert await _state(mem, m.id) == "retry"
    await mem.close()
    # A restart does not wait for the back-off: it is the operator's "try again".
    mem2 = await make_memory(
        extractor=extractor, clock=clock, embeddings="none", ingest=cfg, data_dir=data
    )
    assert await eventually(lambda: _state_is(mem2, m.id, "done"))
    assert await _facts(mem2) == ["Alice said I repair antique clocks in Basel."]


# -- one bad message fails alone ----------------------------------------------------------------


async def test_a_row_with_an_unusable_timestamp_fails_alone(
    make_memory: Any, tmp_path: Path
) -> None:
    # An older version stored a year-999 timestamp unpadded; every start then
    # failed the whole batch it was in, for ever.
    data = tmp_path / "d"
    mem = await make_memory(data_dir=data, embeddings="none")
    await mem.close()
    good = [msg(f"I paint miniature ships number {i}.") for i in range(3)]
    bad = msg("I was born in the year nine hundred ninety nine.")
    rows = [good[0], bad, good[1], good[2]]
    now = iso(datetime.now(UTC))

    def insert(con: Any) -> None:
        for m in rows:
            con.execute(
                "INSERT INTO messages (id, guild_id, channel_id, author_id, author_name, "
                "content, created_at, source, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    m.id,
                    m.guild_id,
                    m.channel_id,
                    m.author_id,
                    m.author_name,
                    m.content,
                    "999-05-01T10:00:00.000Z" if m is bad else m.created_at,
                    "text",
                    now,
                ),
            )

    con = inspect_db(mem.config, writable=True)
    con.execute("BEGIN")
    insert(con)
    con.execute("COMMIT")
    con.close()

    ext = ScriptedExtractor(echo_fact)
    mem = await make_memory(
        extractor=ext, data_dir=data, embeddings="none", ingest=_ingest_cfg(batch_size=16)
    )
    for m in good:
        assert await eventually(lambda m=m: _state_is(mem, m.id, "done")), m.content
    assert await eventually(lambda: _state_is(mem, bad.id, "failed"))
    assert sorted(await _facts(mem)) == sorted(f"Alice said {m.content[:-1]}." for m in good)
    [failed] = await mem.inbox.failures()
    assert failed.id == bad.id and failed.reason and "999-05-01" in failed.reason
    log = await mem.admin.action_log(kind="bot_error")
    assert any(bad.id in e.message for e in log)
    await mem.close()

    # Quarantined: the next start does not try it again.
    ext2 = ScriptedExtractor(echo_fact)
    mem = await make_memory(extractor=ext2, data_dir=data, embeddings="none")
    await asyncio.sleep(0.2)
    assert await mem.drain(30)
    assert ext2.calls == [] and await _state(mem, bad.id) == "failed"


def _create_poison_trigger(con: Any) -> None:
    """A trigger that fails every insert of a fact containing "poison"."""
    if is_postgresql(con):
        con.execute(
            "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "RAISE EXCEPTION 'poisoned fact'; END $$"
        )
        con.execute(
            "CREATE TRIGGER poison BEFORE INSERT ON memory_facts FOR EACH ROW "
            "WHEN (NEW.fact LIKE '%poison%') EXECUTE FUNCTION poison()"
        )
        return
    con.execute(
        "CREATE TRIGGER poison BEFORE INSERT ON memory_facts WHEN new.fact LIKE '%poison%' "
        "BEGIN SELECT RAISE(ABORT, 'poisoned fact'); END"
    )


def _drop_poison_trigger(con: Any) -> None:
    if is_postgresql(con):
        con.execute("DROP TRIGGER poison ON memory_facts")
        con.execute("DROP FUNCTION poison()")
        return
    con.execute("DROP TRIGGER poison")


async def test_a_message_whose_write_fails_does_not_take_its_batch_down(
    make_memory: Any,
) -> None:
    gate = asyncio.Event()

    class Gated(ScriptedExtractor):
        async def extract_batch(self, items: Any, max_facts: int) -> Any:
            await gate.wait()
            return await super().extract_batch(items, max_facts)

    mem = await make_memory(
        extractor=Gated(echo_fact),
        embeddings="none",
        ingest=_ingest_cfg(workers=1, batch_size=8, batch_wait_s=0.05),
    )
    # A real failure of one message's fact write, raised by the database.
    await mem.db.write(_create_poison_trigger)
    texts = ["I grow basil on my window.", "I keep a poison dart frog.", "I sing in a choir."]
    outs = [
        await mem.ingest_message(msg(t, author=ALICE if i else BOB)) for i, t in enumerate(texts)
    ]
    gate.set()
    results = [await o.wait() for o in outs]
    assert results == [True, False, True]
    assert await _state(mem, outs[0].message_id) == "done"
    assert await _state(mem, outs[2].message_id) == "done"
    assert await _state(mem, outs[1].message_id) == "failed"
    assert await _facts(mem) == ["Alice said I sing in a choir."]
    [failed] = await mem.inbox.failures()
    assert failed.reason and "poisoned fact" in failed.reason
    log = await mem.admin.action_log(kind="bot_error")
    assert any(outs[1].message_id in e.message for e in log)

    # The operator fixes the cause and retries it.
    await mem.db.write(_drop_poison_trigger)
    assert await mem.inbox.retry_failed() == 1
    assert await eventually(lambda: _state_is(mem, outs[1].message_id, "done"))
    assert "Alice said I keep a poison dart frog." in await _facts(mem)


async def test_a_failed_batch_is_logged_and_retried_without_a_restart(
    make_memory: Any, clock: Any
) -> None:
    class BrokenOnce(ScriptedExtractor):
        """A bug outside the extractor's own error type, on the first call only."""

        async def extract_batch(self, items: Any, max_facts: int) -> Any:
            if not self.calls:
                self.calls.append([])
                raise RuntimeError("extractor bug")
            return await super().extract_batch(items, max_facts)

    mem = await make_memory(
        extractor=BrokenOnce(echo_fact), clock=clock, embeddings="none", ingest=_ingest_cfg()
    )
    m = msg("I climb sea cliffs in Cornwall.")
    assert await (await mem.ingest_message(m)).wait() is False
    log = await mem.admin.action_log(kind="bot_error")
    assert any(
        "memory_ingest_batch_failed" in e.message and "extractor bug" in e.message for e in log
    )
    assert await _state(mem, m.id) == "retry"
    clock.advance(seconds=31)
    assert await eventually(lambda: _state_is(mem, m.id, "done"))
    assert await _facts(mem) == ["Alice said I climb sea cliffs in Cornwall."]


# -- timestamps outside Discord's era -----------------------------------------------------------


@pytest.mark.parametrize(
    "stamp",
    [
        "0999-05-01T10:00:00Z",
        "1970-01-01T00:00:00Z",
        "2014-12-31T23:59:59Z",
        "2200-01-01T00:00:00Z",
    ],
)
async def test_timestamps_outside_discords_era_are_refused(make_memory: Any, stamp: str) -> None:
    mem = await make_memory(embeddings="none")
    out = await mem.ingest_message(msg("I like old calendars.", created_at=stamp))
    assert out.status == "rejected"
    assert "Discord" in (out.reason or "") and "2015-01-01" in (out.reason or "")
    ok = await mem.ingest_message(msg("I like new calendars.", created_at="2015-01-01T00:00:00Z"))
    assert ok.status == "queued" and await ok.wait()


def test_iso_pads_the_year() -> None:
    assert iso(datetime(999, 5, 1, tzinfo=UTC)) == "0999-05-01T00:00:00.000Z"
    assert iso(datetime(2024, 5, 1, 12, 30, 1, 123456, tzinfo=UTC)) == "2024-05-01T12:30:01.123Z"


async def test_a_failure_of_this_run_waits_its_back_off_even_when_the_start_replay_reads_late(
    make_memory: Any, fake_openai: FakeOpenAI, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start-up replay queues what an earlier run left unfinished,
    "retry" rows included. When its read of the inbox is slow (PostgreSQL
    under load), it can see a message that *this* run has just tried and
    failed: that one must wait for its back-off, not be extracted again."""
    from memory.ingest.inbox import Inbox

    read = Inbox.unfinished
    release = asyncio.Event()

    async def late_first_read(self: Inbox, *args: Any, **kw: Any) -> Any:
        await release.wait()  # held until the live message has failed
        return await read(self, *args, **kw)

    monkeypatch.setattr(Inbox, "unfinished", late_first_read)
    fake_openai.fail_next("chat", Fault.status(500))
    mem = await _llm_memory(make_memory, fake_openai, clock)
    m = msg("I restore old sailing boats in Kiel.")
    assert await (await mem.ingest_message(m)).wait() is False
    assert await _state(mem, m.id) == "retry"
    release.set()
    await asyncio.sleep(0.2)
    assert len(fake_openai.chat_requests()) == 1, "retried before its back-off"
    assert await _state(mem, m.id) == "retry"
    clock.advance(seconds=31)
    assert await eventually(lambda: _state_is(mem, m.id, "done"))
