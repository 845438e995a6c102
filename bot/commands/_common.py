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
    from memory.engine import Memory


class CliError(Exception):
    """A problem to print (without a traceback) before exiting with ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def reports_errors(
    fn: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """Turn a ``CliError`` raised by a subcommand into its message and exit status."""

    @functools.wraps(fn)
    def wrapper(args: argparse.Namespace) -> int:
        if not getattr(args, "verbose", False):
            # The engine logs at INFO for the bot's log; a terminal command
            # shows its own progress and summary instead.
            logging.getLogger().setLevel(logging.WARNING)
        try:
            return fn(args)
        except CliError as exc:
            print(str(exc), file=sys.stderr)
            return exc.code

    return wrapper


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
        return load_settings(config_file=getattr(args, "config", None), overrides=given)
    except SettingsError as exc:
        raise CliError(exc.report(), code=2) from exc


def build_extractor(settings: Settings) -> tuple[Any, Any]:
    """(openai client or None, extractor or None for the offline rules)."""
    llm = settings.llm_config()
    client = None
    if llm.enabled:
        from memory.llm import make_openai_client

        client = make_openai_client(llm)
    extractor = None
    if settings.use_llm_extractor and client is not None:
        from memory.extract.llm import LLMExtractor

        extractor = LLMExtractor(client, llm.extract_model or llm.chat_model, llm.timeout_s)
    return client, extractor


@contextlib.asynccontextmanager
async def open_memory(
    settings: Settings,
    *,
    ingest: bool = True,
    embedder: Any = None,
    drain_timeout: float | None = None,
) -> AsyncIterator[Memory]:
    """The engine for ``settings``; closed (drained, snapshot written) on exit."""
    from memory.engine import Memory
    from memory.errors import MemoryError_

    client, extractor = build_extractor(settings)
    if extractor is None:
        from memory.extract.rules.extractor import RuleExtractor

        extractor = RuleExtractor()
    memory = Memory(
        settings.memory_config(),
        extractor=extractor,
        embedding_client=client,
        env_embedding_model=settings.embedding_default_model,
        embedder=embedder,
    )
    try:
        if ingest:
            await memory.start()
        else:
            await _open_without_ingest(memory)
    except MemoryError_ as exc:
        raise CliError(f"cannot open the memory database: {exc}") from exc
    try:
        yield memory
    finally:
        if ingest:
            await memory.close(drain_timeout=drain_timeout)
        else:
            await memory.embeddings.stop()
            await memory.db.close()
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()


async def _open_without_ingest(memory: Memory) -> None:
    # What Memory.start() does minus the queue, its workers and the replay:
    # the database (migrated) and each guild's embedding model.
    from memory.embed.service import GUILD_MODEL_KEY
    from memory.store import ops as store_ops

    await memory.db.open()
    stored = await memory.db.read(store_ops.all_guild_settings)
    for gid, values in stored.items():
        memory.embeddings.set_guild_model(gid, values.get(GUILD_MODEL_KEY))


def describe_paths(settings: Settings) -> str:
    return f"database {settings.resolved_db_path}, journal {settings.resolved_journal_dir}"


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
