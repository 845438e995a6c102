"""Schema migrations: fresh, idempotent, and upgrade from an older schema without loss."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory.db.sqlite import driver as sqlite
from memory.db.sqlite.migrations import MIGRATIONS, applied, migrate
from memory.errors import MigrationError
from tests.helpers import GUILD, eventually


def test_fresh_database_gets_every_migration(tmp_path: Path) -> None:
    con = sqlite.connect(tmp_path / "a.db")
    assert migrate(con) == [name for name, _ in MIGRATIONS]
    assert migrate(con) == []
    assert applied(con) == [name for name, _ in MIGRATIONS]


@pytest.mark.sqlite_only("an upgrade of a SQLite file from an older schema")
async def test_upgrade_from_first_schema_keeps_data(tmp_path: Path, make_memory: Any) -> None:
    data = tmp_path / "d"
    data.mkdir()
    con = sqlite.connect(data / "guildlore.sqlite3")
    migrate(con, upto="m001_core")
    assert applied(con) == ["m001_core"]
    con.execute(
        "INSERT INTO messages (id, guild_id, channel_id, author_id, author_name, content, "
        "created_at, source, state, journaled, received_at) VALUES "
        "('1', ?, '2', '3', 'Old Timer', 'I restore old clocks for fun', "
        "'2025-01-01T00:00:00.000Z', 'text', 'done', 1, '2025-01-01T00:00:00.000Z')",
        (GUILD,),
    )
    con.execute(
        "INSERT INTO memory_facts (guild_id, subject, fact, fact_type, confidence, created_at, "
        "updated_at) VALUES (?, '3', 'Old Timer restores old clocks.', 'preference', 0.7, "
        "'2025-01-01T00:00:00.000Z', '2025-01-01T00:00:00.000Z')",
        (GUILD,),
    )
    con.close()
    mem = await make_memory(data_dir=data)
    facts = await mem.facts.find(GUILD, limit=10)
    assert [f.fact for f in facts] == ["Old Timer restores old clocks."]
    # The FTS indexes added by later migrations cover the old rows.
    hits = await mem.search(GUILD, "clocks", scope="all")
    assert {h.kind for h in hits} == {"fact", "message"}


def test_database_from_newer_version_is_refused(tmp_path: Path) -> None:
    con = sqlite.connect(tmp_path / "a.db")
    migrate(con)
    con.execute("INSERT INTO _migrations (name, applied_at) VALUES ('m999_future', 'x')")
    with pytest.raises(MigrationError, match="newer"):
        migrate(con)


@pytest.mark.sqlite_only("an upgrade of a SQLite file from an older schema")
async def test_upgrade_to_message_retries_keeps_rows(tmp_path: Path, make_memory: Any) -> None:
    data = tmp_path / "d"
    data.mkdir()
    con = sqlite.connect(data / "guildlore.sqlite3")
    migrate(con, upto="m004_fts_secure_delete")
    assert "m006_message_retry" not in applied(con)
    for mid, state, content in (
        ("1", "done", "I restore old clocks for fun"),
        ("2", "pending", "I collect old radios at home"),
    ):
        con.execute(
            "INSERT INTO messages (id, guild_id, channel_id, author_id, author_name, content, "
            "created_at, source, state, journaled, attempts, received_at) VALUES "
            "(?, ?, '2', '3', 'Old Timer', ?, '2025-01-01T00:00:00.000Z', 'text', ?, 1, 1, "
            "'2025-01-01T00:00:00.000Z')",
            (mid, GUILD, content, state),
        )
    con.close()
    mem = await make_memory(data_dir=data, embeddings="none")
    done = await mem.get_message(GUILD, "1")
    assert done is not None and done.state == "done" and "clocks" in done.content
    # The pending row of the older version is processed like any other.
    assert await eventually(lambda: _state_is(mem, "2", "done"))
    assert await mem.inbox.failures() == []
    rows = await mem.db.read(
        lambda c: c.execute(
            "SELECT id, attempts, failed_attempts, retry_at FROM messages ORDER BY id"
        ).fetchall()
    )
    assert [tuple(r) for r in rows] == [("1", 1, 0, None), ("2", 2, 0, None)]


async def _state_is(mem: Any, message_id: str, state: str) -> bool:
    row = await mem.get_message(GUILD, message_id)
    return row is not None and row.state == state


@pytest.mark.sqlite_only("an upgrade of a SQLite file from an older schema")
async def test_upgrade_to_fact_time_backfills_from_source_messages(
    tmp_path: Path, make_memory: Any
) -> None:
    data = tmp_path / "d"
    data.mkdir()
    con = sqlite.connect(data / "guildlore.sqlite3")
    migrate(con, upto="m006_message_retry")
    assert "m007_fact_time" not in applied(con)
    con.execute(
        "INSERT INTO messages (id, guild_id, channel_id, author_id, author_name, content, "
        "created_at, source, state, journaled, received_at) VALUES "
        "('1', ?, '2', '3', 'Old Timer', 'I restore old clocks for fun', "
        "'2024-02-03T04:05:06.000Z', 'import', 'done', 1, '2026-01-01T00:00:00.000Z')",
        (GUILD,),
    )
    for fact, source in (
        ("Old Timer restores old clocks.", "1"),  # its message is stored
        ("Old Timer likes tea.", "gone"),  # its message was deleted
        ("Memory line: the clock club meets on Fridays.", None),  # no message
    ):
        con.execute(
            "INSERT INTO memory_facts (guild_id, subject, fact, fact_type, source_message_id, "
            "confidence, created_at, updated_at) VALUES (?, '3', ?, 'other', ?, 0.7, "
            "'2026-01-01T00:00:00.000Z', '2026-01-02T00:00:00.000Z')",
            (GUILD, fact, source),
        )
    con.close()
    mem = await make_memory(data_dir=data, embeddings="none")
    facts = {f.fact: f for f in await mem.facts.find(GUILD, limit=10)}
    assert len(facts) == 3
    clocks = facts["Old Timer restores old clocks."]
    assert clocks.observed_at == clocks.valid_from == clocks.last_observed_at
    assert clocks.observed_at == "2024-02-03T04:05:06.000Z"
    assert clocks.created_at == "2026-01-01T00:00:00.000Z" and clocks.valid_to is None
    for text in ("Old Timer likes tea.", "Memory line: the clock club meets on Fridays."):
        f = facts[text]
        assert f.observed_at == f.valid_from == f.last_observed_at == f.created_at, text
        assert f.valid_to is None
    rows = await mem.db.read(
        lambda c: c.execute(
            "SELECT fact_id, message_id, guild_id, observed_at FROM fact_sources ORDER BY fact_id"
        ).fetchall()
    )
    assert [tuple(r) for r in rows] == [
        (clocks.id, "1", GUILD, "2024-02-03T04:05:06.000Z"),
        (facts["Old Timer likes tea."].id, "gone", GUILD, "2026-01-01T00:00:00.000Z"),
    ]
    # The current facts are found as before.
    hits = await mem.search(GUILD, "clocks", scope="all")
    assert {h.kind for h in hits} == {"fact", "message"}


@pytest.mark.sqlite_only("an upgrade of a SQLite file from an older schema")
async def test_upgrade_to_daily_series_starts_them_from_what_is_stored(
    tmp_path: Path, make_memory: Any
) -> None:
    from datetime import date

    data = tmp_path / "d"
    data.mkdir()
    con = sqlite.connect(data / "guildlore.sqlite3")
    migrate(con, upto="m019_journal_days")
    for i, day in enumerate(("2024-02-03", "2024-02-03", "2024-02-05", "not a time")):
        con.execute(
            "INSERT INTO messages (id, guild_id, channel_id, author_id, author_name, content, "
            "created_at, source, state, journaled, received_at) VALUES "
            "(?, ?, '2', '3', 'Old Timer', 'hello there', ?, 'import', 'done', 1, "
            "'2026-01-01T00:00:00.000Z')",
            (str(i), GUILD, day if day == "not a time" else f"{day}T04:05:06.000Z"),
        )
    con.execute(
        "INSERT INTO memory_facts (guild_id, subject, fact, fact_type, confidence, created_at, "
        "updated_at, observed_at) VALUES (?, '3', 'Old Timer restores old clocks.', 'other', "
        "0.7, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', '2024-02-05T00:00:00.000Z')",
        (GUILD,),
    )
    con.close()
    mem = await make_memory(data_dir=data, embeddings="none")
    w = await mem.usage.window(GUILD, 7, date(2024, 2, 7))
    by_day = dict(zip(w.days, w.series["messages"], strict=True))
    assert (by_day["2024-02-03"], by_day["2024-02-05"]) == (2, 1)
    assert w.total("messages") == 3 and w.total("facts_added") == 1
    assert w.series["facts_added"][w.days.index("2024-02-05")] == 1
