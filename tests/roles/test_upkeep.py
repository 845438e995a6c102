"""Expiry by type, the purge of archived facts and the admin purge, under an
injected clock: pinned facts never expire, an archived fact can be restored
until the purge, and a purged fact's text is gone from the database file's
bytes (file and WAL), not only from SQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory.engine import Memory
from memory.models import Fact
from tests.helpers import ALICE, BOB, GUILD, database_url, every_cell_text, inspect_db, msg
from tests.ingest.test_decision import ingest

T0 = "2026-11-22T12:00:00.000Z"  # the test clock's start
MARKER = "velvetquagga"


async def by_text(mem: Memory) -> dict[str, Fact]:
    return {f.fact: f for f in await mem.facts.find(GUILD, active=None, limit=200)}


def db_bytes(mem: Memory) -> bytes:
    """What the database holds: on SQLite its file and WAL byte for byte, on
    PostgreSQL every cell of every table."""
    if database_url(mem):
        con = inspect_db(mem)
        try:
            return "\n".join(every_cell_text(con)).encode()
        finally:
            con.close()
    path = mem.config.db_path
    files = [path, path.with_name(path.name + "-wal")]
    return b"".join(p.read_bytes() for p in files if p.exists())


async def seeded(make_memory: Any, clock: Any) -> tuple[Memory, dict[str, Fact]]:
    """Alice: a plain fact (type other, its text only in the facts table), a
    pinned plain fact, and a profile fact; Bob: one plain fact."""
    mem: Memory = await make_memory(clock=clock, embeddings="none")
    await ingest(
        mem,
        msg("I play chess", created_at=T0),
        msg("I love hiking", created_at=T0),
        msg("I live in Lisbon", created_at=T0),
        msg("I collect stamps", author=BOB, name="Bob", created_at=T0),
    )
    facts = await by_text(mem)
    chess = facts["Alice plays chess."]
    # An operator correction: the new text is in no message, so the file can
    # be searched for it byte by byte after the purge.
    edited = await mem.facts.edit(GUILD, chess.id, text=f"Alice keeps the {MARKER} ledger.")
    assert edited is not None
    for f in (edited, facts["Alice loves hiking."], facts["Bob collects stamps."]):
        await mem.facts.edit(GUILD, f.id, fact_type="other")
    await mem.upkeep.pin(GUILD, facts["Alice loves hiking."].id)
    return mem, await by_text(mem)


async def test_expiry_archives_unpinned_facts_past_their_ttl_then_the_purge_erases_them(
    make_memory: Any, clock: Any
) -> None:
    mem, facts = await seeded(make_memory, clock)
    ledger = facts[f"Alice keeps the {MARKER} ledger."]
    await mem.guilds.set_setting(GUILD, "ttl_days_other", "30")
    await mem.guilds.set_setting(GUILD, "purge_after_days", "10")
    clock.advance(days=29)
    assert (await mem.upkeep.run_daily()).expired == 0
    clock.advance(days=2)
    run = await mem.upkeep.run_daily()
    assert (run.expired, run.purged) == (2, 0)
    now = await by_text(mem)
    assert not now[ledger.fact].is_active and not now["Bob collects stamps."].is_active
    # Pinned, and a profile fact (no TTL): both still current.
    assert now["Alice loves hiking."].is_active and now["Alice lives in Lisbon."].is_active
    last = (await mem.facts.history(GUILD, ledger.id))[-1]
    assert (last.event, last.actor) == ("expire", "system:expire")
    assert last.reason == "not observed for 30 days (other TTL)"
    # Restorable until the purge: Bob's fact comes back and is kept.
    stamps = now["Bob collects stamps."]
    assert (await mem.facts.set_active(GUILD, stamps.id, True)) is not None
    assert MARKER.encode() in db_bytes(mem)
    clock.advance(days=11)
    run = await mem.upkeep.run_daily()
    assert (run.expired, run.purged) == (0, 1)
    after = await by_text(mem)
    assert ledger.fact not in after and after["Bob collects stamps."].is_active
    history = await mem.facts.history(GUILD, ledger.id)
    assert history[-1].event == "purge" and history[-1].reason == "archived for over 10 days"
    assert all(h.old_text is None and h.new_text is None for h in history)
    await mem.settle()
    assert MARKER.encode() not in db_bytes(mem)
    usage = await mem.upkeep.usage(GUILD)
    assert (usage.expired, usage.purged, usage.pinned) == (2, 1, 1)


async def test_a_pinned_fact_is_neither_expired_nor_purged(make_memory: Any, clock: Any) -> None:
    mem, facts = await seeded(make_memory, clock)
    hiking = facts["Alice loves hiking."]
    await mem.guilds.set_setting(GUILD, "ttl_days_other", "1")
    await mem.guilds.set_setting(GUILD, "purge_after_days", "1")
    # Archived by hand while pinned: the purge leaves it for the operator.
    await mem.facts.set_active(GUILD, hiking.id, False)
    clock.advance(days=400)
    await mem.upkeep.run_daily()
    assert hiking.fact in await by_text(mem)
    await mem.facts.set_active(GUILD, hiking.id, True)
    clock.advance(days=400)
    await mem.upkeep.run_daily()
    assert (await by_text(mem))[hiking.fact].is_active


async def test_purge_after_zero_days_means_never(make_memory: Any, clock: Any) -> None:
    mem, facts = await seeded(make_memory, clock)
    await mem.guilds.set_setting(GUILD, "ttl_days_other", "1")
    await mem.guilds.set_setting(GUILD, "purge_after_days", "0")
    clock.advance(days=5000)
    run = await mem.upkeep.run_daily()
    assert (run.expired, run.purged) == (2, 0)


async def test_admin_purge_of_a_member_then_of_the_guild_counts_and_keeps_messages(
    make_memory: Any, clock: Any
) -> None:
    mem, facts = await seeded(make_memory, clock)
    alice = [f for f in facts.values() if f.subject == ALICE]
    assert await mem.upkeep.purge_facts(GUILD, ALICE) == len(alice) == 3
    left = await by_text(mem)
    assert set(left) == {"Bob collects stamps."}
    assert MARKER.encode() not in db_bytes(mem)
    # Their messages stay; only the facts went.
    assert await mem.get_message(GUILD, alice[0].source_message_id or "") is not None
    assert await mem.upkeep.purge_facts(GUILD) == 1
    assert await mem.upkeep.purge_facts(GUILD) == 0
    assert await by_text(mem) == {}


def test_purge_days_in_settings_are_validated(tmp_path: Path) -> None:
    from memory.errors import InvalidInput
    from memory.guild_settings import parse_guild_setting

    assert parse_guild_setting("purge_after_days", " 30 ") == "30"
    for bad in ("-1", "ten", "1.5", "99999999"):
        try:
            parse_guild_setting("purge_after_days", bad)
        except InvalidInput:
            continue
        raise AssertionError(bad)
    try:
        parse_guild_setting("budget_member_facts", "0")
    except InvalidInput:
        pass
    else:
        raise AssertionError("a budget of 0")


def test_m015_dates_old_archives_and_keeps_archived_at_by_trigger(tmp_path: Path) -> None:
    from memory.db.sqlite import driver as sqlite
    from memory.db.sqlite.migrations import migrate

    con = sqlite.connect(tmp_path / "a.db")
    migrate(con, upto="m013_decision")
    for n, active in ((1, 1), (2, 0)):
        con.execute(
            "INSERT INTO memory_facts (guild_id, subject, fact, is_active, created_at, "
            "updated_at) VALUES (?, 'u', ?, ?, 't0', ?)",
            (GUILD, f"fact {n}", active, f"2025-01-0{n}"),
        )
    con.commit()
    assert "m015_budgets" in migrate(con)

    def archived_at() -> list[Any]:
        rows = con.execute("SELECT archived_at FROM memory_facts ORDER BY id")
        return [r[0] for r in rows]

    assert archived_at() == [None, "2025-01-02"]
    con.execute("UPDATE memory_facts SET is_active = 0, updated_at = '2026-03-01' WHERE id = 1")
    con.execute("UPDATE memory_facts SET is_active = 1, updated_at = '2026-03-01' WHERE id = 2")
    assert archived_at() == ["2026-03-01", None]
    con.execute("DELETE FROM memory_facts WHERE id = 1")
    con.close()


async def test_a_channels_episodes_are_a_scope_of_their_own(make_memory: Any, clock: Any) -> None:
    from memory.store.facts import upsert_fact

    mem: Memory = await make_memory(clock=clock, embeddings="none")
    await mem.guilds.set_setting(GUILD, "budget_channel_episodes", "2")
    keeper = mem.upkeep.budgets

    def write(con: Any, n: int, channel: str) -> None:
        upsert_fact(
            con,
            guild_id=GUILD,
            channel_id=channel,
            subject=channel,
            fact=f"In #{channel[-2:]} the members planned raid number {n}.",
            fact_type="episode",
            evidence=None,
            source_message_id=None,
            confidence=0.7,
            now=f"2026-11-22T12:00:0{n}.000Z",
            actor="test",
        )
        keeper.after_write(
            con,
            GUILD,
            channel,
            f"2026-11-22T12:00:0{n}.000Z",
            channel_id=channel,
            fact_type="episode",
        )

    for n in range(4):
        await mem.db.write(write, n, "333333333333333301")
    await mem.db.write(write, 5, "333333333333333302")
    episodes = [f for f in await mem.facts.find(GUILD, limit=50) if f.fact_type == "episode"]
    by_channel = sorted(f.channel_id or "" for f in episodes)
    assert by_channel == ["333333333333333301"] * 2 + ["333333333333333302"]
    # The two oldest of the first channel went; the newest two stay.
    assert {f.fact[-3:] for f in episodes if f.channel_id.endswith("01")} == {" 2.", " 3."}
    usage = await mem.upkeep.usage(GUILD)
    assert sorted((s.key, s.used) for s in usage.scopes if s.kind == "episodes") == [
        ("333333333333333301", 2),
        ("333333333333333302", 1),
    ]
