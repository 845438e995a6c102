"""Shared pieces of the CLI subcommands: settings, opening the engine, progress.

Paths follow ``guildlore run`` exactly (``bot.settings``): ``--data-dir`` →
``GUILDLORE_DATA_DIR`` (or the config file) → ``./data`` for the database, so
every subcommand looks at the same database and journal as the bot.

Two ways to open the engine:

* ``open_memory(..., ingest=True)`` starts everything (ingest queue, workers,
  replay of unfinished messages, embedding worker) — for ``import``;
* ``ingest=False`` opens the database and the embedder only. Read-mostly
  commands (``search``, ``forget``, ``snapshot``, ``reindex``) use it so they
  never start processing the bot's pending inbox behind its back when both
  run on one data dir.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import math
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.settings import Settings
    from memory import Memory


class CliError(Exception):
    """A problem to print (without a traceback) before exiting with ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# What to do once the disk is fixed, by command (the default: run it again).
AFTER_DISK_TROUBLE = {
    "import": "run the same import again: it goes on where this one stopped, and what was "
    "stored is kept",
    "forget": "run the same forget again to finish the erase (journal lines and the file "
    "rewrite included)",
    "purge-guild": "run the same purge-guild again to finish it",
    "migrate-db": "run the same migrate-db again: it resumes",
}


def reports_errors(
    fn: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """Turn a ``CliError`` raised by a subcommand into its message and exit
    status, and a full, read-only or failing disk (``memory.disk``) into one
    line that says what happened and what to do, exit status 1."""

    @functools.wraps(fn)
    def wrapper(args: argparse.Namespace) -> int:
        if not getattr(args, "verbose", False):
            # The engine logs at INFO for the bot's log; a terminal command
            # shows its own progress and summary instead.
            logging.getLogger().setLevel(logging.WARNING)
            # The engine's disk trouble too: the command ends with the one
            # line below, or its summary counts what is owed.
            for handler in logging.getLogger().handlers:
                handler.addFilter(_not_disk_trouble)
        try:
            return fn(args)
        except CliError as exc:
            print(str(exc), file=sys.stderr)
            return exc.code
        except Exception as exc:
            line = disk_trouble_line(args, exc)
            if line is None:
                raise
            print(line, file=sys.stderr)
            return 1

    return wrapper


def _not_disk_trouble(record: logging.LogRecord) -> bool:
    return not getattr(record, "disk_trouble", False)


def disk_trouble_line(args: argparse.Namespace, exc: BaseException) -> str | None:
    """The one line for an error a disk caused, or None for any other error."""
    from memory import disk_problem

    problem = disk_problem(exc)
    if problem is None:
        return None
    command = str(getattr(args, "command", None) or "")
    where = getattr(args, "storage_where", None) or problem.path
    then = AFTER_DISK_TROUBLE.get(command, "run the same command again")
    return f"guildlore{' ' + command if command else ''}: {problem.line(where, then)}"


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="TOML settings file (default: GUILDLORE_CONFIG); the same settings as `run`",
    )


def load_cli_settings(
    args: argparse.Namespace, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Settings as ``guildlore run`` would see them, plus command-line overrides."""
    from bot.settings import SettingsError, load_settings

    given: dict[str, Any] = {"data_dir": getattr(args, "data_dir", None)}
    given.update(overrides or {})
    try:
        settings = load_settings(config_file=getattr(args, "config", None), overrides=given)
    except SettingsError as exc:
        raise CliError(exc.report(), code=2) from exc
    # Named by a disk trouble line (``reports_errors``): where the data is.
    args.storage_where = str(settings.resolved_db_path.parent)
    return settings


@contextlib.asynccontextmanager
async def open_memory(
    settings: Settings,
    *,
    ingest: bool = True,
    embedder: Any = None,
    drain_timeout: float | None = None,
) -> AsyncIterator[Memory]:
    """The engine for ``settings``; closed (drained, snapshot written) on exit."""
    from memory import GuildloreError, Memory, build_clients, disk_problem

    async with build_clients(
        settings.llm_config(), use_llm_extractor=settings.use_llm_extractor
    ) as clients:
        try:
            memory = await Memory.open(
                settings.memory_config(),
                extractor=clients.extractor,
                embedding_client=clients.openai,
                env_embedding_model=settings.embedding_default_model,
                embedder=embedder,
                ingest=ingest,
            )
        except GuildloreError as exc:
            if disk_problem(exc) is not None:
                raise  # said in one line by ``reports_errors``
            raise CliError(f"cannot open the memory database: {exc}") from exc
        try:
            yield memory
        finally:
            await memory.close(drain_timeout=drain_timeout)


def describe_paths(settings: Settings) -> str:
    return f"database {settings.database_label}, journal {settings.resolved_journal_dir}"


# -- progress ------------------------------------------------------------------------------


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover


def fmt_duration(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """A one-line progress bar on a terminal; plain periodic lines otherwise.

    ``update(done_bytes, messages, note)``: bytes decide the fraction and ETA,
    messages the rate. Cheap to call often (redraws are throttled).
    """

    def __init__(
        self,
        total_bytes: int,
        *,
        stream: IO[str] | None = None,
        label: str = "importing",
        tty: bool | None = None,
        line_interval_s: float = 5.0,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = max(0, total_bytes)
        self.label = label
        self.tty = self.stream.isatty() if tty is None else tty
        self.started = time.monotonic()
        # Seconds it took to read everything: the rate and ETA stop there, so
        # a later stage (embedding messages) does not drag the shown rate down.
        self._read_s: float | None = None
        self._last_draw = 0.0
        self._interval = 0.1 if self.tty else line_interval_s
        self._width = 0
        self.done = 0
        self.messages = 0
        self.note = ""

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def line(self) -> str:
        elapsed = max(1e-6, self._read_s if self._read_s is not None else self.elapsed())
        frac = min(1.0, self.done / self.total) if self.total else 1.0
        rate = self.messages / elapsed
        byte_rate = self.done / elapsed
        remaining = (self.total - self.done) / byte_rate if byte_rate > 0 else float("inf")
        eta = "done" if frac >= 1.0 else f"ETA {fmt_duration(remaining)}"
        if self.tty:
            bar_w = 24
            filled = int(bar_w * frac)
            bar = "[" + "#" * filled + "-" * (bar_w - filled) + "] "
        else:
            bar = ""
        text = (
            f"{self.label} {bar}{frac * 100:5.1f}% "
            f"{_fmt_bytes(self.done)}/{_fmt_bytes(self.total)}  "
            f"{self.messages} msgs  {rate:,.0f} msg/s  {eta}"
        )
        if self.note:
            text += f"  {self.note}"
        return text

    def update(
        self, done_bytes: int, messages: int, note: str | None = None, *, force: bool = False
    ) -> None:
        self.done = done_bytes
        self.messages = messages
        if self._read_s is None and self.total and done_bytes >= self.total:
            self._read_s = self.elapsed()
        if note is not None:
            self.note = note
        now = time.monotonic()
        if not force and now - self._last_draw < self._interval:
            return
        self._last_draw = now
        self._draw()

    def set_note(self, text: str) -> None:
        """Change the note (the bar itself is redrawn at its own pace)."""
        self.update(self.done, self.messages, text)

    def _draw(self) -> None:
        text = self.line()
        if self.tty:
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self, note: str | None = None) -> None:
        if note is not None:
            self.note = note
        self._draw()
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def message(self, text: str) -> None:
        """Print a line without breaking the bar."""
        if self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
        self.stream.write(text + "\n")
        self.stream.flush()
