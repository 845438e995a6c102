"""Raw Discord API thread archives: ``{"thread": {...}, "messages": [...]}``.

Forum posts and threads archived through the API come as one object per
thread: the thread (``id``, ``name``, ``parent_id``, ``guild_id``) and its
messages as raw API message objects. A file holds one such object, or an
array of them. The thread's ``guild_id`` stands in for messages that lack one.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from memory.importer.convert import Converted, default_guild, from_api, snowflake


def thread_object(header: dict[str, Any]) -> dict[str, Any] | None:
    """The ``thread`` of a top-level object read up to its ``messages`` (a
    thread archive has no DiscordChatExporter ``guild`` and ``channel``), or None."""
    thread = header.get("thread")
    if isinstance(thread, dict) and not ("guild" in header and "channel" in header):
        return thread
    return None


def thread_guild(thread: dict[str, Any], default_guild_id: str | None) -> str | None:
    """The guild of a thread's messages: the thread's, else the caller's default."""
    return snowflake(thread.get("guild_id")) or default_guild(default_guild_id)


def is_thread_archive(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("thread"), dict) and "messages" in obj


def thread_messages(
    first: dict[str, Any], rest: Iterator[Any], default_guild: str | None
) -> Iterator[tuple[int, Converted]]:
    """The messages of an array of thread archives (``first`` and ``rest``),
    numbered across threads; an element that is not a thread archive is one
    ``bad_record``."""
    index = 0
    for n, obj in enumerate(itertools.chain([first], rest)):
        messages = obj.get("messages") if is_thread_archive(obj) else None
        if not isinstance(messages, list):
            yield index, (None, "bad_record", None, f"array element {n} is not a thread archive")
            index += 1
            continue
        guild = snowflake(obj["thread"].get("guild_id")) or default_guild
        for message in messages:
            yield index, from_api(message, guild)
            index += 1
