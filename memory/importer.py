"""Read Discord history files, streaming, into ``IncomingMessage`` values.

Two formats are accepted, detected from the first byte that is not
whitespace:

* a DiscordChatExporter (DCE) JSON export, ``{"guild":…, "channel":…,
  "messages": […], "messageCount": N}`` (every DCE version we know of; see
  ``shared/data/discord/DCE_JSON_SCHEMA.md``), and
* a raw Discord API message array, ``[{"id", "channel_id", "guild_id"?,
  "author": {…}, "content", "timestamp", "type", "message_reference"?}, …]``
  as a bot or ``GET /channels/{id}/messages`` sees it.

Exports can be hundreds of MB, so nothing here loads a file whole. A small
tokenizer walks the structure around the message array by hand and hands each
message object to ``json.JSONDecoder.raw_decode`` over a sliding text window;
memory stays bounded by the largest single message object, never the file.

Decisions (SPEC §3, issue #7):

* **Message types.** Ingested: Default (0), Reply (19), ChatInputCommand (20)
  and ContextMenuCommand (23) — the last two are bot replies to commands and
  carry real content (``is_bot`` lets the engine apply its bot policy).
  Everything else is skipped as ``system_type:<Name>``: joins, pins, boosts,
  thread-created notices, and also ThreadStarterMessage (21), which only
  repeats a message that lives (and is imported) in the parent channel.
* **Empty content.** Attachment-, sticker- or embed-only messages are skipped
  as ``empty_content``: a file name gives the extractor nothing to learn and
  would only add noise to the journal. Forwards with no text of their own are
  ``forward``: the words belong to someone else.
* **Unsafe text.** Lone surrogates (legal JSON: ``"\\ud800"``) cannot be
  encoded to UTF-8 and would break SQLite, so they become U+FFFD. C0/C1
  control characters other than tab and newline are removed; CR/CRLF become
  LF. Zero-width characters are kept: ZWJ/ZWNJ are part of emoji and of
  Persian and Indic spelling, and matching already ignores them
  (``memory.text.strip_invisible``). Content is cut to 2000 characters,
  Discord's own limit for normal messages.
* **DMs** are never ingested: a DCE export of the "Direct Messages" pseudo
  guild (id ``"0"``) or of a DM channel yields ``dm`` skips; a raw API message
  without ``guild_id`` (and no ``default_guild_id``) yields ``no_guild``.
* **Errors.** Empty, truncated, malformed, non-UTF-8 or wrongly shaped files
  raise ``ImportFormatError`` naming the file and byte position. Records
  yielded before the error stay yielded; re-import is idempotent by message
  id, so the caller can simply run the import again after fixing the file.
"""

from __future__ import annotations

import codecs
import functools
import json
import logging
import os
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, BinaryIO, Literal

from memory.clock import normalise_iso
from memory.errors import ImportFormatError, InvalidInput
from memory.models import IncomingMessage

log = logging.getLogger(__name__)

__all__ = [
    "CONTENT_MAX_CHARS",
    "ExportHeader",
    "ImportRecord",
    "ImportStats",
    "iter_export",
    "iter_paths",
    "read_header",
]

CONTENT_MAX_CHARS = 2000
NAME_MAX_CHARS = 100
READ_CHUNK_BYTES = 1 << 20
# A single JSON value larger than this is not a Discord message (the biggest
# real ones, with embeds and reaction user lists, are tens of KB); refusing it
# keeps memory bounded on a malformed or foreign file.
MAX_VALUE_CHARS = 64 << 20
# A decode error this close to the end of the window may only mean the value
# continues in the next chunk (a cut literal, number or \\u escape).
_TAIL_SLACK = 16

_WS = re.compile(r"[ \t\n\r]*")
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
_INGESTED_KINDS = frozenset({0, 19, 20, 23})
_DM_CHANNEL_TYPES = frozenset({"DirectTextChat", "DirectGroupTextChat"})
_DCE_DM_GUILD_ID = "0"

ExportFormat = Literal["dce", "api"]


@dataclass(frozen=True, slots=True)
class ImportRecord:
    """One element of a file's message array: a message to ingest, or a skip.

    ``position`` is the byte offset reached after this element (progress is
    ``position / file size``); ``index`` counts array elements from 0.
    """

    position: int
    index: int
    message: IncomingMessage | None = None
    skip_reason: str | None = None
    message_id: str | None = None
    detail: str | None = None  # why a record is "bad_record", for logs

    @property
    def skipped(self) -> bool:
        return self.message is None


@dataclass
class ImportStats:
    """Running totals over one or more files."""

    messages: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    bytes: int = 0
    files: int = 0

    def add(self, record: ImportRecord) -> None:
        if record.message is not None:
            self.messages += 1
        else:
            self.skipped[record.skip_reason or "bad_record"] += 1

    def file_done(self, nbytes: int) -> None:
        self.files += 1
        self.bytes += nbytes

    def merge(self, other: ImportStats) -> None:
        self.messages += other.messages
        self.skipped.update(other.skipped)
        self.bytes += other.bytes
        self.files += other.files

    @property
    def total_skipped(self) -> int:
        return sum(self.skipped.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "skipped": dict(sorted(self.skipped.items())),
            "bytes": self.bytes,
            "files": self.files,
        }

    def summary(self) -> str:
        parts = ", ".join(f"{reason} {n}" for reason, n in self.skipped.most_common())
        skipped = f"{self.total_skipped} skipped" + (f" ({parts})" if parts else "")
        return (
            f"{self.messages} messages, {skipped}, "
            f"{self.bytes / 1e6:.1f} MB in {self.files} file{'s' if self.files != 1 else ''}"
        )


@dataclass(frozen=True)
class ExportHeader:
    """What a file says about itself before its messages (for progress and logs)."""

    format: ExportFormat
    size: int
    guild_id: str | None = None
    guild_name: str | None = None
    channel_id: str | None = None
    channel_name: str | None = None
    channel_type: str | None = None
    exported_at: str | None = None
    # DCE writes the count after the array; read from the file's tail, None if absent.
    message_count: int | None = None


# --------------------------------------------------------------------------
# Sliding-window JSON reader


class _Reader:
    """Structural JSON tokens and whole values over a UTF-8 file, in bounded memory.

    ``buf[i:]`` is the unread text; ``offset`` is the file byte offset of
    ``buf[i]`` and ``line`` its 1-based line, both kept in step as ``i``
    advances so errors can say where they are without rescanning.
    """

    def __init__(self, fh: BinaryIO, path: Path) -> None:
        self.fh = fh
        self.path = path
        self.buf = ""
        self.i = 0
        self.offset = 0
        self.line = 1
        self.eof = False
        self._bytes_read = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._json = json.JSONDecoder()
        self._bad: ImportFormatError | None = None
        self._start()

    # -- errors -----------------------------------------------------------

    def error(self, message: str, index: int | None = None) -> ImportFormatError:
        """An ImportFormatError at ``buf[index]`` (default: the read point)."""
        offset, line = self.offset, self.line
        if index is not None and index > self.i:
            offset += _utf8_len(self.buf[self.i : index])
            line += self.buf.count("\n", self.i, index)
        return ImportFormatError(f"{message} (line {line})", path=str(self.path), position=offset)

    # -- buffer -----------------------------------------------------------

    def _start(self) -> None:
        head = self.fh.read(4)
        if head.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise ImportFormatError(
                "file is UTF-16; exports are UTF-8 JSON (re-save the file as UTF-8)",
                path=str(self.path),
                position=0,
            )
        if head.startswith(codecs.BOM_UTF8):
            # Editors on Windows add a BOM; it is not JSON, so step over it.
            self.offset = 3
            self._bytes_read = 3
            head = head[3:]
        else:
            self._bytes_read = 0
        self._append(head)

    def _append(self, data: bytes, final: bool = False) -> None:
        pending_bytes = self._decoder.getstate()[0]
        try:
            text = self._decoder.decode(data, final)
        except UnicodeDecodeError as exc:
            # Hand out the valid text before the bad byte first, so every
            # record that precedes it is still yielded; the error is raised
            # when the parser asks for more (``fill``).
            whole = pending_bytes + data
            text = whole[: exc.start].decode("utf-8")
            self._bad = ImportFormatError(
                f"not valid UTF-8 ({exc.reason})",
                path=str(self.path),
                position=self._bytes_read - len(pending_bytes) + exc.start,
            )
        self._bytes_read += len(data)
        if text:
            # Drop what has been consumed so the window never grows past
            # one chunk plus the value being read.
            self.buf = self.buf[self.i :] + text if self.i else self.buf + text
            self.i = 0

    def fill(self, want: int = READ_CHUNK_BYTES) -> bool:
        """Read at least one more chunk; False once the file is exhausted."""
        if self._bad is not None:
            raise self._bad
        if self.eof:
            return False
        data = self.fh.read(max(want, READ_CHUNK_BYTES))
        if not data:
            self.eof = True
            self._append(b"", final=True)
            return False
        self._append(data)
        return True

    def advance(self, to: int) -> None:
        if to <= self.i:
            return
        chunk = self.buf[self.i : to]
        self.offset += _utf8_len(chunk)
        self.line += chunk.count("\n")
        self.i = to

    # -- tokens -----------------------------------------------------------

    def peek(self) -> str:
        """Skip whitespace; the next character, or "" at the end of the file."""
        while True:
            match = _WS.match(self.buf, self.i)
            end = match.end() if match else self.i
            if end > self.i:
                # Whitespace is ASCII: bytes == characters.
                self.line += self.buf.count("\n", self.i, end)
                self.offset += end - self.i
                self.i = end
            if self.i < len(self.buf):
                return self.buf[self.i]
            if not self.fill():
                return ""

    def take(self, char: str, what: str) -> None:
        got = self.peek()
        if got != char:
            raise self._unexpected(got, f"expected '{char}' {what}")
        self.advance(self.i + 1)

    def _unexpected(self, got: str, expectation: str) -> ImportFormatError:
        if got == "":
            return self.error(f"file ends unexpectedly, {expectation} (truncated file?)")
        return self.error(f"malformed JSON: {expectation}, found {got!r}")

    def value(self, what: str) -> Any:
        """Decode one complete JSON value at the read point."""
        self.peek()
        while True:
            start = self.i
            try:
                obj, end = self._json.raw_decode(self.buf, start)
            except json.JSONDecodeError as exc:
                incomplete = exc.msg.startswith("Unterminated string") or (
                    exc.pos >= len(self.buf) - _TAIL_SLACK
                )
                if not incomplete:
                    raise self.error(f"malformed JSON in {what}: {exc.msg}", exc.pos) from None
                if self.eof:
                    raise self.error(
                        f"file ends in the middle of {what} (truncated file?)"
                    ) from None
                self._grow(what)
                continue
            except RecursionError:
                raise self.error(f"malformed JSON in {what}: nested too deeply") from None
            if end == len(self.buf) and not self.eof:
                # A number or literal may continue in the next chunk.
                self._grow(what)
                continue
            self.advance(end)
            return obj

    def _grow(self, what: str) -> None:
        held = len(self.buf) - self.i
        if held > MAX_VALUE_CHARS:
            raise self.error(
                f"{what} is larger than {MAX_VALUE_CHARS >> 20} MiB; "
                "this is not a Discord export or the file is damaged"
            )
        # Double the window each time so one large value costs linear time.
        self.fill(held)

    def expect_end(self) -> None:
        got = self.peek()
        if got != "":
            raise self.error(f"malformed JSON: unexpected data after the end, found {got!r}")


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


# --------------------------------------------------------------------------
# Public entry points


def iter_paths(paths: Sequence[Path | str]) -> Iterator[Path]:
    """Files named directly, plus ``*.json`` found recursively in folders, sorted.

    Every argument is checked before anything is yielded, so a typo in the
    last path fails before the first file is imported.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            inside = sorted(_walk_json(path))
            if not inside:
                log.warning("no .json files under %s", path)
            found.extend(inside)
        elif path.is_file():
            found.append(path)
        else:
            raise InvalidInput(f"{path}: no such file or folder")
    seen: set[Path] = set()
    unique: list[Path] = []
    for path in found:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(path)
    if not unique:
        raise InvalidInput("no .json export files found in " + ", ".join(str(p) for p in paths))
    return iter(unique)


def _walk_json(root: Path) -> Iterator[Path]:
    # os.walk does not follow symlinked folders, so a link loop cannot hang us.
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.lower().endswith(".json") and not name.startswith("."):
                yield Path(folder) / name


def read_header(path: Path | str) -> ExportHeader:
    """Format, guild and channel of a file, reading only its start and tail."""
    path = Path(path)
    size = path.stat().st_size
    with path.open("rb") as fh:
        reader = _Reader(fh, path)
        first = reader.peek()
        if first == "[":
            return ExportHeader(format="api", size=size)
        if first != "{":
            raise _not_an_export(reader, first)
        header = _read_dce_header(reader)
        count = _tail_message_count(fh, size)
    guild = header.get("guild") or {}
    channel = header.get("channel") or {}
    exported = header.get("exportedAt")
    return ExportHeader(
        format="dce",
        size=size,
        guild_id=_snowflake(guild.get("id")),
        guild_name=_clean_name(guild.get("name")),
        channel_id=_snowflake(channel.get("id")),
        channel_name=_clean_name(channel.get("name")),
        channel_type=channel.get("type") if isinstance(channel.get("type"), str) else None,
        exported_at=exported if isinstance(exported, str) else None,
        message_count=count,
    )


def iter_export(path: Path | str, *, default_guild_id: str | None = None) -> Iterator[ImportRecord]:
    """Yield every element of the file's message array, in file order.

    ``default_guild_id`` is used for raw API messages that lack ``guild_id``
    (REST history omits it); DCE exports always name their guild.
    Raises ``ImportFormatError`` for files that cannot be read as either format.
    """
    path = Path(path)
    with path.open("rb") as fh:
        reader = _Reader(fh, path)
        first = reader.peek()
        if first == "{":
            yield from _iter_dce(reader)
        elif first == "[":
            yield from _iter_api(reader, default_guild_id)
        else:
            raise _not_an_export(reader, first)
        reader.expect_end()


def _not_an_export(reader: _Reader, first: str) -> ImportFormatError:
    if first == "":
        return ImportFormatError("file is empty", path=str(reader.path), position=reader.offset)
    return reader.error(
        "not a DiscordChatExporter JSON export or a Discord message array "
        f"(a JSON object or array), found {first!r}"
    )


# --------------------------------------------------------------------------
# DCE exports

_DCE_HEADER_KEYS = frozenset({"guild", "channel", "dateRange", "exportedAt"})


def _read_dce_header(reader: _Reader) -> dict[str, Any]:
    """Consume ``{`` and keys up to and including ``"messages":``."""
    reader.take("{", "at the start of the export")
    header: dict[str, Any] = {}
    keys: list[str] = []
    if reader.peek() == "}":
        raise reader.error("wrong schema: an empty JSON object, not a DiscordChatExporter export")
    while True:
        key = _key(reader)
        keys.append(key)
        if key == "messages":
            if reader.peek() != "[":
                raise reader.error("wrong schema: 'messages' is not an array")
            return header
        value = reader.value(f"the '{key}' field")
        if key in _DCE_HEADER_KEYS:
            header[key] = value  # others may be large and are not needed
        got = reader.peek()
        if got == ",":
            reader.advance(reader.i + 1)
            continue
        if got == "}":
            raise reader.error(
                "wrong schema: JSON object without a 'messages' array "
                f"(keys: {', '.join(keys)}); not a DiscordChatExporter export"
            )
        raise reader._unexpected(got, "expected ',' or '}' after a field")


def _key(reader: _Reader) -> str:
    got = reader.peek()
    if got != '"':
        raise reader._unexpected(got, "expected a field name in double quotes")
    key = reader.value("a field name")
    reader.take(":", f"after the field name {key!r}")
    return str(key)


@dataclass(frozen=True)
class _Channel:
    guild_id: str
    channel_id: str
    is_dm: bool


def _dce_channel(reader: _Reader, header: dict[str, Any]) -> _Channel:
    guild, channel = header.get("guild"), header.get("channel")
    if not isinstance(guild, dict) or not isinstance(channel, dict):
        raise reader.error(
            "wrong schema: 'guild' and 'channel' objects must come before 'messages' "
            "(is this a DiscordChatExporter JSON export?)"
        )
    guild_id, channel_id = _snowflake(guild.get("id")), _snowflake(channel.get("id"))
    if guild_id is None or channel_id is None:
        raise reader.error("wrong schema: 'guild.id' and 'channel.id' must be Discord ids")
    is_dm = (
        guild_id == _DCE_DM_GUILD_ID
        or guild.get("name") == "Direct Messages"
        or channel.get("type") in _DM_CHANNEL_TYPES
    )
    log.info(
        "importing %s: #%s in %s%s",
        reader.path,
        channel.get("name"),
        guild.get("name"),
        " (direct messages: skipped)" if is_dm else "",
    )
    return _Channel(guild_id, channel_id, is_dm)


def _iter_dce(reader: _Reader) -> Iterator[ImportRecord]:
    header = _read_dce_header(reader)
    ctx = _dce_channel(reader, header)
    count = 0
    for count, obj in enumerate(_array(reader, "message"), start=1):
        yield _record(reader, count - 1, _from_dce(obj, ctx))
    # Fields after the array: "messageCount" (checked) and any future ones.
    while True:
        got = reader.peek()
        if got == "}":
            reader.advance(reader.i + 1)
            return
        if got != ",":
            raise reader._unexpected(got, "expected ',' or '}' after the messages array")
        reader.advance(reader.i + 1)
        key = _key(reader)
        value = reader.value(f"the '{key}' field")
        if key == "messageCount" and isinstance(value, int) and value != count:
            log.warning(
                "%s: messageCount says %d but the array holds %d", reader.path, value, count
            )


def _array(reader: _Reader, what: str) -> Iterator[Any]:
    """Elements of the array whose '[' is at the read point."""
    reader.take("[", f"to open the {what} array")
    if reader.peek() == "]":
        reader.advance(reader.i + 1)
        return
    n = 0
    while True:
        yield reader.value(f"{what} #{n + 1}")
        n += 1
        got = reader.peek()
        if got == ",":
            reader.advance(reader.i + 1)
        elif got == "]":
            reader.advance(reader.i + 1)
            return
        else:
            raise reader._unexpected(got, f"expected ',' or ']' after {what} #{n}")


_Converted = tuple[IncomingMessage | None, str | None, str | None, str | None]


def _record(reader: _Reader, index: int, converted: _Converted) -> ImportRecord:
    message, reason, message_id, detail = converted
    if reason == "bad_record":
        log.debug("%s byte %d: record #%d skipped: %s", reader.path, reader.offset, index, detail)
    return ImportRecord(
        position=reader.offset,
        index=index,
        message=message,
        skip_reason=reason,
        message_id=message_id,
        detail=detail,
    )


def _from_dce(obj: Any, ctx: _Channel) -> _Converted:
    if not isinstance(obj, dict):
        return None, "bad_record", None, f"not a JSON object: {type(obj).__name__}"
    message_id = _snowflake(obj.get("id"))
    if message_id is None:
        return None, "bad_record", None, "missing or invalid 'id'"
    if ctx.is_dm:
        return None, "dm", message_id, None
    kind, label = _kind(obj.get("type", 0))
    if kind not in _INGESTED_KINDS:
        return None, f"system_type:{label}", message_id, None
    author = obj.get("author")
    author_id = _snowflake(author.get("id")) if isinstance(author, dict) else None
    if author_id is None or not isinstance(author, dict):
        return None, "bad_record", message_id, "missing or invalid 'author.id'"
    created_at = _timestamp(obj.get("timestamp"))
    if created_at is None:
        return None, "bad_record", message_id, "missing or invalid 'timestamp'"
    content = _clean_content(obj.get("content"))
    if not content.strip():
        reason = "forward" if obj.get("forwardedMessage") else "empty_content"
        return None, reason, message_id, None
    reply_to = None
    ref = obj.get("reference")
    if isinstance(ref, dict) and ref.get("type", "Default") != "Forward":
        ref_guild = _snowflake(ref.get("guildId"))
        if ref_guild is None or ref_guild == ctx.guild_id:
            reply_to = _snowflake(ref.get("messageId"))
    name = _clean_name(author.get("nickname")) or _clean_name(author.get("name")) or author_id
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
    )
    return message, None, message_id, None


# --------------------------------------------------------------------------
# Raw Discord API arrays


def _iter_api(reader: _Reader, default_guild_id: str | None) -> Iterator[ImportRecord]:
    default_guild = _snowflake(default_guild_id) if default_guild_id is not None else None
    if default_guild_id is not None and default_guild is None:
        raise InvalidInput(f"default_guild_id must be a Discord id, got {default_guild_id!r}")
    for index, obj in enumerate(_array(reader, "message")):
        if index == 0 and not _looks_like_api_message(obj):
            hint = (
                "; it looks like a list of DiscordChatExporter exports — import each file"
                if isinstance(obj, dict) and "messages" in obj
                else ""
            )
            raise reader.error(
                "wrong schema: the array's first element is not a Discord API message "
                f"(needs 'id', 'channel_id' and 'author'){hint}"
            )
        yield _record(reader, index, _from_api(obj, default_guild))


def _looks_like_api_message(obj: Any) -> bool:
    return isinstance(obj, dict) and "id" in obj and "channel_id" in obj and "author" in obj


def _from_api(obj: Any, default_guild: str | None) -> _Converted:
    if not isinstance(obj, dict):
        return None, "bad_record", None, f"not a JSON object: {type(obj).__name__}"
    message_id = _snowflake(obj.get("id"))
    if message_id is None:
        return None, "bad_record", None, "missing or invalid 'id'"
    channel_id = _snowflake(obj.get("channel_id"))
    if channel_id is None:
        return None, "bad_record", message_id, "missing or invalid 'channel_id'"
    guild_id = _snowflake(obj.get("guild_id")) or default_guild
    if guild_id is None:
        return None, "no_guild", message_id, None
    kind, label = _kind(obj.get("type", 0))
    if kind not in _INGESTED_KINDS:
        return None, f"system_type:{label}", message_id, None
    author = obj.get("author")
    author_id = _snowflake(author.get("id")) if isinstance(author, dict) else None
    if author_id is None or not isinstance(author, dict):
        return None, "bad_record", message_id, "missing or invalid 'author.id'"
    created_at = _timestamp(obj.get("timestamp"))
    if created_at is None:
        return None, "bad_record", message_id, "missing or invalid 'timestamp'"
    content = _clean_content(obj.get("content"))
    if not content.strip():
        reason = "forward" if obj.get("message_snapshots") else "empty_content"
        return None, reason, message_id, None
    reply_to = None
    ref = obj.get("message_reference")
    if isinstance(ref, dict) and ref.get("type", 0) != 1:  # 1 = forward
        ref_guild = _snowflake(ref.get("guild_id"))
        if ref_guild is None or ref_guild == guild_id:
            reply_to = _snowflake(ref.get("message_id"))
    if reply_to is None and kind == 19 and isinstance(obj.get("referenced_message"), dict):
        reply_to = _snowflake(obj["referenced_message"].get("id"))
    member = obj.get("member")
    nick = member.get("nick") if isinstance(member, dict) else None
    name = (
        _clean_name(nick)
        or _clean_name(author.get("global_name"))
        or _clean_name(author.get("username"))
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
    )
    return message, None, message_id, None


# --------------------------------------------------------------------------
# Field helpers


def _kind(raw: Any) -> tuple[int, str]:
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
        return -1, _clean_name(text)[:40] or "unknown"
    return -1, "unknown"


def _snowflake(raw: Any) -> str | None:
    if type(raw) is str:
        # isdigit() alone accepts "²" and other Unicode digits.
        return raw if raw.isascii() and raw.isdigit() and len(raw) <= 20 else None
    if type(raw) is int and raw >= 0:
        return str(raw)
    return None


def _timestamp(raw: Any) -> str | None:
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


def _clean_content(raw: Any) -> str:
    if not isinstance(raw, str):
        return ""
    return _safe_text(raw[: CONTENT_MAX_CHARS * 2])[:CONTENT_MAX_CHARS]


def _clean_name(raw: Any) -> str:
    if not isinstance(raw, str):
        return ""
    return _SPACES.sub(" ", _safe_text(raw)).strip()[:NAME_MAX_CHARS]


def _tail_message_count(fh: BinaryIO, size: int) -> int | None:
    fh.seek(max(0, size - 4096))
    tail = fh.read().decode("utf-8", "replace")
    match = re.search(r'"messageCount"\s*:\s*(\d+)\s*}\s*$', tail)
    return int(match.group(1)) if match else None
