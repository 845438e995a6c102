"""Which guilds this process owns: the Discord shards it holds.

Discord puts a guild on shard ``(guild_id >> 22) % shard_count``. A process
that holds some of the shards ingests, replays and runs background jobs only
for the guilds of those shards; another process holds the others, on the
same database. One process holding every shard (the default) owns every
guild.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memory.errors import InvalidInput


def shard_of(guild_id: str | int, shard_count: int) -> int:
    """The shard Discord delivers a guild's events on. An id that is not a
    Discord snowflake (tests, direct messages without a guild) is on shard 0."""
    try:
        snowflake = int(guild_id)
    except (TypeError, ValueError):
        return 0
    if snowflake < 0:
        return 0
    return (snowflake >> 22) % shard_count


@dataclass(frozen=True)
class GuildOwnership:
    """``shard_ids`` of ``shard_count`` (None: all of them)."""

    shard_count: int = 1
    shard_ids: frozenset[int] | None = None

    def __post_init__(self) -> None:
        if self.shard_count < 1:
            raise InvalidInput(f"shard count must be at least 1 (got {self.shard_count})")
        if self.shard_ids is not None:
            if not self.shard_ids:
                raise InvalidInput("shard ids must name at least one shard")
            wrong = sorted(s for s in self.shard_ids if not 0 <= s < self.shard_count)
            if wrong:
                raise InvalidInput(
                    f"shard ids {wrong} are outside 0..{self.shard_count - 1} "
                    f"(shard count {self.shard_count})"
                )

    @classmethod
    def of(cls, shard_ids: Iterable[int] | None, shard_count: int | None) -> GuildOwnership:
        """From the settings: no count means one process holding every shard."""
        if shard_count is None:
            if shard_ids:
                raise InvalidInput("shard ids need a shard count")
            return cls()
        ids = frozenset(shard_ids) if shard_ids else None
        return cls(shard_count, ids)

    @property
    def everything(self) -> bool:
        return self.shard_ids is None or len(self.shard_ids) == self.shard_count

    @property
    def shards(self) -> list[int]:
        """The shard ids held, in order."""
        if self.shard_ids is None:
            return list(range(self.shard_count))
        return sorted(self.shard_ids)

    def owns(self, guild_id: str | int | None) -> bool:
        if self.everything:
            return True
        assert self.shard_ids is not None
        return shard_of(guild_id or "", self.shard_count) in self.shard_ids

    def describe(self) -> str:
        if self.everything and self.shard_count == 1:
            return "all guilds"
        return f"shards {','.join(map(str, self.shards))} of {self.shard_count}"
