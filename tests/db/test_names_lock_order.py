"""Recording names and storing a message lock the same rows (members,
channels, the guild) in the same order. On PostgreSQL they run on two
writers (the urgent one stores live messages); in opposite orders they
deadlocked, PostgreSQL aborted one, and the listener lost the message
(seen in tests/bot/test_catch_up_processes.py under load)."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from tests.helpers import ALICE, CHANNEL, GUILD, database_url, eventually, msg


def _waiting_for_a_lock(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as con:
        row = con.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        ).fetchone()
    return bool(row and row[0])


@pytest.mark.postgresql_only("row locks taken by two writer connections")
async def test_names_wait_for_a_message_insert_instead_of_deadlocking(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    assert await (await mem.ingest_message(msg("I keep bees on the roof"))).wait()
    url = database_url(mem)
    assert url is not None
    raw = await asyncio.to_thread(psycopg.connect, url)  # a transaction: as the urgent writer
    try:
        # A message's insert locks its author's row first...
        await asyncio.to_thread(
            raw.execute,
            "UPDATE members SET display_name = 'Alice' WHERE guild_id = %s AND user_id = %s",
            (GUILD, ALICE),
        )
        names = asyncio.create_task(
            mem.guilds.set_names(
                GUILD, guild_name="Guild", channels={CHANNEL: "general"}, members={ALICE: "Al"}
            )
        )
        assert await eventually(lambda: asyncio.to_thread(_waiting_for_a_lock, url))
        # ...then the channel's and the guild's. Names recorded guild first
        # would hold those and wait for the author: a deadlock.
        for sql in (
            "UPDATE channels SET updated_at = updated_at WHERE guild_id = %s AND channel_id = %s",
            "UPDATE guilds SET updated_at = updated_at WHERE guild_id = %s",
        ):
            args = (GUILD, CHANNEL) if "channel_id" in sql else (GUILD,)
            await asyncio.to_thread(raw.execute, sql, args)
        await asyncio.to_thread(raw.commit)
        await asyncio.wait_for(names, 30)
    finally:
        await asyncio.to_thread(raw.close)
    assert {m["user_id"]: m["display_name"] for m in await mem.guilds.members(GUILD)} == {
        ALICE: "Al"
    }
