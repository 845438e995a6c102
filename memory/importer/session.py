"""Importing export files into a running engine, the way ``guildlore import`` does.

Every message goes through ``Memory.ingest_message`` — the live path — with
``source="import"`` and its original timestamp, so journals land on the days
the messages were written. ``backpressure=True`` makes the reader wait for
queue room instead of dropping, and the reader also waits while too many
accepted messages are unprocessed (queued or in a worker's hands) or unembedded,
so memory stays bounded however large the file.

Facts are embedded as they are made; message vectors (99% of the embedding
work) wait until every message is processed, then the imported guilds are
back-filled, so the memory is complete and searchable by words long before.

A file that cannot be read (truncated, malformed, wrong schema) is reported
with its byte position; what was read before the error is imported and
settled, and the other files still run. A first stop request ends the reading
and finishes what was accepted; a forced one stops at once (the rest stays
``pending`` in the inbox and is replayed by the next run).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memory.errors import ImportFormatError, NotRegularFile
from memory.importer.reader import ImportRecord, ImportStats, iter_export, read_header
from memory.models import IncomingMessage, IngestOutcome

if TYPE_CHECKING:
    from memory.engine import Memory

# Records handed to the engine at once: enough for its group commit to batch
# the inbox writes, small enough that a stop request is answered at once.
CHUNK = 256
# The reader pauses while more than this many facts/messages wait for a vector,
EMBED_BACKLOG_MAX = 2_000
# or while more than this many accepted messages wait to be processed (queued
# or taken by a worker). The queue's own capacity bounds only the first; this
# keeps memory bounded whatever the engine holds in flight.
PROCESS_BACKLOG_MAX = 2_048


class ImportProgress(Protocol):
    """Where an import reports how far it got (a terminal progress bar)."""

    def update(
        self, done_bytes: int, messages: int, note: str | None = None, *, force: bool = False
    ) -> None: ...

    def set_note(self, text: str) -> None: ...

    def message(self, text: str) -> None: ...


class ImportStop:
    """First ``trigger``: stop reading, finish what was accepted. Second: stop now.

    ``on_request(forced)`` is called on each trigger (to tell the person why
    the import is still running, or that it stops now)."""

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self.forced = False
        self.on_request: Callable[[bool], None] | None = None

    def trigger(self) -> None:
        if self.requested.is_set():
            self.forced = True
        self.requested.set()
        if self.on_request is not None:
            self.on_request(self.forced)


@dataclass
class ImportReport:
    """What an import did: reader totals, engine outcomes, and what it cost."""

    stats: ImportStats
    new: int = 0
    resumed: int = 0
    already: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    # Paths that are not regular files (a FIFO named *.json): not read, not an error.
    skipped_files: list[str] = field(default_factory=list)
    interrupted: bool = False
    settled: bool = False
    seconds: float = 0.0
    # Until every message was processed and every fact had its vector: the
    # memory is complete and messages are searchable by their words. Message
    # vectors (search by meaning over raw chat) are embedded after that.
    ready_seconds: float = 0.0
    message_vectors_pending: bool = False
    facts_added: int = 0
    facts_updated: int = 0
    fact_vectors: int = 0
    message_vectors: int = 0
    extract_calls: int = 0
    extract_errors: int = 0
    dropped: int = 0
    # Pinned messages made canon lore.
    pinned: int = 0
    # Messages of the imported guilds whose processing failed, at the end:
    # waiting for a retry, or given up.
    waiting_retry: int = 0
    failed: int = 0
    # Journal lines the disk refused (full, read-only), at the end: owed,
    # written at the next start (``memory.roles.journal_owed``).
    journal_owed: int = 0
    # The whole process's high-water mark, set by a command (None in-process).
    peak_rss_mib: float | None = None

    @classmethod
    def unread(cls, problems: Sequence[tuple[Path, BaseException]]) -> ImportReport:
        """The report of an import that read no file: each file's problem as
        the import reports it (a FIFO, device or socket is a skip)."""
        report = cls(ImportStats())
        for path, exc in problems:
            kind = report.skipped_files if isinstance(exc, NotRegularFile) else report.errors
            kind.append(_error_text(exc, path))
        return report

    @property
    def rate(self) -> float:
        return self.stats.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def ready_rate(self) -> float:
        return self.stats.messages / self.ready_seconds if self.ready_seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.stats.as_dict(),
            "new": self.new,
            "resumed": self.resumed,
            "already_imported": self.already,
            "rejected": dict(sorted(self.rejected.items())),
            "facts_added": self.facts_added,
            "facts_updated": self.facts_updated,
            "fact_vectors": self.fact_vectors,
            "message_vectors": self.message_vectors,
            "extract_calls": self.extract_calls,
            "extract_errors": self.extract_errors,
            "dropped": self.dropped,
            "pinned": self.pinned,
            "waiting_retry": self.waiting_retry,
            "failed": self.failed,
            "journal_owed": self.journal_owed,
            "errors": list(self.errors),
            "skipped_files": list(self.skipped_files),
            "interrupted": self.interrupted,
            "settled": self.settled,
            "seconds": round(self.seconds, 3),
            "messages_per_s": round(self.rate, 1),
            "ready_seconds": round(self.ready_seconds, 3),
            "ready_messages_per_s": round(self.ready_rate, 1),
            "message_vectors_pending": self.message_vectors_pending,
            "peak_rss_mib": self.peak_rss_mib,
        }


async def import_files(
    memory: Memory,
    paths: Sequence[Path],
    *,
    default_guild_id: str | None = None,
    progress: ImportProgress | None = None,
    stop: ImportStop | None = None,
    settle_timeout: float | None = None,
) -> ImportReport:
    """Import ``paths`` into ``memory`` (started with ingest) and wait until it is
    processed and embedded (see the module doc). ``default_guild_id``: for raw
    Discord API messages without a guild id."""
    report = ImportReport(stats=ImportStats())
    stop = stop or ImportStop()

    async def feed(guilds: set[str]) -> None:
        await _read_all(memory, paths, report, stop, progress, default_guild_id, guilds)

    return await _run_import(memory, feed, report, stop, progress, settle_timeout)


async def import_messages(
    memory: Memory,
    messages: Sequence[IncomingMessage],
    *,
    settle_timeout: float | None = None,
) -> ImportReport:
    """Import messages that are already built (a benchmark's conversations, say)
    exactly as ``import_files`` imports a file's: chunks with backpressure, the
    facts and their vectors first, then every message's vector."""
    report = ImportReport(stats=ImportStats())
    stop = ImportStop()

    async def feed(guilds: set[str]) -> None:
        for start in range(0, len(messages), CHUNK):
            chunk = messages[start : start + CHUNK]
            _count(
                report,
                await asyncio.gather(*(memory.ingest_message(m, backpressure=True) for m in chunk)),
            )
            await _pin(memory, report, chunk)
            report.stats.messages += len(chunk)
            guilds.update(m.guild_id for m in chunk if m.guild_id)
            await _wait_for_backlog(memory, stop)

    return await _run_import(memory, feed, report, stop, None, settle_timeout)


async def _run_import(
    memory: Memory,
    feed: Callable[[set[str]], Awaitable[None]],
    report: ImportReport,
    stop: ImportStop,
    progress: ImportProgress | None,
    settle_timeout: float | None,
) -> ImportReport:
    """What every import shares around ``feed``: the embedding's import mode,
    waiting until the memory is ready, the message vectors, the counts."""
    started = time.monotonic()
    embeddings = memory.embeddings
    before = memory.admin.counters()
    vectors_before = (embeddings.stats.fact_vectors, embeddings.stats.message_vectors)
    guilds: set[str] = set()
    # Facts first: message vectors would otherwise queue ahead of the facts'
    # and hold the reader back.
    deferred_before, embeddings.defer_messages = embeddings.defer_messages, True
    # The import is what the person at the terminal is waiting for: its
    # embedding runs at normal priority (see EmbeddingService.low_priority).
    niced_before, embeddings.low_priority = embeddings.low_priority, False
    try:
        try:
            await feed(guilds)
            report.interrupted = stop.requested.is_set()
            report.settled = await _settle(memory, stop, progress, settle_timeout)
        finally:
            embeddings.defer_messages = deferred_before
        report.ready_seconds = time.monotonic() - started
        if report.settled and not report.interrupted:
            report.message_vectors_pending = not await _embed_messages(
                memory, sorted(guilds), stop, progress
            )
            report.interrupted = stop.requested.is_set()
        else:
            report.message_vectors_pending = True
    finally:
        embeddings.low_priority = niced_before
    if guilds:
        # At the very end: the engine keeps retrying while the vectors are made.
        counts = await memory.inbox.unfinished_counts(sorted(guilds))
        report.waiting_retry = counts.get("retry", 0)
        report.failed = counts.get("failed", 0)
    report.journal_owed = await memory.journal_owed.count()
    report.seconds = time.monotonic() - started
    after = memory.admin.counters()
    for name, key in (
        ("facts_added", "facts_added"),
        ("facts_updated", "facts_updated"),
        ("extract_calls", "extract_calls"),
        ("extract_errors", "extract_errors"),
        ("dropped", "ingest_dropped"),
    ):
        setattr(report, name, int(after[key]) - int(before[key]))
    report.fact_vectors = embeddings.stats.fact_vectors - vectors_before[0]
    report.message_vectors = embeddings.stats.message_vectors - vectors_before[1]
    return report


def _count(report: ImportReport, outcomes: Sequence[IngestOutcome]) -> None:
    for out in outcomes:
        if out.status == "queued":
            if out.reason == "resumed":
                report.resumed += 1
            else:
                report.new += 1
        elif out.status == "duplicate":
            report.already += 1
        else:
            report.rejected[(out.reason or "rejected")[:60]] += 1


async def _pin(memory: Memory, report: ImportReport, messages: Sequence[IncomingMessage]) -> None:
    """Pinned messages of an export are canon lore, as pins on Discord are."""
    for m in messages:
        if m.pinned and m.guild_id:
            fact = await memory.pins.pin(
                m.guild_id, m.channel_id, m.id, m.content, created_at=m.created_at
            )
            report.pinned += fact is not None


def _take(
    it: Iterator[ImportRecord], n: int
) -> tuple[list[ImportRecord], BaseException | None, bool]:
    """Up to ``n`` records (run in a thread); a read error after some records keeps them."""
    out: list[ImportRecord] = []
    try:
        for _ in range(n):
            out.append(next(it))
    except StopIteration:
        return out, None, True
    except (ImportFormatError, OSError) as exc:
        return out, exc, True
    return out, None, False


def _error_text(exc: BaseException, path: Path) -> str:
    text = str(exc)
    return text if str(path) in text else f"{path}: {text}"


def _note(progress: ImportProgress | None, text: str) -> None:
    if progress is not None:
        progress.set_note(text)


async def _read_all(
    memory: Memory,
    paths: Sequence[Path],
    report: ImportReport,
    stop: ImportStop,
    progress: ImportProgress | None,
    default_guild_id: str | None,
    guilds: set[str],
) -> None:
    """Read every file into the ingest path; ``guilds`` collects the guild ids seen."""
    done_bytes = 0
    read_messages = 0

    def show(position: int, note: str | None = None, force: bool = False) -> None:
        if progress is not None:
            progress.update(done_bytes + position, read_messages, note, force=force)

    def failed(exc: BaseException, path: Path) -> None:
        text = _error_text(exc, path)
        report.errors.append(text)
        if progress is not None:
            progress.message(f"error: {text}")

    for path in paths:
        if stop.requested.is_set():
            break
        file_stats = ImportStats()
        try:
            header = await asyncio.to_thread(read_header, path)
        except NotRegularFile as exc:
            text = _error_text(exc, path)
            report.skipped_files.append(text)
            if progress is not None:
                progress.message(f"skipped {text}")
            continue
        except (ImportFormatError, OSError) as exc:
            failed(exc, path)
            continue
        size = header.size
        if header.guild_id and header.channel_id and header.guild_id != "0":
            await memory.guilds.set_names(
                header.guild_id,
                guild_name=header.guild_name or None,
                channels={header.channel_id: header.channel_name} if header.channel_name else None,
            )
        members: dict[str, dict[str, str]] = {}
        # Channel objects of an API dump: the guild's channel names.
        channels: dict[str, dict[str, str]] = {}
        it = iter_export(path, default_guild_id=default_guild_id)
        position = 0
        try:
            while not stop.requested.is_set():
                records, error, finished = await asyncio.to_thread(_take, it, CHUNK)
                messages = []
                for rec in records:
                    file_stats.add(rec)
                    if rec.channel is not None and rec.channel.name:
                        channels.setdefault(rec.channel.guild_id, {})[rec.channel.channel_id] = (
                            rec.channel.name
                        )
                    if rec.message is not None:
                        messages.append(rec.message)
                        m = rec.message
                        members.setdefault(m.guild_id or "", {})[m.author_id] = m.author_name
                if records:
                    position = records[-1].position
                if messages:
                    _count(
                        report,
                        await asyncio.gather(
                            *(memory.ingest_message(m, backpressure=True) for m in messages)
                        ),
                    )
                    await _pin(memory, report, messages)
                    read_messages += len(messages)
                show(position)
                if error is not None:
                    failed(error, path)
                    break
                if finished:
                    position = size
                    break
                await _wait_for_backlog(memory, stop)
        finally:
            if hasattr(it, "close"):
                await asyncio.to_thread(it.close)
        file_stats.file_done(position)
        report.stats.merge(file_stats)
        done_bytes += position  # the whole size unless stopped or broken part-way
        for gid, names in members.items():
            if gid and names:
                guilds.add(gid)
                await memory.guilds.set_names(gid, members=names)
        for gid, named in channels.items():
            await memory.guilds.set_names(gid, channels=named)
        show(0, force=True)


def _backlogged(memory: Memory) -> bool:
    c = memory.admin.counters()
    unprocessed = int(c["queue_depth"]) + int(c["queue_in_flight"])
    return unprocessed > PROCESS_BACKLOG_MAX or int(c["embedding_backlog"]) > EMBED_BACKLOG_MAX


async def _wait_for_backlog(memory: Memory, stop: ImportStop) -> None:
    # The engine has no "backlog below N" event; poll, but wake at once on a stop.
    while _backlogged(memory):
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.requested.wait(), timeout=0.02)
        if stop.requested.is_set():
            return


async def _settle(
    memory: Memory, stop: ImportStop, progress: ImportProgress | None, timeout: float | None
) -> bool:
    """Wait until every accepted message is processed and embedded (or a forced stop)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not stop.forced:
        if await memory.settle(timeout=0.5):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        c = memory.admin.counters()
        queued = int(c["queue_depth"]) + int(c["queue_in_flight"])
        _note(progress, f"finishing: {queued} to process, {c['embedding_backlog']} to embed")
    return False


async def _embed_messages(
    memory: Memory, guild_ids: Sequence[str], stop: ImportStop, progress: ImportProgress | None
) -> bool:
    """Embed the imported guilds' facts and messages that have no vector yet
    (facts too: an earlier run killed mid-way leaves some); False if a stop
    request came first (the rest is found by the next import or reindex)."""

    def show(kind: str, n: int) -> None:
        _note(progress, f"embedding {kind}: {n:,} done")

    await memory.embeddings.reindex(guild_ids, progress=show, should_stop=stop.requested.is_set)
    return not stop.requested.is_set()
