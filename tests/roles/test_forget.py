"""forget(guild, user) leaves no trace in any table, index, journal or snapshot."""

from __future__ import annotations

from typing import Any

from tests.helpers import (
    ALICE,
    BOB,
    GUILD,
    OTHER_GUILD,
    every_cell_text,
    inspect_db,
    msg,
)

SECRET = "zanzibarquokka"


async def _all_text(mem: Any) -> str:
    """Every text cell of every table (incl. FTS shadow tables) plus files on disk."""
    await mem.refresh_snapshot()
    await mem.journals.publish()  # days rendered from the database: their files now
    con = inspect_db(mem)
    try:
        parts = every_cell_text(con)
    finally:
        con.close()
    for p in mem.config.journal_dir.glob("*.md"):
        parts.append(p.read_text())
    return "\n".join(parts)


async def test_forget_leaves_no_trace(make_memory: Any) -> None:
    mem = await make_memory()
    m1 = msg(f"I work as a {SECRET} keeper in Berlin.", author=ALICE, name="Alice")
    m2 = msg(f"My favourite animal is the {SECRET}.", author=ALICE, name="Alice")
    m3 = msg("I love sailing on the lake.", author=BOB, name="Bob")
    m4 = msg("I also like the city zoo.", author=ALICE, name="Alice", guild=OTHER_GUILD)
    for m in (m1, m2, m3, m4):
        assert await (await mem.ingest_message(m)).wait()
    lore = await mem.lore.remember(
        GUILD,
        f"remember that Alice feeds the {SECRET} on Sundays",
        source_text=f"remember that Alice feeds the {SECRET} on Sundays",
        source_message_id=m1.id,
        actor=f"user:{ALICE}",
    )
    assert lore is not None
    hits = await mem.search(GUILD, SECRET, scope="all")
    assert hits
    await mem.traces.record(GUILD, m1.channel_id, m1.id, retrieved=hits)
    await mem.settle()
    assert SECRET in await _all_text(mem)

    report = await mem.forget(GUILD, ALICE, actor=f"user:{ALICE}")
    assert report.facts >= 2 and report.messages == 2 and report.journal_lines == 2
    await mem.settle()

    everything = await _all_text(mem)
    assert SECRET not in everything
    # Not even in the bytes on disk: free pages, FTS segments and the WAL (on
    # SQLite; PostgreSQL's rewrite is tests/roles/test_forget_on_disk.py's).
    for path in mem.config.db_path.parent.glob(mem.config.db_path.name + "*"):
        assert SECRET.encode() not in path.read_bytes(), path.name
    # The other guild's memory of Alice is untouched: forget is per guild.
    assert await mem.facts.find(OTHER_GUILD, subject=ALICE)
    assert await mem.search(GUILD, SECRET, scope="all") == []
    assert await mem.facts.find(GUILD, subject=ALICE, active=None) == []
    # Bob is untouched.
    assert await mem.facts.find(GUILD, subject=BOB)
    # One forget history row, without content.
    con = inspect_db(mem)
    rows = con.execute(
        "SELECT event, old_text, new_text FROM fact_history WHERE guild_id = ? AND subject = ?",
        (GUILD, ALICE),
    ).fetchall()
    con.close()
    assert [tuple(r) for r in rows] == [("forget", None, None)]
    health = await mem.admin.health()
    assert health["facts_fts_rows"] == health["facts_total"]
    assert health["messages_fts_rows"] == health["messages"]
