"""Checks and repairs for what adapters hand to the engine.

Ids are opaque tokens (Discord snowflakes, synthetic voice ids, benchmark
turn ids); text is repaired rather than refused where it is only ugly
(control characters, lone surrogates), and refused with a clear reason where
accepting it would be wrong (no guild, no id).
"""

from __future__ import annotations

import re
from dataclasses import replace

from memory.clock import OutsideDiscordEra, normalise_iso
from memory.errors import InvalidInput
from memory.models import ID_RE, IncomingMessage

SNOWFLAKE_RE = re.compile(r"^[0-9]{1,20}$")
# C0/C1 controls except TAB and LF; DEL.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SOURCES = ("text", "voice", "import")


def repair_text(text: str, max_chars: int) -> str:
    """Drop control characters and lone surrogates; cut to ``max_chars``."""
    if not isinstance(text, str):
        text = str(text)
    # Lone surrogates cannot be stored as UTF-8; replace them instead of failing.
    text = text.encode("utf-8", errors="replace").decode("utf-8")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    return text[:max_chars]


def check_id(value: object, what: str) -> str:
    text = str(value).strip() if value is not None else ""
    if not ID_RE.match(text):
        raise InvalidInput(f"{what} {text[:40]!r} is not a valid id")
    return text


def is_snowflake(value: str | None) -> bool:
    return bool(value) and bool(SNOWFLAKE_RE.match(value or ""))


def validate_message(msg: IncomingMessage, *, max_chars: int = 2000) -> IncomingMessage:
    """A cleaned copy of ``msg`` or ``InvalidInput`` with the reason."""
    if msg.guild_id is None or str(msg.guild_id).strip() == "":
        raise InvalidInput("missing guild: direct messages are never ingested")
    guild_id = check_id(msg.guild_id, "guild id")
    message_id = check_id(msg.id, "message id")
    channel_id = check_id(msg.channel_id, "channel id")
    author_id = check_id(msg.author_id, "author id")
    if msg.source not in _SOURCES:
        raise InvalidInput(f"unknown source {msg.source!r}")
    try:
        created_at = normalise_iso(str(msg.created_at))
    except OutsideDiscordEra as exc:
        raise InvalidInput(f"created_at {exc}: {str(msg.created_at)[:40]!r}") from exc
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidInput(f"created_at {str(msg.created_at)[:40]!r} is not ISO-8601") from exc
    name = repair_text(msg.author_name or "", 100).replace("\n", " ").strip() or author_id
    content = repair_text(msg.content or "", max_chars)
    reply = msg.reply_to_id
    if reply is not None and not ID_RE.match(str(reply)):
        reply = None
    return replace(
        msg,
        id=message_id,
        guild_id=guild_id,
        channel_id=channel_id,
        author_id=author_id,
        author_name=name,
        content=content,
        created_at=created_at,
        reply_to_id=reply,
        is_bot=bool(msg.is_bot),
        edited_at=_edited_at(msg.edited_at),
        pinned=msg.pinned is True,
    )


def _edited_at(raw: object) -> str | None:
    """An edit time worth keeping: valid ISO-8601 in Discord's era, else None
    (a bad edit mark loses nothing the message needs)."""
    if raw is None:
        return None
    try:
        return normalise_iso(str(raw))
    except (OutsideDiscordEra, ValueError):
        return None
