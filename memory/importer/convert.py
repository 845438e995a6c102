"""Discord message objects → ``IncomingMessage``: the decisions of ``memory.importer``.

``from_dce`` reads one element of a DiscordChatExporter ``messages`` array,
``from_api`` one raw Discord API message. Each returns ``(message, skip
reason, message id, detail)``: a message to ingest, or why not. The rules
(which message types are ingested, empty content, forwards, DMs, unsafe text)
are described in ``memory.importer``'s docstring.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import date
from typing import Any, NamedTuple

from memory.clock import normalise_iso
from memory.errors import InvalidInput
from memory.models import IncomingMessage

__all__ = [
    "CONTENT_MAX_CHARS",
    "DCE_DM_GUILD_ID",
    "DM_CHANNEL_TYPES",
    "INGESTED_KINDS",
    "NAME_MAX_CHARS",
    "Channel",
    "Converted",
    "clean_content",
    "clean_name",
    "default_guild",
    "from_api",
    "from_dce",
    "kind",
    "looks_like_api_message",
    "snowflake",
    "timestamp",
]

CONTENT_MAX_CHARS = 2000
NAME_MAX_CHARS = 100

_UTC_STAMP = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2})T((?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9])"
    r"(?:\.([0-9]{1,9}))?(?:Z|[+]00:00)"
)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SPACES = re.compile(r"\s+")

# Discord message types by number, named as DCE names them (DCE writes types
# missing from its enum as the bare number, e.g. "20").
_KIND_NAMES: dict[int, str] = {
    0: "Default",
    1: "RecipientAdd",
    2: "RecipientRemove",
    3: "Call",
    4: "ChannelNameChange",
    5: "ChannelIconChange",
    6: "ChannelPinnedMessage",
    7: "GuildMemberJoin",
    8: "GuildBoost",
    9: "GuildBoostTier1",
    10: "GuildBoostTier2",
    11: "GuildBoostTier3",
    12: "ChannelFollowAdd",
    14: "GuildDiscoveryDisqualified",
    15: "GuildDiscoveryRequalified",
    16: "GuildDiscoveryGracePeriodInitialWarning",
    17: "GuildDiscoveryGracePeriodFinalWarning",
    18: "ThreadCreated",
    19: "Reply",
    20: "ChatInputCommand",
    21: "ThreadStarterMessage",
    22: "GuildInviteReminder",
    23: "ContextMenuCommand",
    24: "AutoModerationAction",
    25: "RoleSubscriptionPurchase",
    26: "InteractionPremiumUpsell",
    27: "StageStart",
    28: "StageEnd",
    29: "StageSpeaker",
    31: "StageTopic",
    32: "GuildApplicationPremiumSubscription",
    36: "GuildIncidentAlertModeEnabled",
    37: "GuildIncidentAlertModeDisabled",
    38: "GuildIncidentReportRaid",
    39: "GuildIncidentReportFalseAlarm",
    44: "PurchaseNotification",
    46: "PollResult",
}
_KIND_NUMBERS: dict[str, int] = {name: number for number, name in _KIND_NAMES.items()}
INGESTED_KINDS = frozenset({0, 19, 20, 23})
DM_CHANNEL_TYPES = frozenset({"DirectTextChat", "DirectGroupTextChat"})
DCE_DM_GUILD_ID = "0"


@dataclass(frozen=True)
class Channel:
    """The guild and channel a DCE export is of; every message in it belongs there."""

    guild_id: str
    channel_id: str
    is_dm: bool


# (message to ingest, skip reason, message id, detail of a bad record)
Converted = tuple[IncomingMessage | None, str | None, str | None, str | None]


class _Core(NamedTuple):
    """The fields both formats carry alike, checked."""

    number: int
    author: dict[str, Any]
    author_id: str
    created_at: str
    content: str


def _core(obj: dict[str, Any], message_id: str, *, forwarded: bool) -> _Core | Converted:
    """Type, author, timestamp and content of a DCE or API message, or why it is skipped."""
    number, label = kind(obj.get("type", 0))
    if number not in INGESTED_KINDS:
        return None, f"system_type:{label}", message_id, None
    author = obj.get("author")
    author_id = snowflake(author.get("id")) if isinstance(author, dict) else None
    if author_id is None or not isinstance(author, dict):
        return None, "bad_record", message_id, "missing or invalid 'author.id'"
    created_at = timestamp(obj.get("timestamp"))
    if created_at is None:
        return None, "bad_record", message_id, "missing or invalid 'timestamp'"
    content = clean_content(obj.get("content"))
    if not content.strip():
        return None, "forward" if forwarded else "empty_content", message_id, None
    return _Core(number, author, author_id, created_at, content)


def from_dce(obj: Any, ctx: Channel) -> Converted:
    """One element of a DCE ``messages`` array."""
    if not isinstance(obj, dict):
        return None, "bad_record", None, f"not a JSON object: {type(obj).__name__}"
    message_id = snowflake(obj.get("id"))
    if message_id is None:
        return None, "bad_record", None, "missing or invalid 'id'"
    if ctx.is_dm:
        return None, "dm", message_id, None
    core = _core(obj, message_id, forwarded=bool(obj.get("forwardedMessage")))
    if not isinstance(core, _Core):
        return core
    number, author, author_id, created_at, content = core
    reply_to = None
    ref = obj.get("reference")
    if isinstance(ref, dict) and ref.get("type", "Default") != "Forward":
        ref_guild = snowflake(ref.get("guildId"))
        if ref_guild is None or ref_guild == ctx.guild_id:
            reply_to = snowflake(ref.get("messageId"))
    name = clean_name(author.get("nickname")) or clean_name(author.get("name")) or author_id
    message = IncomingMessage(
        id=message_id,
        guild_id=ctx.guild_id,
        channel_id=ctx.channel_id,
        author_id=author_id,
        author_name=name,
        content=content,
        created_at=created_at,
        source="import",
        is_bot=author.get("isBot") is True,
        reply_to_id=reply_to,
        edited_at=timestamp(obj.get("timestampEdited")),
        pinned=obj.get("isPinned") is True,
    )
    return message, None, message_id, None


def looks_like_api_message(obj: Any) -> bool:
    return isinstance(obj, dict) and "id" in obj and "channel_id" in obj and "author" in obj


def from_api(obj: Any, default_guild: str | None) -> Converted:
    """One raw Discord API message; ``default_guild`` stands in for a missing ``guild_id``."""
    if not isinstance(obj, dict):
        return None, "bad_record", None, f"not a JSON object: {type(obj).__name__}"
    message_id = snowflake(obj.get("id"))
    if message_id is None:
        return None, "bad_record", None, "missing or invalid 'id'"
    channel_id = snowflake(obj.get("channel_id"))
    if channel_id is None:
        return None, "bad_record", message_id, "missing or invalid 'channel_id'"
    guild_id = snowflake(obj.get("guild_id")) or default_guild
    if guild_id is None:
        return None, "no_guild", message_id, None
    core = _core(obj, message_id, forwarded=bool(obj.get("message_snapshots")))
    if not isinstance(core, _Core):
        return core
    number, author, author_id, created_at, content = core
    reply_to = None
    ref = obj.get("message_reference")
    if isinstance(ref, dict) and ref.get("type", 0) != 1:  # 1 = forward
        ref_guild = snowflake(ref.get("guild_id"))
        if ref_guild is None or ref_guild == guild_id:
            reply_to = snowflake(ref.get("message_id"))
    if reply_to is None and number == 19 and isinstance(obj.get("referenced_message"), dict):
        reply_to = snowflake(obj["referenced_message"].get("id"))
    member = obj.get("member")
    nick = member.get("nick") if isinstance(member, dict) else None
    name = (
        clean_name(nick)
        or clean_name(author.get("global_name"))
        or clean_name(author.get("username"))
        or author_id
    )
    message = IncomingMessage(
        id=message_id,
        guild_id=guild_id,
        channel_id=channel_id,
        author_id=author_id,
        author_name=name,
        content=content,
        created_at=created_at,
        source="import",
        # Webhook posts (bridges, announcement relays) are not people.
        is_bot=author.get("bot") is True or bool(obj.get("webhook_id")),
        reply_to_id=reply_to,
        edited_at=timestamp(obj.get("edited_timestamp")),
        pinned=obj.get("pinned") is True,
    )
    return message, None, message_id, None


# --------------------------------------------------------------------------
# Field helpers


def kind(raw: Any) -> tuple[int, str]:
    """(number, label) of a message type given as a DCE name, a number, or digits."""
    if isinstance(raw, bool):
        return -1, str(raw)
    if isinstance(raw, int):
        return raw, _KIND_NAMES.get(raw, str(raw))
    if isinstance(raw, str):
        text = raw.strip()
        if text in _KIND_NUMBERS:
            return _KIND_NUMBERS[text], text
        if text.isascii() and text.isdigit():
            number = int(text)
            return number, _KIND_NAMES.get(number, text)
        return -1, clean_name(text)[:40] or "unknown"
    return -1, "unknown"


def default_guild(raw: str | None) -> str | None:
    """The guild id that stands in for messages without one (None: none given)."""
    guild = snowflake(raw) if raw is not None else None
    if raw is not None and guild is None:
        raise InvalidInput(f"default_guild_id must be a Discord id, got {raw!r}")
    return guild


def snowflake(raw: Any) -> str | None:
    if type(raw) is str:
        # isdigit() alone accepts "²" and other Unicode digits.
        return raw if raw.isascii() and raw.isdigit() and len(raw) <= 20 else None
    if type(raw) is int and raw >= 0:
        return str(raw)
    return None


def timestamp(raw: Any) -> str | None:
    if not isinstance(raw, str):
        return None
    utc = _UTC_STAMP.fullmatch(raw)
    if utc is not None and _valid_day(utc.group(1)):
        # Nearly every DCE/API timestamp is already UTC; building the text
        # directly is several times cheaper than datetime parse + strftime and
        # gives the same result as memory.clock.iso (milliseconds, truncated).
        return f"{utc.group(1)}T{utc.group(2)}.{((utc.group(3) or '') + '000')[:3]}Z"
    try:
        return normalise_iso(raw)
    except (ValueError, OverflowError):
        return None


@functools.lru_cache(maxsize=4096)
def _valid_day(day: str) -> bool:
    try:
        date.fromisoformat(day)
    except ValueError:
        return False
    return True


def _safe_text(text: str) -> str:
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    if not text.isascii():
        text = _SURROGATE.sub("\ufffd", text)
    return text


def clean_content(raw: Any) -> str:
    if not isinstance(raw, str):
        return ""
    return _safe_text(raw[: CONTENT_MAX_CHARS * 2])[:CONTENT_MAX_CHARS]


def clean_name(raw: Any) -> str:
    if not isinstance(raw, str):
        return ""
    return _SPACES.sub(" ", _safe_text(raw)).strip()[:NAME_MAX_CHARS]
