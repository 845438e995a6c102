"""Channel episodes for the dashboard: counts per channel and the latest
episodes, each with its span, how it was written and its source messages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory import Episode, Memory

# Latest episodes listed on the guild page.
SHOWN_ON_GUILD_PAGE = 10


def episode_json(e: Episode, channels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "id": e.fact_id,
        "guild_id": e.guild_id,
        "channel_id": e.channel_id,
        "channel_name": channels.get(e.channel_id),
        "text": e.text,
        "started_at": e.started_at,
        "ended_at": e.ended_at,
        "message_count": e.message_count,
        "method": e.method,
        "created_at": e.created_at,
        "source_ids": list(e.source_ids),
    }


async def episodes_context(
    mem: Memory, guild: str, channel: str | None = None, limit: int = SHOWN_ON_GUILD_PAGE
) -> dict[str, Any]:
    """Episodes per channel (count, latest end) and the latest ``limit``
    episodes of the guild, or of ``channel``."""
    per_channel = await mem.episodes.per_channel(guild)
    names = {c.channel_id: c.channel_name for c in per_channel if c.channel_name}
    found = await mem.episodes.find(guild, channel, limit=limit)
    full = [await mem.episodes.get(guild, e.fact_id) or e for e in found]
    stats = mem.episodes.stats
    return {
        "guildId": guild,
        "channelId": channel,
        "episodeChannels": [
            {
                "channel_id": c.channel_id,
                "channel_name": c.channel_name,
                "episodes": c.count,
                "latest_end": c.latest_end,
            }
            for c in per_channel
        ],
        "episodes": [episode_json(e, names) for e in full],
        "episodeStats": {
            "created": stats.created,
            "by_llm": stats.by_llm,
            "extractive": stats.extractive,
            "llm_failures": stats.llm_failures,
            "rebuilt": stats.rebuilt,
            "rebuilds_dropped": stats.rebuilds_dropped,
        },
    }
