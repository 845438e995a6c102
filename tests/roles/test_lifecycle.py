"""Discord deleted or edited a message: the engine's side (Memory.delete_messages,
Memory.edit_message), including events that arrive while the message is still
being extracted."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from memory.extract.base import ExtractionItem
from memory.models import Candidate
from tests.helpers import (
    ALICE,
    BOB,
    GUILD,
    ScriptedExtractor,
    database_url,
    echo_fact,
    every_cell_text,
    inspect_db,
    msg,
)
from tests.helpers import (
    journal_text as journal_files_text,
)

SECRET = "zanzibarquokka"


async def all_text(mem: Any) -> str:
    """Every text cell of every table (FTS shadow tables too), the journals and MEMORY.md."""
    await mem.refresh_snapshot()
    con = inspect_db(mem)
    try:
        parts = every_cell_text(con)
    finally:
        con.close()
    files = [*mem.config.journal_dir.glob("*.md")]
    assert any(p.name == "MEMORY.md" for p in files)
    for p in files:
        parts.append(p.read_text())
    return "\n".join(parts)


async def journal_text(mem: Any) -> str:
    """The journal files' text (where days are rendered from the database,
    after the lease holder's round has written them)."""
    return await journal_files_text(mem)


def marks_deletions(mem: Any) -> bool:
    """Appended journals turn a deleted message's line into "[deleted]"; days
    rendered from the database (PostgreSQL) leave the message out."""
    return database_url(mem) is None


def count(mem: Any, sql: str, *args: Any) -> int:
    con = inspect_db(mem)
    try:
        return int(con.execute(sql, args).fetchone()[0])
    finally:
        con.close()


class GatedExtractor(ScriptedExtractor):
    """Holds extraction of a message containing "slow" until ``gate`` is set;
    ``started`` is set once such a message is being extracted."""

    def __init__(self) -> None:
        super().__init__(fn=echo_fact)
        self.gate = asyncio.Event()
        self.started = asyncio.Event()

    async def extract_batch(
        self, items: Sequence[ExtractionItem], max_facts: int
    ) -> list[list[Candidate]]:
        if any("slow" in i.text for i in items):
            self.started.set()
            await self.gate.wait()
        return await super().extract_batch(items, max_facts)


async def facts_of(mem: Any) -> list[str]:
    return [f.fact for f in await mem.facts.find(GUILD, active=None, limit=500)]


async def test_settled_delete_leaves_no_trace(make_memory: Any) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(fn=echo_fact))
    m = msg(f"I keep a {SECRET} in my garden", author=ALICE, name="Alice")
    other = msg("I sail on the lake every summer", author=BOB, name="Bob")
    for x in (m, other):
        assert await (await mem.ingest_message(x)).wait()
    hits = await mem.search(GUILD, SECRET, scope="all")
    assert hits
    await mem.traces.record(GUILD, m.channel_id, m.id, retrieved=hits)
    await mem.settle()
    assert SECRET in await all_text(mem)
    fact = next(f for f in await mem.facts.find(GUILD) if SECRET in f.fact)

    report = await mem.delete_messages(GUILD, [m.id])
    await mem.settle()

    assert (report.messages, report.facts_retracted) == (1, 1)
    assert SECRET not in await all_text(mem)
    assert await mem.get_message(GUILD, m.id) is None
    assert await mem.get_message(GUILD, other.id) is not None
    journal = await journal_text(mem)
    assert SECRET not in journal and "sail on the lake" in journal
    assert "[deleted]" in journal or not marks_deletions(mem)
    history = await mem.facts.history(GUILD, fact.id)
    assert history[-1].event == "retract"
    assert all(h.old_text is None and h.new_text is None for h in history)
    for table in ("memory_traces", "message_vectors"):
        assert count(mem, f"SELECT count(*) FROM {table} WHERE guild_id = ?", GUILD) >= 0
    assert count(mem, "SELECT count(*) FROM memory_traces WHERE message_id = ?", m.id) == 0
    # Nor in the raw bytes: the database file and its WAL (on SQLite), the
    # journals, MEMORY.md.
    data_files = [p for p in mem.config.db_path.parent.rglob("*") if p.is_file()]
    journal_files = [p for p in mem.config.journal_dir.rglob("*") if p.is_file()]
    if database_url(mem) is None:
        assert any(p.name.endswith(".sqlite3") for p in data_files)
    for path in data_files + journal_files:
        assert SECRET.encode() not in path.read_bytes(), path


async def test_delete_while_extracting_writes_no_fact(make_memory: Any) -> None:
    ext = GatedExtractor()
    mem = await make_memory(extractor=ext)
    m = msg(f"slow: I keep a {SECRET} at home")
    outcome = await mem.ingest_message(m)
    await asyncio.wait_for(ext.started.wait(), 30)

    report = await mem.delete_messages(GUILD, [m.id])
    ext.gate.set()
    await outcome.wait()
    await mem.settle()

    assert report.messages == 1
    assert await facts_of(mem) == []
    assert await mem.get_message(GUILD, m.id) is None
    assert SECRET not in await all_text(mem)


async def test_delete_of_a_message_never_ingested_creates_nothing(make_memory: Any) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(fn=echo_fact))
    assert await (await mem.ingest_message(msg("I collect old maps of Lisbon"))).wait()
    await mem.settle()
    tables = ("messages", "memory_facts", "fact_history", "action_log", "fact_sources")
    before = {t: count(mem, f"SELECT count(*) FROM {t}") for t in tables}
    journal_before = await journal_text(mem)

    report = await mem.delete_messages(GUILD, ["999999999999999999"])
    await mem.delete_messages(GUILD, [])

    assert report.messages == 0
    assert {t: count(mem, f"SELECT count(*) FROM {t}") for t in tables} == before
    assert await journal_text(mem) == journal_before


async def test_bulk_delete_of_a_hundred(make_memory: Any) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(fn=echo_fact), embeddings="none")
    msgs = [msg(f"Message number {i} about {SECRET} {i}") for i in range(100)]
    keep = msg("I grow tomatoes on the balcony")
    for m in [*msgs, keep]:
        await mem.ingest_message(m)
    await mem.settle()
    assert len(await facts_of(mem)) == 101

    report = await mem.delete_messages(GUILD, [m.id for m in msgs])

    assert (report.messages, report.facts_retracted) == (100, 100)
    assert count(mem, "SELECT count(*) FROM messages WHERE guild_id = ?", GUILD) == 1
    assert len(await facts_of(mem)) == 1
    assert SECRET not in await all_text(mem)
    journal = await journal_text(mem)
    assert "Message number" not in journal and "tomatoes" in journal
    assert journal.count("[deleted]") == (100 if marks_deletions(mem) else 0)


def bicycle(text: str, author: str) -> list[Candidate]:
    if "red bicycle" not in text:
        return []
    return [
        Candidate(fact=f"{author} has a red bicycle.", type="other", confidence=0.6, evidence=text)
    ]


async def test_a_fact_with_two_sources_survives_losing_one(make_memory: Any) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(fn=bicycle))
    first = msg(f"I have a red bicycle, named {SECRET}")
    second = msg("yes I still have a red bicycle")
    for m in (first, second):
        assert await (await mem.ingest_message(m)).wait()
    await mem.settle()
    [fact] = await mem.facts.find(GUILD)

    report = await mem.delete_messages(GUILD, [first.id])

    assert (report.facts_retracted, report.facts_kept) == (0, 1)
    [kept] = await mem.facts.find(GUILD)
    assert kept.id == fact.id and kept.source_message_id == second.id
    assert SECRET not in await all_text(mem)
    sources = count(mem, "SELECT count(*) FROM fact_sources WHERE fact_id = ?", fact.id)
    assert sources == 1

    report = await mem.delete_messages(GUILD, [second.id])
    assert report.facts_retracted == 1
    assert await mem.facts.find(GUILD) == []


async def test_a_fact_without_source_links_counts_its_source_message(make_memory: Any) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(fn=echo_fact))
    m = msg(f"I keep a {SECRET} in my garden")
    assert await (await mem.ingest_message(m)).wait()
    await mem.settle()

    def unlink(con: Any) -> None:  # a fact from before fact_sources existed
        con.execute("DELETE FROM fact_sources")

    await mem.db.write(unlink)
    report = await mem.delete_messages(GUILD, [m.id])
    assert report.facts_retracted == 1
    assert SECRET not in await all_text(mem)


async def test_edit_retracts_what_it_no_longer_says_and_extracts_the_new_text(
    make_memory: Any,
) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(fn=echo_fact))
    m = msg(f"I keep {SECRET} pets at home")
    assert await (await mem.ingest_message(m)).wait()
    await mem.settle()
    assert any(SECRET in f for f in await facts_of(mem))

    report = await mem.edit_message(GUILD, m.id, "I collect vintage typewriters")
    await mem.settle()

    assert report.applied and report.facts_retracted == 1
    assert await facts_of(mem) == ["Alice said I collect vintage typewriters."]
    stored = await mem.get_message(GUILD, m.id)
    assert stored is not None and stored.content == "I collect vintage typewriters"
    assert stored.state == "done"
    assert "(edited) I collect vintage typewriters" in await journal_text(mem)
    assert SECRET not in await all_text(mem)
    # The same text again is no edit.
    again = await mem.edit_message(GUILD, m.id, "I collect vintage typewriters")
    assert not again.applied


async def test_edit_keeps_a_fact_the_new_text_still_grounds(make_memory: Any) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(fn=bicycle))
    m = msg("I have a red bicycle")
    assert await (await mem.ingest_message(m)).wait()
    await mem.settle()
    [fact] = await mem.facts.find(GUILD)

    report = await mem.edit_message(GUILD, m.id, "I have a red bicycle and a blue kite")
    await mem.settle()

    assert report.facts_retracted == 0
    assert [f.id for f in await mem.facts.find(GUILD)] == [fact.id]


async def test_edit_while_extracting_ends_like_a_later_edit(make_memory: Any) -> None:
    ext = GatedExtractor()
    mem = await make_memory(extractor=ext)
    m = msg(f"slow: I keep {SECRET} pets at home")
    outcome = await mem.ingest_message(m)
    await asyncio.wait_for(ext.started.wait(), 30)

    edit = asyncio.create_task(mem.edit_message(GUILD, m.id, "I collect vintage typewriters"))
    await asyncio.sleep(0)
    ext.gate.set()
    await outcome.wait()
    report = await edit
    await mem.settle()

    assert report.applied
    assert await facts_of(mem) == ["Alice said I collect vintage typewriters."]
    journal = await journal_text(mem)
    assert journal.count("(edited) I collect vintage typewriters") == 1
    assert SECRET not in await all_text(mem)


async def test_edit_of_a_message_never_ingested_is_a_no_op(make_memory: Any) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(fn=echo_fact))
    report = await mem.edit_message(GUILD, "999999999999999999", "anything at all")
    assert not report.applied
    assert count(mem, "SELECT count(*) FROM messages") == 0
    assert await journal_text(mem) == ""


async def test_a_delete_that_overtakes_its_message_keeps_it_out(make_memory: Any) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(fn=echo_fact))
    m = msg(f"I keep a {SECRET} in my garden")

    report = await mem.delete_messages(GUILD, [m.id])
    outcome = await mem.ingest_message(m)
    await mem.settle()

    assert report.messages == 0 and outcome.status == "rejected"
    assert count(mem, "SELECT count(*) FROM messages") == 0
    assert await facts_of(mem) == []
    assert SECRET not in await journal_text(mem)


async def test_an_edit_that_overtakes_its_message_is_not_lost(make_memory: Any) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(fn=echo_fact))
    m = msg(f"I keep {SECRET} pets at home")

    report = await mem.edit_message(GUILD, m.id, "I collect vintage typewriters")
    assert await (await mem.ingest_message(m)).wait()
    await mem.settle()

    assert not report.applied
    stored = await mem.get_message(GUILD, m.id)
    assert stored is not None and stored.content == "I collect vintage typewriters"
    assert await facts_of(mem) == ["Alice said I collect vintage typewriters."]
    assert SECRET not in await all_text(mem)


async def test_a_fact_kept_by_an_edit_keeps_no_quote_of_the_old_text(make_memory: Any) -> None:
    def first_time_only(text: str, author: str) -> list[Candidate]:
        return bicycle(text, author) if SECRET in text else []

    mem = await make_memory(extractor=ScriptedExtractor(fn=first_time_only))
    m = msg(f"I have a red bicycle named {SECRET}")
    assert await (await mem.ingest_message(m)).wait()
    await mem.settle()

    report = await mem.edit_message(GUILD, m.id, "I have a red bicycle")
    await mem.settle()

    assert report.facts_retracted == 0
    assert await facts_of(mem) == ["Alice has a red bicycle."]
    assert SECRET not in await all_text(mem)


async def test_a_trace_that_quotes_a_deleted_message_goes_with_it(make_memory: Any) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(fn=echo_fact))
    gone = msg(f"I hid a {SECRET} in my shed")
    asking = msg("what did anyone hide in a shed?", author=BOB, name="Bob")
    for m in (gone, asking):
        assert await (await mem.ingest_message(m)).wait()
    await mem.settle()
    # A reply to Bob's question retrieved Alice's message itself (not a fact of it).
    hits = [h for h in await mem.search(GUILD, SECRET, scope="messages") if h.id == gone.id]
    assert hits
    await mem.traces.record(GUILD, asking.channel_id, asking.id, retrieved=hits)

    await mem.delete_messages(GUILD, [gone.id])
    await mem.settle()

    assert count(mem, "SELECT count(*) FROM memory_traces WHERE message_id = ?", asking.id) == 0
    assert SECRET not in await all_text(mem)
