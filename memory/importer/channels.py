"""Discord API channel objects found among message dumps: channel metadata.

A dump made with the API holds the channels beside their messages: a
``GET /channels/{id}`` answer (``channel_data.json``: a forum channel with its
``name`` and ``topic``) or a ``GET /guilds/{id}/channels`` array. They carry
no message; what they tell is the channel's name, which the guild's channel
names take (the dashboard and the snapshot show names, not ids).

A channel object is ``{"id", "type" (an integer), "name"?, "topic"?,
"guild_id"?, "parent_id"?, …}`` without the ``author`` and ``channel_id`` of
a message. Direct-message channels (types 1 and 3) are skipped as ``dm``,
like their messages; a channel that names no guild takes the import's
``--guild`` and is otherwise skipped as ``no_guild``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory.importer.convert import clean_content, clean_name, snowflake

# The fields of a channel object the import reads; the others (permission
# overwrites, forum tags …) are skipped unread where the reader can.
CHANNEL_FIELDS = frozenset({"id", "type", "guild_id", "name", "topic", "parent_id", "recipients"})
# DM (1) and group DM (3): never guild memory.
_DM_TYPES = frozenset({1, 3})


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    """One channel of a guild as an API dump describes it."""

    guild_id: str
    channel_id: str
    name: str
    topic: str
    type: int
    parent_id: str | None = None


def looks_like_channel(obj: Any) -> bool:
    """A Discord channel object (not a message, not a DCE export, not a thread archive)."""
    return (
        isinstance(obj, dict)
        and snowflake(obj.get("id")) is not None
        and type(obj.get("type")) is int
        and any(k in obj for k in ("name", "guild_id", "recipients"))
        and not any(k in obj for k in ("author", "channel_id", "messages", "content"))
    )


def channel_info(
    obj: dict[str, Any], default_guild: str | None
) -> tuple[ChannelInfo | None, str | None]:
    """The channel, or why it is skipped (``dm``, ``no_guild``)."""
    kind = int(obj["type"])
    if kind in _DM_TYPES:
        return None, "dm"
    guild_id = snowflake(obj.get("guild_id")) or default_guild
    if guild_id is None:
        return None, "no_guild"
    topic = obj.get("topic")
    return (
        ChannelInfo(
            guild_id=guild_id,
            channel_id=str(snowflake(obj.get("id"))),
            name=clean_name(obj.get("name")),
            topic=clean_content(topic) if isinstance(topic, str) else "",
            type=kind,
            parent_id=snowflake(obj.get("parent_id")),
        ),
        None,
    )
