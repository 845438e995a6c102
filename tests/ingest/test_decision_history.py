"""What the write decision leaves behind: history rows that link the old fact
and the new one (and the migration that adds the link to older rows), and
an archive cap that counts current facts only."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from memory.config import IngestConfig, MemoryConfig
from memory.db.sqlite import driver as sqlite
from memory.db.sqlite.migrations import migrate
from tests.helpers import GUILD, msg
from tests.ingest.test_decision import facts_by_text, ingest


async def test_supersede_rows_link_old_and_new(make_memory: Any) -> None:
    mem = await make_memory()
    await ingest(
        mem,
        msg("I live in New York", id="920000000000000001", created_at="2023-01-10T10:00:00.000Z"),
        msg("I moved to Denver", id="920000000000000002", created_at="2024-03-01T10:00:00.000Z"),
        msg("I live in Austin", id="920000000000000003", created_at="2022-03-01T10:00:00.000Z"),
    )
    facts = await facts_by_text(mem)
    ny, denver = facts["Alice lives in New York."], facts["Alice moved to Denver."]
    austin = facts["Alice lives in Austin."]
    old_side = [h for h in await mem.facts.history(GUILD, ny.id) if h.event == "supersede"]
    new_side = [h for h in await mem.facts.history(GUILD, denver.id) if h.event == "supersede"]
    assert [h.linked_fact_id for h in old_side] == [denver.id]
    assert [h.linked_fact_id for h in new_side] == [ny.id]
    # The older observation arrived last: stored closed, linked to the newer fact.
    historical = [h for h in await mem.facts.history(GUILD, austin.id) if h.event == "historical"]
    assert [h.linked_fact_id for h in historical] == [denver.id]
    assert [h.linked_fact_id for h in await mem.facts.history(GUILD, denver.id)][0] is None


def test_m013_keeps_old_rows_and_reads_the_link_from_their_reason(tmp_path: Path) -> None:
    con = sqlite.connect(tmp_path / "a.db")
    migrate(con, upto="m008_bot_replies")
    rows = [
        (7, "supersede", "new residence: superseded by fact 12"),
        (12, "supersede", "new residence: supersedes fact 7"),
        (5, "historical", "older residence than fact 12"),
        (12, "add", None),
    ]
    for fact_id, event, reason in rows:
        con.execute(
            "INSERT INTO fact_history (guild_id, fact_id, subject, event, old_text, new_text, "
            "actor, reason, created_at) VALUES (?, ?, 'u', ?, 'a', 'b', 'extractor', ?, 't')",
            (GUILD, fact_id, event, reason),
        )
    con.commit()
    assert "m013_decision" in migrate(con)
    got = con.execute(
        "SELECT fact_id, event, reason, linked_fact_id FROM fact_history ORDER BY id"
    ).fetchall()
    assert [tuple(r) for r in got] == [
        (7, "supersede", "new residence: superseded by fact 12", 12),
        (12, "supersede", "new residence: supersedes fact 7", 7),
        (5, "historical", "older residence than fact 12", 12),
        (12, "add", None, None),
    ]


async def test_superseded_facts_do_not_count_toward_the_archive_cap(
    make_memory: Any, clock: Any, tmp_path: Path
) -> None:
    base = MemoryConfig.for_data_dir(tmp_path / "data")
    ingest_cfg: IngestConfig = replace(base.ingest, keep_facts_per_subject=4)
    mem = await make_memory(clock=clock, ingest=ingest_cfg, embeddings="none")
    hobbies = ("I play chess", "I love hiking", "I collect stamps")
    await ingest(
        mem,
        *(
            msg(text, id=f"92000000000000010{i}", created_at=f"2024-01-0{i + 1}T10:00:00.000Z")
            for i, text in enumerate(hobbies)
        ),
    )
    cities = ("Lisbon", "Porto", "Oslo", "Tokyo", "Berlin", "Madrid")
    await ingest(
        mem,
        *(
            msg(
                f"I live in {city}",
                id=f"92000000000000020{i}",
                created_at=f"2024-02-0{i + 1}T10:00:00.000Z",
            )
            for i, city in enumerate(cities)
        ),
    )
    facts = await facts_by_text(mem)
    current = {t for t, f in facts.items() if f.valid_to is None}
    # Three hobbies and where she lives now: four current facts, at the cap;
    # the five earlier cities are history and push nothing out.
    assert len(current) == 4 and "Alice lives in Madrid." in current
    assert len(await mem.facts.find(GUILD, active=False)) == 0
    assert sum(f.valid_to is not None for f in facts.values()) == 5
    # A fifth current fact is one too many: the oldest current one goes, not a closed one.
    await ingest(mem, msg("I speak Portuguese", created_at="2024-03-01T10:00:00.000Z"))
    archived = [f for f in await mem.facts.find(GUILD, active=None, limit=50) if not f.is_active]
    assert [(f.fact, f.valid_to) for f in archived] == [("Alice plays chess.", None)]
