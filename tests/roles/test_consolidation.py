"""Consolidation on the real engine: offline it merges exact duplicates
(after normalisation) and supersedes same-slot contradictions, each change
with a history row and its reason; a dry run changes nothing; an undo puts
back exactly what the run changed; checked pairs are skipped for 14 days."""

from __future__ import annotations

from typing import Any

import pytest

from memory.clock import iso
from memory.engine import Memory
from memory.errors import InvalidInput
from memory.store.facts import upsert_fact
from memory.store.vectors import all_models
from tests.conftest import FakeClock
from tests.helpers import ALICE, BOB, CHANNEL, GUILD, table_names

# Rows written before the write decision existed (or by an import): the
# store keeps them side by side, as consolidation finds them.
ROWS = (
    (ALICE, "Alice likes hiking."),
    (ALICE, "alice likes  hiking"),
    (ALICE, "Alice lives in Paris."),
    (ALICE, "Alice lives in Lyon."),
    (ALICE, "Alice plays the cello."),
    (BOB, "Bob likes hiking."),
)

MEMORY_TABLES = (
    "memory_facts",
    "fact_sources",
    "fact_relations",
    "memory_fact_vectors",
    "canon_pins",
)


async def seed(mem: Memory, clock: FakeClock) -> dict[str, int]:
    ids: dict[str, int] = {}
    for n, (subject, text) in enumerate(ROWS):
        clock.advance(minutes=5)
        now = iso(clock())
        up = await mem.db.write(
            lambda con, s=subject, t=text, i=n, at=now: upsert_fact(
                con,
                guild_id=GUILD,
                channel_id=CHANNEL,
                subject=s,
                fact=t,
                fact_type="other",
                evidence=None,
                source_message_id=f"90000000000000000{i}",
                confidence=0.8,
                now=at,
                actor="import",
                observed_at=at,
            )
        )
        ids[text] = up.fact.id
    # Rows written past the pipeline get their vectors as a re-index gives them;
    # the background embedder may be at the same rows: let it finish too.
    await mem.embeddings.embed_facts(GUILD, list(ids.values()))
    assert await mem.embeddings.settle()
    return ids


def dump(con: Any, tables: tuple[str, ...] = MEMORY_TABLES) -> dict[str, list[tuple[Any, ...]]]:
    out = {t: sorted(tuple(r) for r in con.execute(f"SELECT * FROM {t}")) for t in tables}
    for n, _model, _dims in all_models(con):
        out[f"vec_facts_{n}"] = sorted(
            tuple(r) for r in con.execute(f"SELECT fact_id, guild_id FROM vec_facts_{n}")
        )
    return out


def everything(con: Any) -> dict[str, list[tuple[Any, ...]]]:
    names = [
        name
        for name in table_names(con)
        if "fts" not in name and not name.startswith("vec_") and name != "consolidation_runs"
    ]
    return dump(con, tuple(names))


async def test_a_dry_run_reports_and_changes_nothing(make_memory: Any, clock: FakeClock) -> None:
    mem = await make_memory(clock=clock)
    ids = await seed(mem, clock)
    before = await mem.db.read(everything)
    done = await mem.consolidation.run(GUILD, dry_run=True)
    assert await mem.db.read(everything) == before
    proposed = {(a["action"], a["keep"], a["drop"]) for a in done.report["proposed"]}
    assert proposed == {
        ("merge", ids["Alice likes hiking."], ids["alice likes  hiking"]),
        ("supersede", ids["Alice lives in Lyon."], ids["Alice lives in Paris."]),
    }
    (run,) = await mem.consolidation.runs(GUILD)
    assert run.dry_run and run.id == done.run_id and run.report["proposed"]
    with pytest.raises(InvalidInput):
        await mem.consolidation.undo(GUILD, done.run_id)
    # Nothing was fingerprinted: the real run checks the same pairs.
    real = await mem.consolidation.run(GUILD)
    assert len(real.report["applied"]) == 2


async def test_a_run_then_its_undo_restores_the_exact_prior_state(
    make_memory: Any, clock: FakeClock
) -> None:
    mem = await make_memory(clock=clock)
    ids = await seed(mem, clock)
    before = await mem.db.read(dump)
    assert before["memory_fact_vectors"] and before["fact_relations"]
    dup, kept = ids["alice likes  hiking"], ids["Alice likes hiking."]
    paris, lyon = ids["Alice lives in Paris."], ids["Alice lives in Lyon."]
    clock.advance(hours=1)
    done = await mem.consolidation.run(GUILD)
    assert len(done.report["applied"]) == 2
    assert await mem.db.read(dump) != before
    gone = await mem.facts.get(GUILD, dup)
    assert gone is not None and not gone.is_active
    closed = await mem.facts.get(GUILD, paris)
    assert closed is not None and closed.is_active and closed.valid_to is not None
    sources = {s.message_id for s in await mem.facts.sources(GUILD, kept)}
    assert sources == {"900000000000000000", "900000000000000001"}
    # Every change has a history row naming the run and its reason.
    for fid, event, words in (
        (dup, "merge", f"merged into fact {kept}"),
        (kept, "merge", f"took in fact {dup}"),
        (paris, "supersede", f"superseded by fact {lyon}"),
        (lyon, "supersede", f"supersedes fact {paris}"),
    ):
        rows = [h for h in await mem.facts.history(GUILD, fid) if h.event == event]
        assert len(rows) == 1 and rows[0].actor == "consolidation"
        reason = rows[0].reason or ""
        assert reason.startswith(f"consolidation run {done.run_id}: ") and words in reason
    hits = await mem.search(GUILD, "Alice likes hiking", scope="facts")
    assert dup not in {int(h.id) for h in hits}

    clock.advance(hours=1)
    restored = await mem.consolidation.undo(GUILD, done.run_id)
    assert sorted(restored) == sorted([dup, kept, paris])
    assert await mem.db.read(dump) == before
    for fid in restored:
        (row,) = [h for h in await mem.facts.history(GUILD, fid) if h.event == "restore"]
        assert row.reason == f"undo of consolidation run {done.run_id}"
    run = await mem.consolidation.get(GUILD, done.run_id)
    assert run is not None and run.undone_at is not None
    with pytest.raises(InvalidInput):
        await mem.consolidation.undo(GUILD, done.run_id)
    hits = await mem.search(GUILD, "alice likes hiking", scope="facts", gate=False)
    assert dup in {int(h.id) for h in hits}  # back in the vector index


async def test_checked_pairs_are_skipped_for_fourteen_days(
    make_memory: Any, clock: FakeClock
) -> None:
    mem = await make_memory(clock=clock, embeddings="none")
    await seed(mem, clock)
    first = await mem.consolidation.run(GUILD)
    await mem.consolidation.undo(GUILD, first.run_id)
    clock.advance(days=1)
    again = await mem.consolidation.run(GUILD)
    assert again.report["checked"] == 0 and again.report["skipped_recent"] == 2
    assert not again.report["applied"]
    clock.advance(days=14)
    # The fingerprints have expired: facts observed again come back into the
    # pool and their pairs are checked anew.
    ids = await seed(mem, clock)
    later = await mem.consolidation.run(GUILD)
    assert later.report["checked"] == 2 and later.report["skipped_recent"] == 0
    assert {a["drop"] for a in later.report["applied"]} == {
        ids["alice likes  hiking"],
        ids["Alice lives in Paris."],
    }


async def test_an_undo_refuses_to_overwrite_a_later_change(
    make_memory: Any, clock: FakeClock
) -> None:
    mem = await make_memory(clock=clock, embeddings="none")
    ids = await seed(mem, clock)
    done = await mem.consolidation.run(GUILD)
    await mem.facts.edit(GUILD, ids["Alice lives in Lyon."], text="Alice lives in Lyon, France.")
    with pytest.raises(InvalidInput, match="changed after run"):
        await mem.consolidation.undo(GUILD, done.run_id)


async def test_every_guild_is_consolidated_by_the_daily_job(
    make_memory: Any, clock: FakeClock
) -> None:
    mem = await make_memory(clock=clock, embeddings="none")
    await seed(mem, clock)
    reports = await mem.consolidation.run_all()
    assert [r.guild_id for r in reports] == [GUILD]
    assert len(reports[0].report["applied"]) == 2


async def test_pinned_memory_survives_consolidation(make_memory: Any, clock: FakeClock) -> None:
    mem = await make_memory(clock=clock)
    ids = await seed(mem, clock)
    # Pinned: the older residence and one of the two duplicates.
    await mem.upkeep.pin(GUILD, ids["Alice lives in Paris."], actor="operator")
    await mem.upkeep.pin(GUILD, ids["alice likes  hiking"], actor="operator")
    done = await mem.consolidation.run(GUILD)
    assert done.report["applied"] == []
    for text in ("Alice lives in Paris.", "alice likes  hiking"):
        fact = await mem.facts.get(GUILD, ids[text])
        assert fact is not None and fact.is_active and fact.valid_to is None
