"""PostgreSQL's database layer: what other processes' commits tell this one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from memory.store.changes import ExternalCommit
from memory.store.pg_database import external_commit

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


async def _until(check: Callable[[], Any], seconds: float = 10.0) -> None:
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
