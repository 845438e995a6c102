"""Journal days rendered from the database: the same text as the appended
files, dirty-day marks written with every change to messages, and on
PostgreSQL (several processes) the engine's journal views, MEMORY.md's
highlights and the lease holder's files all read the database."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from bot.jobs import Jobs
from memory.roles.journals import JournalViews
from memory.store import journal_days as store
from tests.conftest import FakeClock
from tests.helpers import ALICE, BOB, GUILD, OTHER_GUILD, msg

BERLIN = "Europe/Berlin"
# Berlin is UTC+1 in January: 23:30 UTC on the 9th is 00:30 on the 10th there.
TIMES = [
    "2024-01-09T10:00:00.000Z",
    "2024-01-09T22:59:59.999Z",
    "2024-01-09T23:30:00.000Z",
    "2024-01-10T12:00:00.000Z",
]


def day_files(mem: Any) -> dict[str, str]:
    return {p.stem: p.read_text(encoding="utf-8") for p in mem.journal.daily_files()}


async def ingest_all(mem: Any, messages: list[Any]) -> None:
    for m in messages:
        assert await (await mem.ingest_message(m)).wait()
    assert await mem.settle()


def sample() -> list[Any]:
    return [
        msg("I moved to Lyon last spring.", author=ALICE, name="Alice", created_at=TIMES[0]),
        msg("ok", author=BOB, name="Bob | the (builder)", created_at=TIMES[1]),
        msg("k", author=BOB, name="Bob", created_at=TIMES[1]),  # cleans to nothing: no line
        msg("Line one\nline | two", author=BOB, name="Bob", created_at=TIMES[2]),
        msg("We meet at the harbour on Friday.", author=ALICE, created_at=TIMES[3]),
        msg("Other guild talk here.", author=ALICE, guild=OTHER_GUILD, created_at=TIMES[3]),
    ]


@pytest.mark.sqlite_only("the appended files exist in single-process SQLite mode")
async def test_rendered_day_equals_the_appended_file(make_memory: Any) -> None:
    mem = await make_memory(timezone=BERLIN)
    assert not mem.journals.from_database
    messages = sample()
    await ingest_all(mem, messages)
    # An edit marks the line "(edited)" in the file; the rendered day must too.
    report = await mem.edit_message(GUILD, messages[4].id, "We meet at the pier on Saturday.")
    assert report.applied
    files = day_files(mem)
    assert sorted(files) == ["2024-01-09", "2024-01-10"]
    assert "(edited) We meet at the pier on Saturday." in files["2024-01-10"]
    for day, text in files.items():
        assert await mem.journals.render_day(date.fromisoformat(day)) == text
    # The views still read the files in this mode, and agree with them.
    assert [d.day for d in await mem.journal_days()] == ["2024-01-10", "2024-01-09"]
    assert await mem.journals.publish() == 0


async def test_every_change_to_messages_marks_its_utc_date(make_memory: Any) -> None:
    mem = await make_memory()
    a = msg("I like sailing on the lake.", author=ALICE, created_at="2024-03-01T08:00:00.000Z")
    b = msg("I keep bees in the garden.", author=BOB, created_at="2024-03-02T08:00:00.000Z")
    c = msg("My cat is called Pixel.", author=ALICE, created_at="2024-03-03T08:00:00.000Z")
    d = msg("Other guild news today.", guild=OTHER_GUILD, created_at="2024-03-04T08:00:00.000Z")
    await ingest_all(mem, [a, b, c, d])
    assert await mem.db.write(store.take_dirty) == [
        "2024-03-01",
        "2024-03-02",
        "2024-03-03",
        "2024-03-04",
    ]
    assert await mem.db.write(store.take_dirty) == []
    await mem.delete_messages(GUILD, [b.id])
    assert await mem.db.write(store.take_dirty) == ["2024-03-02"]
    assert (await mem.edit_message(GUILD, c.id, "My cat is called Byte now.")).applied
    assert await mem.db.write(store.take_dirty) == ["2024-03-03"]
    await mem.forget(GUILD, ALICE)
    assert await mem.db.write(store.take_dirty) == ["2024-03-01", "2024-03-03"]
    await mem.retention.purge_guild(OTHER_GUILD)
    assert await mem.db.write(store.take_dirty) == ["2024-03-04"]


async def test_local_days_and_their_utc_ranges(make_memory: Any) -> None:
    mem = await make_memory(timezone=BERLIN)
    views: JournalViews = mem.journals
    assert views.bounds(date(2024, 1, 10)) == (
        "2024-01-09T23:00:00.000Z",
        "2024-01-10T23:00:00.000Z",
    )
    # Summer time: UTC+2.
    assert views.bounds(date(2024, 7, 1)) == (
        "2024-06-30T22:00:00.000Z",
        "2024-07-01T22:00:00.000Z",
    )
    assert views.days_of_utc_date("2024-01-09") == {date(2024, 1, 9), date(2024, 1, 10)}
    assert views.local_day(TIMES[2]) == date(2024, 1, 10)


# -- several processes on PostgreSQL ------------------------------------------------------------


@pytest.mark.postgresql_only
async def test_lease_holder_files_follow_ingest_deletes_and_forget(make_memory: Any) -> None:
    mem = await make_memory(timezone=BERLIN)
    assert mem.journals.from_database
    messages = sample()
    await ingest_all(mem, messages)
    # The pipeline appended nothing: the files come from the database.
    assert day_files(mem) == {}
    await mem.journals.publish()
    files = day_files(mem)
    # Today is rendered too, but has no message: no file for it.
    assert sorted(files) == ["2024-01-09", "2024-01-10"]
    for day in ("2024-01-09", "2024-01-10"):
        assert files[day] == await mem.journals.render_day(date.fromisoformat(day))
    assert "Lyon" in files["2024-01-09"] and "harbour" in files["2024-01-10"]
    assert "Line one line / two" in files["2024-01-10"]

    await mem.delete_messages(GUILD, [messages[4].id])
    await mem.journals.publish()
    files = day_files(mem)
    assert "harbour" not in files["2024-01-10"] and "[deleted]" not in files["2024-01-10"]

    await mem.forget(GUILD, ALICE)
    await mem.journals.publish()
    files = day_files(mem)
    assert "Lyon" not in files.get("2024-01-09", "")
    assert ALICE not in files.get("2024-01-09", "")
    assert "Other guild talk" in files["2024-01-10"]  # forget is per guild

    await mem.retention.purge_guild(OTHER_GUILD)
    await mem.forget(GUILD, BOB)
    await mem.journals.publish()
    # Every message of those days is gone, and so are their files.
    assert "2024-01-09" not in day_files(mem) and "2024-01-10" not in day_files(mem)


@pytest.mark.postgresql_only
async def test_views_and_snapshot_need_no_files(make_memory: Any, tmp_path: Path) -> None:
    first = await make_memory(timezone=BERLIN)
    await ingest_all(first, sample())
    # Another process on the same database, with an empty journal folder.
    second = await make_memory(
        timezone=BERLIN, data_dir=tmp_path / "other", database_url=first.config.database_url
    )
    assert not second.config.journal_dir.exists() or day_files(second) == {}
    days = await second.journal_days()
    assert [d.day for d in days] == ["2024-01-10", "2024-01-09"]
    assert all(d.size > 0 for d in days)
    entries = await second.journal_entries("2024-01-10")
    assert entries is not None
    assert [e.content for e in entries] == [
        "Line one line / two",
        "We meet at the harbour on Friday.",
        "Other guild talk here.",
    ]
    assert entries[0].time == TIMES[2] and entries[0].author_id == BOB
    assert await second.journal_entries("2024-01-11") is None
    text = await second.refresh_snapshot()
    assert "We meet at the harbour on Friday." in text
    assert "- 2024-01-10.md" in text and "- 2024-01-09.md" in text
    assert day_files(second) == {}


async def test_the_journal_files_job_runs_where_days_are_rendered(
    make_memory: Any, tmp_path: Path, clock: FakeClock, store_backend: str
) -> None:
    first = await make_memory(embeddings="none", clock=clock)
    second = await make_memory(
        embeddings="none",
        clock=clock,
        data_dir=tmp_path / "other",
        database_url=first.config.database_url,
    )
    second.leases.holder = "other-host:1:0a0b0c0d"  # one process names its engines alike
    await ingest_all(first, sample())
    ja, jb = Jobs(first, reindex_interval_min=0), Jobs(second, reindex_interval_min=0)
    ja.start()
    jb.start()
    try:
        assert ja.scheduler is not None
        scheduled = {j.id: j.func for j in ja.scheduler.get_jobs()}
        if store_backend == "sqlite":
            # One process appends its own files: nothing to render.
            assert "journal_files" not in scheduled
            return
        assert jb.scheduler is not None
        await scheduled["journal_files"]()
        await {j.id: j.func for j in jb.scheduler.get_jobs()}["journal_files"]()
        assert ja.runs["journal_files"] == 1 and "journal_files" not in jb.runs
        assert sorted(day_files(first)) == ["2024-01-09", "2024-01-10"]
        assert day_files(second) == {}
    finally:
        await ja.stop()
        await jb.stop()


@pytest.mark.postgresql_only
async def test_a_failed_round_keeps_its_days_for_the_next(make_memory: Any) -> None:
    mem = await make_memory()
    messages = sample()
    await ingest_all(mem, messages)
    await mem.journals.publish()
    assert (await mem.edit_message(GUILD, messages[4].id, "We meet at the pier instead.")).applied
    # The edited day's file cannot be written: a folder stands in its place.
    blocker = mem.config.journal_dir / "2024-01-10.md"
    blocker.unlink()
    blocker.mkdir()
    with pytest.raises(OSError):
        await mem.journals.publish()
    blocker.rmdir()
    await mem.journals.publish()
    assert "(edited) We meet at the pier instead." in day_files(mem)["2024-01-10"]


@pytest.mark.postgresql_only
async def test_a_new_lease_holder_writes_every_day_first(make_memory: Any, tmp_path: Path) -> None:
    first = await make_memory(timezone=BERLIN)
    await ingest_all(first, sample())
    await first.journals.publish()  # takes every dirty mark
    # The lease moves to a process on another host: its folder has none of
    # the days, and a file of a day whose messages are gone.
    second = await make_memory(
        timezone=BERLIN, data_dir=tmp_path / "other", database_url=first.config.database_url
    )
    stale = second.config.journal_dir / "2023-12-31.md"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("# Daily Memory Log 2023-12-31\n- an erased line\n")
    await second.journals.publish()
    assert day_files(second) == day_files(first)
    assert sorted(day_files(second)) == ["2024-01-09", "2024-01-10"]
