"""PostgreSQL's database layer: what other processes' commits tell this one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from memory.db.changes import (
    ExternalCommit,
    FactsChanged,
    SettingsChanged,
    VectorsPut,
    VectorsRemoved,
)
from memory.db.postgres.database import commit_note, external_commit

GUILD, OTHER = "111111111111111111", "222222222222222222"


def _note(token: str, v: list[str] | None, s: list[str] | None) -> str:
    return json.dumps({"t": token, "v": v, "s": s})


def test_notifications_of_other_processes_name_their_guilds() -> None:
    assert external_commit([_note("me", None, None)], "me") is None
    assert external_commit([], "me") is None
    got = external_commit([_note("a", ["g2", "g1"], []), _note("b", ["g1"], ["g3"])], "me")
    assert got == ExternalCommit(vector_guilds=("g1", "g2"), settings_guilds=("g3",))
    # One notification that cannot say which guilds: any guild.
    got = external_commit([_note("a", ["g1"], []), _note("b", None, ["g2"])], "me")
    assert got == ExternalCommit(vector_guilds=None, settings_guilds=("g2",))
    assert external_commit(["not json"], "me") == ExternalCommit(None, None)


def test_a_commit_names_the_guilds_it_changed_or_says_it_cannot() -> None:
    put = VectorsPut("facts", "m", "g1", (1,), (b"",))
    note = json.loads(commit_note("me", [put, SettingsChanged("g2")]))
    assert note == {"t": "me", "v": ["g1"], "s": ["g2"]}
    # Removals and a quote leaving its facts name ids only: any guild's caches
    # (the fact lexicons too) must look again.
    for unknown in (VectorsRemoved("messages", (5,)), FactsChanged((7,))):
        assert json.loads(commit_note("me", [put, unknown]))["v"] is None
    assert json.loads(commit_note("me", None)) == {"t": "me", "v": [], "s": []}


async def _until(check: Callable[[], Any], seconds: float = 30.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the other process's commit never arrived")


@pytest.mark.postgresql_only
async def test_a_setting_written_by_another_process_applies_here(
    make_memory: Callable[..., Any], tmp_path: Any
) -> None:
    here = await make_memory(embeddings="none")
    # Another process on the same database: a second engine on the same data dir.
    there = await make_memory(embeddings="none", data_dir=tmp_path / "data")
    assert (await here.guilds.settings(GUILD)).memory_enabled is True
    untouched = await here.guilds.settings(OTHER)
    await there.guilds.set_setting(GUILD, "memory_enabled", "false")

    async def seen() -> bool:
        return (await here.guilds.settings(GUILD)).memory_enabled is False

    await _until(seen)
    assert here.db.external_commits >= 1
    assert await here.guilds.settings(OTHER) == untouched


async def test_urgent_writes_commit_in_groups_and_fail_alone(pg_url: str) -> None:
    """A burst of acknowledged writes: committed together, each with its own
    result; one that fails takes none of the others with it."""
    from memory.db.postgres.database import PgDatabase

    db = PgDatabase(pg_url)
    await db.open()
    try:

        def lease(con: Any, name: str) -> str:
            if name == "bad-7":
                raise ValueError("this one's own data")
            con.execute(
                "INSERT INTO job_leases (name, holder, expires_at) VALUES (?, 'me', 't')", (name,)
            )
            return name

        names = [f"bad-{i}" for i in range(60)]
        results = await asyncio.gather(
            *(db.write(lease, n, urgent=True) for n in names), return_exceptions=True
        )
        assert [r for r in results if isinstance(r, BaseException)] == [results[7]]
        assert isinstance(results[7], ValueError)
        assert [r for r in results if isinstance(r, str)] == [n for n in names if n != "bad-7"]
        stored = await db.read(
            lambda con: sorted(r[0] for r in con.execute("SELECT name FROM job_leases"))
        )
        assert stored == sorted(n for n in names if n != "bad-7")
        urgent = db.urgent_writer
        assert urgent is not None and urgent.writes == 60 and urgent.groups < 60
    finally:
        await db.close()
