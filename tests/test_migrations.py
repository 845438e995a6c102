"""Schema migrations: fresh, idempotent, and upgrade from an older schema without loss."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory.errors import MigrationError
from memory.store import sqlite
from memory.store.migrations import MIGRATIONS, applied, migrate
from tests.helpers import GUILD


def test_fresh_database_gets_every_migration(tmp_path: Path) -> None:
    con = sqlite.connect(tmp_path / "a.db")
    assert migrate(con) == [name for name, _ in MIGRATIONS]
    assert migrate(con) == []
    assert applied(con) == [name for name, _ in MIGRATIONS]


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
