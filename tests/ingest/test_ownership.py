"""Guild ownership: a process holding some of Discord's shards replays,
retries and runs per-guild jobs only for the guilds of those shards."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memory.clock import iso, system_clock
from memory.config import MemoryConfig
from memory.errors import InvalidInput
from memory.ownership import GuildOwnership, shard_of
from memory.store import messages as store_messages
from tests.helpers import eventually, msg


def guild_on(shard: int, count: int, n: int = 0) -> str:
    """A snowflake-shaped guild id that Discord puts on ``shard`` of ``count``."""
    return str(((1000 + n) * count + shard) << 22 | 12345)


def test_shard_of_follows_discords_rule() -> None:
    assert shard_of("81384788765712384", 4) == (81384788765712384 >> 22) % 4
    assert shard_of(guild_on(3, 4), 4) == 3
    assert shard_of(guild_on(0, 4, 7), 4) == 0
    # Not a snowflake (a test id, no guild): shard 0, never an error.
    assert shard_of("g1", 4) == 0
    assert shard_of("", 4) == 0
    assert shard_of("-5", 4) == 0


def test_ownership_owns_only_its_shards() -> None:
    own = GuildOwnership(4, frozenset({1, 3}))
    assert [own.owns(guild_on(s, 4)) for s in range(4)] == [False, True, False, True]
    assert own.shards == [1, 3]
    assert own.describe() == "shards 1,3 of 4"
    assert not own.everything


def test_default_and_full_ownership_own_everything() -> None:
    assert GuildOwnership().owns(guild_on(1, 4))
    assert GuildOwnership().owns(None)
    full = GuildOwnership.of([0, 1], 2)
    assert full.everything and full.owns(guild_on(1, 2)) and full.owns(guild_on(0, 2))
    assert GuildOwnership.of(None, 3).everything
    assert GuildOwnership.of(None, None) == GuildOwnership()


@pytest.mark.parametrize(
    ("ids", "count", "problem"),
    [
        ([4], 4, "outside 0..3"),
        ([0], 0, "at least 1"),
        ([1], None, "need a shard count"),
    ],
)
def test_bad_shard_settings_are_refused(ids: list[int], count: int | None, problem: str) -> None:
    with pytest.raises(InvalidInput, match=problem):
        GuildOwnership.of(ids, count)


async def test_replay_takes_only_owned_guilds(
    tmp_path: Path, make_memory: Callable[..., Any]
) -> None:
    """Rows a crashed process left: each owner replays its guilds' rows, and
    never the other's."""
    first, second = guild_on(0, 2), guild_on(1, 2, 5)
    data = tmp_path / "data"
    seeded = await make_memory(data_dir=data, embeddings="none")
    rows = [
        msg("I keep my bicycle in the blue garage", guild=first),
        msg("I keep my kayak in the red boathouse", guild=second),
    ]
    await seeded.db.write(store_messages.insert_messages, rows, iso(system_clock()))
    await seeded.close()

    shard0 = await make_memory(
        data_dir=data, embeddings="none", ownership=GuildOwnership(2, frozenset({0}))
    )

    async def state(mem: Any, m: Any) -> str:
        stored = await mem.get_message(m.guild_id, m.id)
        return str(stored.state)

    assert await eventually(lambda: _is(state(shard0, rows[0]), "done"))
    await shard0.drain(30)
    assert shard0.queue.stats.replayed == 1
    assert await state(shard0, rows[1]) == "pending"
    # The retry loop and a manual replay of that process leave it alone too.
    assert await shard0.replay.replay() == 0
    assert await state(shard0, rows[1]) == "pending"

    shard1 = await make_memory(
        data_dir=data, embeddings="none", ownership=GuildOwnership(2, frozenset({1}))
    )
    assert await eventually(lambda: _is(state(shard1, rows[1]), "done"))
    await shard1.drain(30)
    assert shard1.queue.stats.replayed == 1


async def _is(value: Any, expected: str) -> bool:
    return bool(await value == expected)


def test_config_carries_the_ownership(tmp_path: Path) -> None:
    cfg = MemoryConfig.for_data_dir(tmp_path, ownership=GuildOwnership(2, frozenset({1})))
    assert cfg.ownership.shards == [1]
    assert MemoryConfig.for_data_dir(tmp_path).ownership.everything


async def test_settings_changed_by_another_process_apply_here(
    tmp_path: Path, make_memory: Callable[..., Any]
) -> None:
    """A dashboard process turns memory off for a guild: the bot process
    holding that guild's shard follows once its database notices the commit."""
    data = tmp_path / "data"
    bot = await make_memory(data_dir=data, embeddings="none")
    dashboard = await make_memory(data_dir=data, embeddings="none")
    guild = guild_on(1, 2)
    assert (await bot.guilds.settings(guild)).memory_enabled
    await dashboard.guilds.set_setting(guild, "memory_enabled", "false")
    # SQLite: any read or write of the bot's engine notices the other
    # process's commit; PostgreSQL: its notification arrives.
    await bot.inbox.unfinished_counts()

    async def off() -> bool:
        return not (await bot.guilds.settings(guild)).memory_enabled

    assert await eventually(off)
    later = await bot.ingest_message(msg("I keep goats in the yard", guild=guild))
    assert later.status == "rejected"


def test_run_flags_become_the_engines_ownership(tmp_path: Path) -> None:
    from bot.cli import build_parser
    from bot.settings import load_settings

    args = build_parser().parse_args(["run", "--shard-ids", "0,2", "--shard-count", "4"])
    settings = load_settings(
        env={}, overrides={"discord_shard_ids": args.shard_ids, "discord_shard_count": 4}
    )
    assert settings.discord_shard_ids == (0, 2)
    assert settings.memory_config().ownership == GuildOwnership(4, frozenset({0, 2}))
    assert load_settings(env={}).memory_config().ownership.everything


def test_run_refuses_shards_outside_the_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.cli import main

    assert main(["run", "--data-dir", str(tmp_path), "--shard-ids", "4", "--shard-count", "4"]) == 2
    assert "outside 0..3" in capsys.readouterr().err
    assert main(["run", "--data-dir", str(tmp_path), "--shard-ids", "1"]) == 2
    assert "need a shard count" in capsys.readouterr().err
