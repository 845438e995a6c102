"""Daily Markdown journals: one append-only file per day, for people to read.

SQLite stays the source of truth; these files are an operator-facing record.
Everything here is synchronous on purpose: the engine calls it through
``asyncio.to_thread`` so file I/O never blocks the event loop.

One ``Journal`` object per directory in a process: its thread lock keeps
``append`` and ``redact_user`` from interleaving. Between processes sharing
the folder (the bot, ``guildlore dashboard``, an import), every change also
holds an ``flock`` on the folder, so a rewrite in one process
cannot drop a line another appends meanwhile.

A line is appended whole or not at all (``memory.file_writes``): if the
file system fails part-way (a full disk) the file is cut back, so no line is
ever left cut short, and the message's line is owed
(``memory.roles.journal_owed``), written later with ``append_missing``.
Files are rewritten through a locked temp file, so the temp file of a killed
process — which may hold text erased since — is removed at the next start.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memory.clock import iso, parse_iso
from memory.errors import ConfigError, InvalidInput
from memory.file_writes import (
    append_whole,
    atomic_write_bytes,
    cut_partial_tail,
    folder_lock,
    fsync_dir,
)

logger = logging.getLogger(__name__)

REDACTED = "[redacted]"
DELETED = "[deleted]"
EDITED = "(edited) "
# The line of a message withheld while its author decides about a sensitive
# fact in it (its text is not in ``messages`` meanwhile).
HELD_LINE = "[withheld until its author answers a consent question]"
# Messages rewritten recently (deleted or edited), so a line appended for one
# after its rewrite (it was still queued) carries the rewritten text.
_REWRITES_KEPT = 20_000

_DAILY_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})\.md$")
# A line cut short that still names its time, author, guild and channel:
# enough to know whose message it was (``append_missing`` replaces it).
_FRAGMENT_MIN = len("- 2024-01-01T00:00:00.000Z | ")
# Fields never contain "|" (it is replaced on write), so " | " splits a line
# unambiguously; the author id is the last parenthesised group before it.
_LINE = re.compile(
    r"^- (?P<time>\S+) \| (?P<name>.*) \((?P<author_id>[^()]*)\) \| "
    r"\[guild:(?P<guild_id>\S*) channel:(?P<channel_id>\S*)\] ?(?P<content>.*)$"
)
_FIELD_BAD = str.maketrans({"|": "/", "\r": " ", "\n": " "})
# Ids go inside "(…)" and "[guild:… channel:…]", so they must not contain the
# characters that delimit those; Discord snowflakes never do.
_ID_BAD = str.maketrans({"|": "/", "\r": "_", "\n": "_", " ": "_", "(": "_", ")": "_", "]": "_"})


@dataclass(frozen=True)
class JournalLine:
    """One line as written: where it went and its exact text (no newline)."""

    day: date
    path: Path
    text: str


@dataclass(frozen=True)
class Missing:
    """What ``append_missing`` did: lines written now, lines already in their
    file, lines whose time is not one (no day can show them)."""

    written: int
    present: int
    unplaceable: int


@dataclass(frozen=True)
class JournalEntry:
    """A parsed journal line."""

    time: str  # ISO-8601 UTC, as written
    author_name: str
    author_id: str
    guild_id: str
    channel_id: str
    content: str


@dataclass(frozen=True)
class JournalDay:
    """One daily file: its day (``YYYY-MM-DD``) and size in bytes."""

    day: str
    size: int


def clean_field(value: str) -> str:
    """Make text safe for one journal field: no ``|``, CR or LF."""
    return value.translate(_FIELD_BAD)


def clean_id(value: str) -> str:
    return value.strip().translate(_ID_BAD)


def format_line(
    time_iso: str,
    author_name: str,
    author_id: str,
    guild_id: str,
    channel_id: str,
    content: str,
) -> str:
    """The exact journal line for one message, without newline; ``|``, CR and LF are
    stripped from the fields so a line always parses back (``parse_line``)."""
    return (
        f"- {iso(parse_iso(time_iso))} | {clean_field(author_name)} ({clean_id(author_id)}) | "
        f"[guild:{clean_id(guild_id)} channel:{clean_id(channel_id)}] {clean_field(content)}"
    )


def message_key(
    time_iso: str, author_id: str, guild_id: str, channel_id: str, content: str
) -> tuple[str, str, str, str, str]:
    """What identifies one message's line: its time, author, guild, channel and text."""
    return (
        iso(parse_iso(time_iso)),
        clean_id(author_id),
        clean_id(guild_id),
        clean_id(channel_id),
        clean_field(content),
    )


def _entry_key(m: re.Match[str]) -> tuple[str, str, str, str, str]:
    return (m["time"], m["author_id"], m["guild_id"], m["channel_id"], m["content"])


def parse_line(line: str) -> JournalEntry | None:
    """Parse one journal line; ``None`` for headers and anything foreign."""
    m = _LINE.match(line.rstrip("\r\n"))
    if m is None:
        return None
    return JournalEntry(
        time=m["time"],
        author_name=m["name"],
        author_id=m["author_id"],
        guild_id=m["guild_id"],
        channel_id=m["channel_id"],
        content=m["content"],
    )


class Journal:
    """Daily ``YYYY-MM-DD.md`` files under ``root``; days follow time zone ``tz``."""

    def __init__(self, root: Path, tz: str = "UTC") -> None:
        try:
            self._zone = ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ConfigError(f"unknown time zone {tz!r}") from exc
        self.root = Path(root)
        self.tz = tz
        self._lock = threading.Lock()
        self._rewrites: OrderedDict[tuple[str, str, str, str, str], str] = OrderedDict()

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the journal against every other writer: this process's threads
        (a lock) and other processes on the folder (an ``flock`` on it)."""
        with self._lock, folder_lock(self.root):
            yield

    def cut_partial_tails(self) -> list[tuple[Path, str]]:
        """Cut the line a write left unfinished at the end of a daily file (a
        power loss, an older version's full disk): (file, the cut text)."""
        cut: list[tuple[Path, str]] = []
        with self.locked():
            for path in self.daily_files(newest_first=False):
                tail = cut_partial_tail(path)
                if tail is not None:
                    cut.append((path, tail))
        return cut

    # -- paths -------------------------------------------------------------

    def day_of(self, msg_time_iso: str) -> date:
        """The journal day of a message: its time in the configured zone."""
        return parse_iso(msg_time_iso).astimezone(self._zone).date()

    def path_for(self, day: date) -> Path:
        return self.root / f"{day.isoformat()}.md"

    def daily_files(self, newest_first: bool = True) -> list[Path]:
        if not self.root.is_dir():
            return []
        files = [p for p in self.root.iterdir() if _DAILY_NAME.match(p.name) and p.is_file()]
        # ISO dates sort lexically in time order.
        return sorted(files, key=lambda p: p.name, reverse=newest_first)

    # -- writing -----------------------------------------------------------

    def header(self, day: date) -> str:
        return (
            f"# Daily Memory Log {day.isoformat()}\n"
            f"Append-only log of ingested guild messages (times in UTC, day in {self.tz}).\n"
            "\n"
            "## Entries\n"
            "\n"
        )

    def append(
        self,
        msg_time_iso: str,
        author_name: str,
        author_id: str,
        guild_id: str,
        channel_id: str,
        content: str,
    ) -> JournalLine:
        """Append one message line to the file of its day (imports land on their own day)."""
        line, _ = self._append(
            msg_time_iso, author_name, author_id, guild_id, channel_id, content, once=False
        )
        return line

    def append_once(
        self,
        msg_time_iso: str,
        author_name: str,
        author_id: str,
        guild_id: str,
        channel_id: str,
        content: str,
    ) -> bool:
        """Append the line unless exactly this line is already in its day's file;
        True if it was written now. For a message an earlier run accepted: that
        run may have died between writing the line and recording it."""
        _, written = self._append(
            msg_time_iso, author_name, author_id, guild_id, channel_id, content, once=True
        )
        return written

    def _append(
        self,
        msg_time_iso: str,
        author_name: str,
        author_id: str,
        guild_id: str,
        channel_id: str,
        content: str,
        *,
        once: bool,
    ) -> tuple[JournalLine, bool]:
        # A delete or edit that overtook the message has rewritten its text.
        key = message_key(msg_time_iso, author_id, guild_id, channel_id, content)
        with self.locked():
            content = self._rewrites.get(key, content)
            line = self._line(msg_time_iso, author_name, author_id, guild_id, channel_id, content)
            if once and self._contains(line):
                return line, False
            self._write(line)
        return line, True

    def _line(
        self,
        msg_time_iso: str,
        author_name: str,
        author_id: str,
        guild_id: str,
        channel_id: str,
        content: str,
    ) -> JournalLine:
        day = self.day_of(msg_time_iso)
        text = format_line(msg_time_iso, author_name, author_id, guild_id, channel_id, content)
        return JournalLine(day=day, path=self.path_for(day), text=text)

    def _write(self, line: JournalLine) -> None:
        """Append ``line``, whole or not at all; the caller holds the lock."""
        self.root.mkdir(parents=True, exist_ok=True)
        append_whole(line.path, f"{line.text}\n".encode(), self.header(line.day).encode("utf-8"))

    def append_missing(self, lines: Sequence[tuple[str, str, str, str, str, str]]) -> Missing:
        """Write the lines (time, author name, author id, guild, channel, text)
        not already in their day's file. A line cut short in the file (an
        earlier version's full disk) is replaced in place by the whole line.
        One read and at most one write per day, all under the lock; a file
        system error stops it (what was written stays written)."""
        by_day: dict[date, list[str]] = {}
        unplaceable = 0
        with self.locked():
            for when, name, author_id, guild_id, channel_id, content in lines:
                try:
                    key = message_key(when, author_id, guild_id, channel_id, content)
                    content = self._rewrites.get(key, content)
                    line = self._line(when, name, author_id, guild_id, channel_id, content)
                except (ValueError, TypeError):  # a time no day can show
                    unplaceable += 1
                    continue
                by_day.setdefault(line.day, []).append(line.text)
            written = present = 0
            for day, texts in sorted(by_day.items()):
                n = self._add_to_day(day, texts)
                written += n
                present += len(texts) - n
        return Missing(written, present, unplaceable)

    def _add_to_day(self, day: date, texts: list[str]) -> int:
        path = self.path_for(day)
        try:
            original = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            original = ""
        lines = original.splitlines(keepends=True)
        present = {line.rstrip("\r\n") for line in lines}
        todo = [t for t in dict.fromkeys(texts) if t not in present]
        if not todo:
            return 0
        # A line cut short: an existing line that the start of an owed one
        # (from its time on) continues. Looked up by that start.
        by_start: dict[str, list[str]] = {}
        for t in todo:
            by_start.setdefault(t[:_FRAGMENT_MIN], []).append(t)
        replaced: set[str] = set()
        for i, line in enumerate(lines):
            body = line.rstrip("\r\n")
            if len(body) < _FRAGMENT_MIN:
                continue
            for whole in by_start.get(body[:_FRAGMENT_MIN], ()):
                if whole != body and whole.startswith(body) and whole not in replaced:
                    lines[i] = whole + "\n"
                    replaced.add(whole)
                    break
        if replaced:
            rest = [t for t in todo if t not in replaced]
            text = "".join(lines)
            if text and not text.endswith("\n"):
                text += "\n"
            atomic_write_bytes(path, (text + "".join(f"{t}\n" for t in rest)).encode("utf-8"))
        else:
            block = "".join(f"{t}\n" for t in todo).encode("utf-8")
            append_whole(path, block, self.header(day).encode("utf-8"))
        return len(todo)

    def write_day(self, day: date, text: str | None) -> None:
        """Replace one day's file with ``text`` atomically (None: remove it),
        under the lock that appends and redactions hold."""
        path = self.path_for(day)
        with self.locked():
            if text is not None:
                atomic_write_bytes(path, text.encode("utf-8"))
            elif path.exists():
                path.unlink()
                fsync_dir(path.parent)

    @staticmethod
    def _contains(line: JournalLine) -> bool:
        try:
            data = line.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return False
        # Newest lines are at the end, and a replay concerns recent lines.
        return any(existing == line.text for existing in reversed(data.splitlines()))

    def redact_user(self, guild_id: str, user_id: str) -> int:
        """Drop the user's lines in one guild and scrub their id from that guild's other lines.

        Lines of other guilds are untouched, even the same user's: forget is
        per guild. Returns the number of lines removed.
        """
        gid = clean_id(guild_id)
        uid = clean_id(user_id)
        if not gid or not uid:
            raise InvalidInput("redact_user needs a guild id and a user id")
        # Whole-id match, so forgetting "12" does not mangle "<@123>".
        mention = re.compile(rf"(?<![0-9A-Za-z_]){re.escape(uid)}(?![0-9A-Za-z_])")
        removed = 0
        with self.locked():
            for path in self.daily_files(newest_first=False):
                n, changed = self._redact_file(path, gid, uid, mention)
                removed += n
                if changed:
                    logger.info(
                        "journal %s: redacted user in guild %s (%d lines)", path.name, gid, n
                    )
        return removed

    def remove_guild(self, guild_id: str) -> int:
        """Drop every line of one guild (a purge); a daily file left with no
        message line is deleted. Returns the number of lines removed."""
        gid = clean_id(guild_id)
        if not gid:
            raise InvalidInput("remove_guild needs a guild id")
        removed = 0
        with self.locked():
            for path in self.daily_files(newest_first=False):
                original = path.read_text(encoding="utf-8", errors="replace")
                out: list[str] = []
                kept_lines = 0
                for line in original.splitlines(keepends=True):
                    m = _LINE.match(line.rstrip("\r\n"))
                    if m is not None and m["guild_id"] == gid:
                        removed += 1
                        continue
                    kept_lines += m is not None
                    out.append(line)
                if len(out) == len(original.splitlines()):
                    continue
                if kept_lines:
                    atomic_write_bytes(path, "".join(out).encode("utf-8"))
                else:
                    path.unlink()
                    fsync_dir(path.parent)
        return removed

    def rewrite_messages(
        self,
        guild_id: str,
        messages: Sequence[tuple[str, str, str, Sequence[str]]],
        content: str,
    ) -> int:
        """Replace the lines of messages (time, author, channel, texts) with
        ``content`` (``DELETED`` for deleted messages, ``EDITED`` + text for an
        edit). A line is known by the message's time, author, guild, channel
        and its journaled text, one of its ``texts`` (a line already marked
        edited, by an earlier edit or an import, is found too). A line for one appended
        later (it was still queued) gets ``content`` too. Each day file is
        rewritten once. Returns the number of lines changed."""
        by_path: dict[Path, set[tuple[str, str, str, str, str]]] = {}
        for when, author_id, channel_id, texts in messages:
            keys = by_path.setdefault(self.path_for(self.day_of(when)), set())
            keys.update(
                message_key(when, author_id, guild_id, channel_id, prefix + t)
                for t in texts
                for prefix in ("", EDITED)
            )
        changed = 0
        with self.locked():
            for keys in by_path.values():
                for key in keys:
                    self._rewrites[key] = content
                    self._rewrites.move_to_end(key)
            while len(self._rewrites) > _REWRITES_KEPT:
                self._rewrites.popitem(last=False)
            for path, keys in by_path.items():
                try:
                    original = path.read_text(encoding="utf-8", errors="replace")
                except FileNotFoundError:
                    continue
                out: list[str] = []
                here = 0
                for line in original.splitlines(keepends=True):
                    body = line.rstrip("\r\n")
                    m = _LINE.match(body)
                    if m is not None and _entry_key(m) in keys:
                        new = body[: m.start("content")] + clean_field(content)
                        here += new != body
                        line = new + line[len(body) :]
                    out.append(line)
                if here:
                    atomic_write_bytes(path, "".join(out).encode("utf-8"))
                changed += here
        return changed

    def _redact_file(
        self, path: Path, gid: str, uid: str, mention: re.Pattern[str]
    ) -> tuple[int, bool]:
        original = path.read_text(encoding="utf-8", errors="replace")
        out: list[str] = []
        removed = 0
        changed = False
        for line in original.splitlines(keepends=True):
            body = line.rstrip("\r\n")
            m = _LINE.match(body)
            if m is None or m["guild_id"] != gid:
                out.append(line)
                continue
            if m["author_id"] == uid:
                removed += 1
                changed = True
                continue
            content = m["content"]
            scrubbed = mention.sub(REDACTED, content)
            if scrubbed != content:
                changed = True
                line = body[: m.start("content")] + scrubbed + line[len(body) :]
            out.append(line)
        if changed:
            atomic_write_bytes(path, "".join(out).encode("utf-8"))
        return removed, changed

    # -- reading -----------------------------------------------------------

    def read_entries(self, path: Path) -> list[JournalEntry]:
        """Parsed message lines of one daily file, in file order."""
        try:
            data = Path(path).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        entries = []
        for line in data.splitlines():
            entry = parse_line(line)
            if entry is not None:
                entries.append(entry)
        return entries

    def days(self) -> list[JournalDay]:
        """Each daily file, newest first, with its size (one that vanished is left out)."""
        out = []
        for path in self.daily_files():
            try:
                size = path.stat().st_size
            except OSError:
                continue
            out.append(JournalDay(day=path.stem, size=size))
        return out

    def entries_of_day(self, day: date | str) -> list[JournalEntry] | None:
        """The parsed message lines of one day; None when it has no (or an empty) file."""
        text = self.read_day(day)
        if not text:
            return None
        return [e for e in map(parse_line, text.splitlines()) if e is not None]

    def read_day(self, day: date | str) -> str:
        """The raw text of one day's file, or ``""`` if there is none."""
        if isinstance(day, str):
            # The dashboard passes user input here: parsing to a date is what
            # stops "../" from reaching outside the journal folder.
            try:
                day = date.fromisoformat(day.strip())
            except ValueError as exc:
                raise InvalidInput(f"not a date: {day!r}") from exc
        try:
            return self.path_for(day).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
