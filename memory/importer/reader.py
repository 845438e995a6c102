"""Read Discord history files, streaming, into ``IncomingMessage`` values.

Two formats are accepted, detected from the first byte that is not
whitespace:

* a DiscordChatExporter (DCE) JSON export, ``{"guild": {"id", "name", …},
  "channel": {"id", "type", "name", …}, "messages": […], "messageCount": N}``,
  one channel per file, whose messages are ``{"id", "type" (a name such as
  "Default" or "Reply"), "timestamp", "content", "author": {"id", "name",
  "nickname"?, "isBot"}, "reference"?: {"messageId", "guildId", "type"?},
  "forwardedMessage"?, …}`` (camelCase; the guild and channel come from the
  header, not the message), and
* a raw Discord API message array, ``[{"id", "channel_id", "guild_id"?,
  "author": {…}, "content", "timestamp", "type", "message_reference"?}, …]``
  as a bot or ``GET /channels/{id}/messages`` sees it, also wrapped as
  thread archives (``memory.importer.threads``).

An API dump also holds channel objects beside the messages (a
``channel_data.json`` with the forum channel, a ``GET /guilds/{id}/channels``
array): they are read as channel metadata, the guild's channel names
(``memory.importer.channels``), not as a wrong schema.

Edits and pins (DCE ``timestampEdited``/``isPinned``, API
``edited_timestamp``/``pinned``) mark the journal line edited and make canon lore.

Exports can be hundreds of MB, so nothing here loads a file whole: the
streaming reader in ``memory.importer.parse`` walks the structure around the
message array by hand and decodes one message object at a time, so memory
stays bounded by the largest single message object, never the file.
``memory.importer.convert`` turns each object into an ``IncomingMessage`` or a
skip reason, following the decisions below; this module is the public face
(``iter_export``, ``read_header``, ``iter_paths`` and the record types).

Decisions:

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
  Broken or looping symbolic links are ``ImportFormatError`` too; a FIFO,
  device or socket is ``NotRegularFile`` (a subclass), refused unread.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

from memory.errors import ImportFormatError, InvalidInput, NotRegularFile
from memory.importer.channels import CHANNEL_FIELDS, ChannelInfo, channel_info, looks_like_channel
from memory.importer.convert import (
    CONTENT_MAX_CHARS,
    DCE_DM_GUILD_ID,
    DM_CHANNEL_TYPES,
    Channel,
    Converted,
    clean_name,
    default_guild,
    from_api,
    from_dce,
    looks_like_api_message,
    snowflake,
)
from memory.importer.parse import (
    MAX_VALUE_CHARS,
    READ_CHUNK_BYTES,
    ExportReader,
    not_an_export,
    tail_message_count,
)
from memory.importer.threads import is_thread_archive, thread_guild, thread_messages, thread_object
from memory.models import IncomingMessage

log = logging.getLogger(__name__)

__all__ = [
    "CONTENT_MAX_CHARS",
    "MAX_VALUE_CHARS",
    "READ_CHUNK_BYTES",
    "ExportHeader",
    "ImportRecord",
    "ImportStats",
    "check_export",
    "iter_export",
    "iter_paths",
    "open_export",
    "read_header",
]

ExportFormat = Literal["dce", "api", "thread", "channel"]


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
    # A channel object of an API dump: metadata, neither a message nor a skip.
    channel: ChannelInfo | None = None

    @property
    def skipped(self) -> bool:
        return self.message is None and self.channel is None


@dataclass
class ImportStats:
    """Running totals over one or more files."""

    messages: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    bytes: int = 0
    files: int = 0
    channels: int = 0  # channel objects read as channel metadata

    def add(self, record: ImportRecord) -> None:
        if record.message is not None:
            self.messages += 1
        elif record.channel is not None:
            self.channels += 1
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
        self.channels += other.channels

    @property
    def total_skipped(self) -> int:
        return sum(self.skipped.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "skipped": dict(sorted(self.skipped.items())),
            "bytes": self.bytes,
            "files": self.files,
            "channels": self.channels,
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
        elif os.path.lexists(path):
            # Files, and also FIFOs and broken or looping links: opening them
            # (``open_export``) says what is wrong with each, one by one.
            found.append(path)
        else:
            raise InvalidInput(f"{path}: no such file or folder")
    seen: set[Path] = set()
    unique: list[Path] = []
    for path in found:
        try:
            key = path.resolve()
        except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
            key = path.absolute()
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
    with open_export(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        reader = ExportReader(fh, path)
        first = reader.peek()
        if first == "[":
            return ExportHeader(format="api", size=size)
        if first != "{":
            raise not_an_export(reader, first)
        header = _read_dce_header(reader)
        if "messages" not in header:  # a channel object (``_read_dce_header``)
            return ExportHeader(
                format="channel",
                size=size,
                guild_id=snowflake(header.get("guild_id")),
                channel_id=snowflake(header.get("id")),
                channel_name=clean_name(header.get("name")),
                channel_type="channel",
            )
        thread = thread_object(header)
        if thread is not None:
            return ExportHeader(
                format="thread",
                size=size,
                guild_id=snowflake(thread.get("guild_id")),
                channel_id=snowflake(thread.get("id")),
                channel_name=clean_name(thread.get("name")),
                channel_type="thread",
            )
        guild, channel = _header_objects(reader, header)
        count = tail_message_count(fh, size)
    exported = header.get("exportedAt")
    return ExportHeader(
        format="dce",
        size=size,
        guild_id=snowflake(guild.get("id")),
        guild_name=clean_name(guild.get("name")),
        channel_id=snowflake(channel.get("id")),
        channel_name=clean_name(channel.get("name")),
        channel_type=channel.get("type") if isinstance(channel.get("type"), str) else None,
        exported_at=exported if isinstance(exported, str) else None,
        message_count=count,
    )


def check_export(path: Path | str) -> ExportHeader:
    """``read_header``, and for a raw API array its first element too: what
    a command checks before it creates anything (a database, a journal
    folder). Raises ``ImportFormatError`` (``NotRegularFile`` for a FIFO,
    device or socket) for a file that is not an export."""
    header = read_header(path)
    if header.format == "api":
        # The first element is checked on reading (a JSON array of anything
        # else is refused there); an empty array is an export of nothing.
        for _record in iter_export(path):
            break
    return header


def iter_export(path: Path | str, *, default_guild_id: str | None = None) -> Iterator[ImportRecord]:
    """Yield every element of the file's message array, in file order.

    ``default_guild_id`` is used for raw API messages that lack ``guild_id``
    (REST history omits it); DCE exports always name their guild.
    Raises ``ImportFormatError`` for files that cannot be read as either format.
    """
    path = Path(path)
    with open_export(path) as fh:
        reader = ExportReader(fh, path)
        first = reader.peek()
        if first == "{":
            yield from _iter_dce(reader, default_guild_id)
        elif first == "[":
            yield from _iter_api(reader, default_guild_id)
        else:
            raise not_an_export(reader, first)
        reader.expect_end()


def open_export(path: Path) -> BinaryIO:
    """``path`` opened for binary reading, if it is (a link to) a regular file.

    A FIFO, device or socket raises ``NotRegularFile`` without a byte read:
    the open itself is non-blocking, so a FIFO nobody writes to cannot hang
    it. A symbolic link loop, a broken link or an unreadable file raise
    ``ImportFormatError`` saying which.
    """
    nonblocking = getattr(os, "O_NONBLOCK", 0)
    try:
        # Checked before opening so a device is never opened at all, and
        # again on the descriptor in case the path changed in between.
        _require_regular(path, os.stat(path).st_mode)
        fd = os.open(path, os.O_RDONLY | nonblocking | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _open_error(path, exc) from None
    try:
        _require_regular(path, os.fstat(fd).st_mode)
        if nonblocking:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _require_regular(path: Path, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    kind = next((name for test, name in kinds if test(mode)), "not a file")
    raise NotRegularFile(f"not a regular file ({kind}); not read", path=str(path))


def _open_error(path: Path, exc: OSError) -> ImportFormatError:
    if exc.errno == errno.ELOOP:
        return ImportFormatError("symbolic link loop; not read", path=str(path))
    if exc.errno == errno.ENOENT and os.path.islink(path):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return ImportFormatError(
            f"broken symbolic link (to {target!r}, which does not exist); not read",
            path=str(path),
        )
    return ImportFormatError(f"cannot be opened: {exc.strerror or exc}", path=str(path))


# --------------------------------------------------------------------------
# DCE exports

_DCE_HEADER_KEYS = frozenset({"guild", "channel", "dateRange", "exportedAt", "thread"})
# Keys that make an object something other than a channel (a message, an export).
_NOT_CHANNEL = frozenset({"author", "channel_id", "content", "guild", "channel", "thread"})


def _read_dce_header(reader: ExportReader) -> dict[str, Any]:
    """Consume ``{`` and keys up to and including ``"messages":`` (the header
    then holds ``"messages": None``); or the whole object when it is a Discord
    channel object (``memory.importer.channels``; no ``"messages"`` key)."""
    reader.take("{", "at the start of the export")
    header: dict[str, Any] = {}
    fields: dict[str, Any] = {}
    keys: list[str] = []
    if reader.peek() == "}":
        raise reader.error("wrong schema: an empty JSON object, not a DiscordChatExporter export")
    while True:
        key = reader.key()
        keys.append(key)
        if key == "messages":
            if reader.peek() != "[":
                raise reader.error("wrong schema: 'messages' is not an array")
            header["messages"] = None
            return header
        value = reader.value(f"the '{key}' field")
        if key in _DCE_HEADER_KEYS:
            header[key] = value  # others may be large and are not needed
        if key in CHANNEL_FIELDS:
            fields[key] = value
        got = reader.peek()
        if got == ",":
            reader.advance(reader.i + 1)
            continue
        if got == "}":
            reader.advance(reader.i + 1)
            if not _NOT_CHANNEL.intersection(keys) and looks_like_channel(fields):
                return fields
            raise reader.error(
                "wrong schema: JSON object without a 'messages' array "
                f"(keys: {', '.join(keys)}); not a DiscordChatExporter export"
            )
        raise reader.unexpected(got, "expected ',' or '}' after a field")


def _header_objects(
    reader: ExportReader, header: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``guild`` and ``channel`` objects, or a format error naming the one that is wrong."""
    for key in ("guild", "channel"):
        value = header.get(key)
        if not isinstance(value, dict):
            found = "is missing" if key not in header else f"is {_json_kind(value)}"
            raise reader.error(
                "wrong schema: 'guild' and 'channel' objects must come before 'messages', "
                f"but '{key}' {found} (is this a DiscordChatExporter JSON export?)"
            )
    return header["guild"], header["channel"]


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else type(value).__name__


def _dce_channel(reader: ExportReader, header: dict[str, Any]) -> Channel:
    guild, channel = _header_objects(reader, header)
    guild_id, channel_id = snowflake(guild.get("id")), snowflake(channel.get("id"))
    if guild_id is None or channel_id is None:
        raise reader.error("wrong schema: 'guild.id' and 'channel.id' must be Discord ids")
    is_dm = (
        guild_id == DCE_DM_GUILD_ID
        or guild.get("name") == "Direct Messages"
        or channel.get("type") in DM_CHANNEL_TYPES
    )
    log.info(
        "importing %s: #%s in %s%s",
        reader.path,
        channel.get("name"),
        guild.get("name"),
        " (direct messages: skipped)" if is_dm else "",
    )
    return Channel(guild_id, channel_id, is_dm)


def _iter_dce(reader: ExportReader, default_guild_id: str | None) -> Iterator[ImportRecord]:
    header = _read_dce_header(reader)
    if "messages" not in header:  # one channel object: its metadata is the file
        yield _channel_record(reader, 0, header, default_guild(default_guild_id))
        return
    thread = thread_object(header)
    ctx = None if thread is not None else _dce_channel(reader, header)
    guild = thread_guild(thread, default_guild_id) if thread is not None else None
    count = 0
    for count, obj in enumerate(reader.array("message"), start=1):
        converted = from_dce(obj, ctx) if ctx is not None else from_api(obj, guild)
        yield _record(reader, count - 1, converted)
    # Fields after the array: "messageCount" (checked) and any future ones.
    while True:
        got = reader.peek()
        if got == "}":
            reader.advance(reader.i + 1)
            return
        if got != ",":
            raise reader.unexpected(got, "expected ',' or '}' after the messages array")
        reader.advance(reader.i + 1)
        key = reader.key()
        value = reader.value(f"the '{key}' field")
        if key == "messageCount" and isinstance(value, int) and value != count:
            log.warning(
                "%s: messageCount says %d but the array holds %d", reader.path, value, count
            )


def _record(reader: ExportReader, index: int, converted: Converted) -> ImportRecord:
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


# --------------------------------------------------------------------------
# Raw Discord API arrays


def _iter_api(reader: ExportReader, default_guild_id: str | None) -> Iterator[ImportRecord]:
    fallback = default_guild(default_guild_id)
    elements = reader.array("message")
    for index, obj in enumerate(elements):
        if index == 0 and is_thread_archive(obj):
            for n, converted in thread_messages(obj, elements, fallback):
                yield _record(reader, n, converted)
            return
        if looks_like_channel(obj):
            # A channel list (``GET /guilds/{id}/channels``), or channels
            # beside messages: metadata.
            yield _channel_record(reader, index, obj, fallback)
            continue
        if index == 0 and not looks_like_api_message(obj):
            hint = (
                "; it looks like a list of DiscordChatExporter exports — import each file"
                if isinstance(obj, dict) and "messages" in obj
                else ""
            )
            raise reader.error(
                "wrong schema: the array's first element is not a Discord API message "
                f"(needs 'id', 'channel_id' and 'author') or a channel object{hint}"
            )
        yield _record(reader, index, from_api(obj, fallback))


def _channel_record(
    reader: ExportReader, index: int, obj: dict[str, Any], fallback: str | None
) -> ImportRecord:
    info, reason = channel_info(obj, fallback)
    return ImportRecord(
        position=reader.offset,
        index=index,
        channel=info,
        skip_reason=reason,
        message_id=snowflake(obj.get("id")),
    )
