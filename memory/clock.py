"""Injectable time, so tests can cross midnight without sleeping."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(UTC)


# Discord's era: a snowflake holds milliseconds since 2015-01-01 in 42 bits,
# so no Discord message is older than that or newer than 2154-05-15.
DISCORD_EPOCH = datetime(2015, 1, 1, tzinfo=UTC)
DISCORD_ERA_END = DISCORD_EPOCH + timedelta(milliseconds=2**42 - 1)


class OutsideDiscordEra(ValueError):
    """A time no Discord message can have."""


def iso(dt: datetime) -> str:
    """Fixed-width ISO-8601 UTC text: lexical order equals time order."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    dt = dt.astimezone(UTC)
    # The year is padded by hand: strftime("%Y") does not pad years before
    # 1000 on glibc, and the text would no longer be fixed-width.
    return f"{dt.year:04d}" + dt.strftime("-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_iso(text: str) -> datetime:
    """Parse ISO-8601 text (with ``Z`` or an offset); naive input is taken as UTC."""
    value = text.strip()
    if value.endswith("Z") or value.endswith("z"):
        value = value[:-1] + "+00:00"
    dt = datetime.fromisoformat(value)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def normalise_iso(text: str) -> str:
    """``text`` as ``iso`` writes it; ``OutsideDiscordEra`` for a time before
    Discord's epoch (2015-01-01) or past what a snowflake can hold."""
    dt = parse_iso(text)
    if not DISCORD_EPOCH <= dt <= DISCORD_ERA_END:
        raise OutsideDiscordEra(
            f"outside Discord's era ({DISCORD_EPOCH:%Y-%m-%d} to {DISCORD_ERA_END:%Y-%m-%d})"
        )
    return iso(dt)


def monotonic() -> float:
    return time.monotonic()
