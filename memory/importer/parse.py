"""The streaming JSON reader under ``memory.importer``: bounded memory for any file size.

Exports can be hundreds of MB, so nothing here loads a file whole. A small
tokenizer walks the structure around the message array by hand (``peek``,
``take``, ``key``, ``array``) and hands each element to
``json.JSONDecoder.raw_decode`` over a sliding text window; memory stays
bounded by the largest single value, never the file. Every error is an
``ImportFormatError`` carrying the file's name and the byte position (and
line) where reading stopped, so a user can find the damage.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from memory.errors import ImportFormatError

__all__ = [
    "MAX_VALUE_CHARS",
    "READ_CHUNK_BYTES",
    "ExportReader",
    "not_an_export",
    "tail_message_count",
    "utf8_len",
]

READ_CHUNK_BYTES = 1 << 20
# A single JSON value larger than this is not a Discord message (the biggest
# real ones, with embeds and reaction user lists, are tens of KB); refusing it
# keeps memory bounded on a malformed or foreign file.
MAX_VALUE_CHARS = 64 << 20
# A decode error this close to the end of the window may only mean the value
# continues in the next chunk (a cut literal, number or \\u escape).
_TAIL_SLACK = 16

_WS = re.compile(r"[ \t\n\r]*")
_MESSAGE_COUNT = re.compile(r'"messageCount"\s*:\s*(\d+)\s*}\s*$')


class ExportReader:
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
            offset += utf8_len(self.buf[self.i : index])
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

    def fill(self, want: int = 0) -> bool:
        """Read ``want`` more bytes, at least one chunk; False once the file is exhausted."""
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
        self.offset += utf8_len(chunk)
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
            raise self.unexpected(got, f"expected '{char}' {what}")
        self.advance(self.i + 1)

    def unexpected(self, got: str, expectation: str) -> ImportFormatError:
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

    def key(self) -> str:
        """A field name and its ':'."""
        got = self.peek()
        if got != '"':
            raise self.unexpected(got, "expected a field name in double quotes")
        key = self.value("a field name")
        self.take(":", f"after the field name {key!r}")
        return str(key)

    def array(self, what: str) -> Iterator[Any]:
        """Elements of the array whose '[' is at the read point, decoded one by one."""
        self.take("[", f"to open the {what} array")
        if self.peek() == "]":
            self.advance(self.i + 1)
            return
        n = 0
        while True:
            yield self.value(f"{what} #{n + 1}")
            n += 1
            got = self.peek()
            if got == ",":
                self.advance(self.i + 1)
            elif got == "]":
                self.advance(self.i + 1)
                return
            else:
                raise self.unexpected(got, f"expected ',' or ']' after {what} #{n}")

    def expect_end(self) -> None:
        got = self.peek()
        if got != "":
            raise self.error(f"malformed JSON: unexpected data after the end, found {got!r}")


def utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def not_an_export(reader: ExportReader, first: str) -> ImportFormatError:
    """The error for a file whose first character opens neither an object nor an array."""
    if first == "":
        return ImportFormatError("file is empty", path=str(reader.path), position=reader.offset)
    return reader.error(
        "not a DiscordChatExporter JSON export or a Discord message array "
        f"(a JSON object or array), found {first!r}"
    )


def tail_message_count(fh: BinaryIO, size: int) -> int | None:
    """DCE's ``messageCount`` (written after the array), read from the last 4 KB."""
    fh.seek(max(0, size - 4096))
    tail = fh.read().decode("utf-8", "replace")
    match = _MESSAGE_COUNT.search(tail)
    return int(match.group(1)) if match else None
