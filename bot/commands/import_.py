"""``guildlore import PATH...``: DiscordChatExporter exports and raw API arrays.

Every message goes through ``Memory.ingest_message`` — the live path — with
``source="import"`` and its original timestamp, so journals land on the days
the messages were written. ``backpressure=True`` makes the reader wait for
queue room instead of dropping, and the reader also waits while too many
accepted messages are unprocessed (queued or in a worker's hands) or unembedded,
so memory stays bounded however large the file.

Re-running an import is a no-op for messages already processed (ingest
de-duplicates by id). Messages accepted but not processed when the run ended
(Ctrl-C twice, a crash) are ``pending`` in the inbox and are replayed by the
next run — of this command or of the bot.

A message whose extraction failed (an LLM outage: errors, rate limits,
timeouts, replies that are not the JSON asked for) is not lost: it waits for
a retry, which the engine makes on its own with a growing back-off, the next
import makes at once, and the bot makes at start-up. One that cannot be
processed at all, or that failed ``ingest.retry_max_attempts`` times, is
``failed`` until ``guildlore retry``. The summary counts both for the
imported guilds.

A file that cannot be read (truncated, malformed, wrong schema) is reported
with its byte position; what was read before the error is imported and
settled, the other files still run, and the exit status is 1.
Exit status 3 when every file was read but messages of the imported guilds
wait for a retry or have failed: the memory is not complete yet (run the
same import again, or ``guildlore retry``). Exit status 130 after
Ctrl-C/SIGTERM.

This module reads the files, feeds the engine and waits for it to settle; what
the run tallies and prints (``ImportReport``, peak memory) lives in
``bot.commands.import_report`` and is re-exported here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.commands._common import (
    CliError,
    Progress,
    add_config_argument,
    describe_paths,
    load_cli_settings,
    open_memory,
    reports_errors,
)
from bot.commands.import_report import ImportReport, error_text, peak_rss_mib, progress_note

if TYPE_CHECKING:
    from memory.engine import Memory
    from memory.importer.reader import ImportRecord

# Records handed to the engine at once: enough for its group commit to batch
# the inbox writes, small enough that Ctrl-C is answered at once.
CHUNK = 256
# The reader pauses while more than this many facts/messages wait for a vector,
EMBED_BACKLOG_MAX = 2_000
# or while more than this many accepted messages wait to be processed (queued
# or taken by a worker). The queue's own capacity bounds only the first; this
# keeps memory bounded whatever the engine holds in flight.
PROCESS_BACKLOG_MAX = 2_048
EXIT_INTERRUPTED = 130
EXIT_INCOMPLETE = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="export files, or folders searched for *.json",
    )
    parser.add_argument(
        "--guild",
        default=None,
        metavar="ID",
        help="guild id for raw Discord API messages without guild_id (DCE exports name theirs)",
    )
    parser.add_argument(
        "--extractor",
        choices=("auto", "llm", "rules"),
        default=None,
        help="fact extractor (default: the llm.extractor setting; 'rules' is offline)",
    )
    parser.add_argument(
        "--embeddings",
        choices=("local", "openai", "none"),
        default=None,
        help="embedding provider (default: the embedding.provider setting)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_config_argument(parser)


class StopSignal:
    """First Ctrl-C/SIGTERM: stop reading, finish what was accepted. Second: stop now."""

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self.forced = False
        self.on_request: Any = None

    def trigger(self) -> None:
        if self.requested.is_set():
            self.forced = True
            if self.on_request is not None:
                self.on_request(True)
            return
        self.requested.set()
        if self.on_request is not None:
            self.on_request(False)

    @contextlib.contextmanager
    def installed(self, loop: asyncio.AbstractEventLoop) -> Iterator[None]:
        sigs = (signal.SIGINT, signal.SIGTERM)
        added: list[signal.Signals] = []
        for sig in sigs:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.trigger)
                added.append(sig)
        try:
            yield
        finally:
            for sig in added:
                loop.remove_signal_handler(sig)


def _take(
    it: Iterator[ImportRecord], n: int
) -> tuple[list[ImportRecord], BaseException | None, bool]:
    """Up to ``n`` records (run in a thread); a read error after some records keeps them."""
    from memory.errors import ImportFormatError

    out: list[ImportRecord] = []
    try:
        for _ in range(n):
            out.append(next(it))
    except StopIteration:
        return out, None, True
    except (ImportFormatError, OSError) as exc:
        return out, exc, True
    return out, None, False


async def import_files(
    memory: Memory,
    paths: Sequence[Path],
    *,
    default_guild_id: str | None = None,
    progress: Progress | None = None,
    stop: StopSignal | None = None,
    settle_timeout: float | None = None,
) -> ImportReport:
    """Import ``paths`` into ``memory`` and wait until it is processed (see module doc)."""
    from memory.importer.reader import ImportStats

    started = time.monotonic()
    before = memory.counters()
    vectors_before = (memory.embeddings.stats.fact_vectors, memory.embeddings.stats.message_vectors)
    report = ImportReport(stats=ImportStats())
    stop = stop or StopSignal()
    guilds: set[str] = set()
    embeddings = memory.embeddings
    # Facts first: message vectors would otherwise queue ahead of the facts'
    # (they are 99% of the embedding work) and hold the reader back.
    deferred_before, embeddings.defer_messages = embeddings.defer_messages, True
    # The import is what the person at the terminal is waiting for: its
    # embedding runs at normal priority (see EmbeddingService.low_priority).
    niced_before, embeddings.low_priority = embeddings.low_priority, False
    try:
        try:
            await _read_all(memory, paths, report, stop, progress, default_guild_id, guilds)
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
    report.seconds = time.monotonic() - started
    after = memory.counters()
    for name, key in (
        ("extract_calls", "extract_calls"),
        ("facts_added", "facts_added"),
        ("facts_updated", "facts_updated"),
        ("extract_errors", "extract_errors"),
        ("dropped", "ingest_dropped"),
    ):
        setattr(report, name, int(after[key]) - int(before[key]))
    stats = memory.embeddings.stats
    report.fact_vectors = stats.fact_vectors - vectors_before[0]
    report.message_vectors = stats.message_vectors - vectors_before[1]
    return report


async def _read_all(
    memory: Memory,
    paths: Sequence[Path],
    report: ImportReport,
    stop: StopSignal,
    progress: Progress | None,
    default_guild_id: str | None,
    guilds: set[str],
) -> None:
    """Read every file into the ingest path; ``guilds`` collects the guild ids seen."""
    from memory.errors import ImportFormatError
    from memory.importer.reader import ImportStats, iter_export, read_header

    done_bytes = 0
    read_messages = 0

    def show(position: int, note: str | None = None, force: bool = False) -> None:
        if progress is not None:
            progress.update(done_bytes + position, read_messages, note, force=force)

    for path in paths:
        if stop.requested.is_set():
            break
        file_stats = ImportStats()
        try:
            size = path.stat().st_size
            header = read_header(path)
        except (ImportFormatError, OSError) as exc:
            report.errors.append(error_text(exc, path))
            if progress is not None:
                progress.message(f"error: {error_text(exc, path)}")
            continue
        if header.guild_id and header.channel_id and header.guild_id != "0":
            await memory.set_names(
                header.guild_id,
                guild_name=header.guild_name or None,
                channels={header.channel_id: header.channel_name} if header.channel_name else None,
            )
        members: dict[str, dict[str, str]] = {}
        it = iter_export(path, default_guild_id=default_guild_id)
        position = 0
        try:
            while not stop.requested.is_set():
                records, error, finished = await asyncio.to_thread(_take, it, CHUNK)
                messages = []
                for rec in records:
                    file_stats.add(rec)
                    if rec.message is not None:
                        messages.append(rec.message)
                        m = rec.message
                        members.setdefault(m.guild_id or "", {})[m.author_id] = m.author_name
                if records:
                    position = records[-1].position
                if messages:
                    outcomes = await asyncio.gather(
                        *(memory.ingest_message(m, backpressure=True) for m in messages)
                    )
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
                    read_messages += len(messages)
                show(position)
                if error is not None:
                    text = error_text(error, path)
                    report.errors.append(text)
                    if progress is not None:
                        progress.message(f"error: {text}")
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
                await memory.set_names(gid, members=names)
        show(0, force=True)


def _backlogged(memory: Memory) -> bool:
    c = memory.counters()
    unprocessed = int(c["queue_depth"]) + int(c["queue_in_flight"])
    return unprocessed > PROCESS_BACKLOG_MAX or int(c["embedding_backlog"]) > EMBED_BACKLOG_MAX


async def _wait_for_backlog(memory: Memory, stop: StopSignal) -> None:
    # The engine has no "backlog below N" event; poll, but wake at once on Ctrl-C.
    while _backlogged(memory):
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.requested.wait(), timeout=0.02)
        if stop.requested.is_set():
            return


async def _settle(
    memory: Memory, stop: StopSignal, progress: Progress | None, timeout: float | None
) -> bool:
    """Wait until every accepted message is processed and embedded (or a second Ctrl-C)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not stop.forced:
        if await memory.settle(timeout=0.5):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        c = memory.counters()
        queued = int(c["queue_depth"]) + int(c["queue_in_flight"])
        progress_note(
            progress, f"finishing: {queued} to process, {c['embedding_backlog']} to embed"
        )
    return False


async def _embed_messages(
    memory: Memory, guild_ids: Sequence[str], stop: StopSignal, progress: Progress | None
) -> bool:
    """Embed the imported guilds' facts and messages that have no vector yet
    (facts too: an earlier run killed mid-way leaves some); False if Ctrl-C
    stopped it first (the rest is found by the next import or reindex)."""

    def show(kind: str, n: int) -> None:
        progress_note(progress, f"embedding {kind}: {n:,} done")

    await memory.embeddings.reindex(guild_ids, progress=show, should_stop=stop.requested.is_set)
    return not stop.requested.is_set()


@reports_errors
def run(args: argparse.Namespace) -> int:
    from memory.errors import InvalidInput
    from memory.importer.reader import iter_paths

    settings = load_cli_settings(
        args,
        {"llm_extractor": args.extractor, "embedding_provider": args.embeddings},
    )
    try:
        paths = list(iter_paths(args.paths))
    except InvalidInput as exc:
        raise CliError(f"guildlore import: {exc}", code=2) from exc
    if args.guild is not None and not (args.guild.isascii() and args.guild.isdigit()):
        raise CliError(f"guildlore import: --guild must be a Discord id, got {args.guild!r}", 2)
    return asyncio.run(_main(args, settings, paths))


async def _main(args: argparse.Namespace, settings: Any, paths: list[Path]) -> int:
    total = sum(p.stat().st_size for p in paths)
    progress = Progress(total)
    stop = StopSignal()

    def announce(forced: bool) -> None:
        if forced:
            progress.message(
                "interrupted again: stopping now; unprocessed messages are kept for the next run"
            )
        else:
            progress.message(
                "interrupted: finishing the messages already accepted "
                "(Ctrl-C again to stop at once)"
            )

    stop.on_request = announce
    extraction = (
        "LLM (--extractor rules for a faster offline import)"
        if settings.use_llm_extractor
        else "offline rules"
    )
    print(
        f"guildlore import: {len(paths)} file{'s' if len(paths) != 1 else ''} "
        f"({total / 1e6:.1f} MB) into {describe_paths(settings)}; "
        f"extraction: {extraction}; embeddings: {settings.embedding_provider}",
        file=sys.stderr,
    )
    loop = asyncio.get_running_loop()
    with stop.installed(loop):
        async with open_memory(settings, ingest=True, drain_timeout=0.1) as memory:
            report = await import_files(
                memory, paths, default_guild_id=args.guild, progress=progress, stop=stop
            )
            progress.finish("" if report.settled else "not finished")
    report.peak_rss_mib = peak_rss_mib()
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(report.summary())
    for err in report.errors:
        print(f"guildlore import: error: {err}", file=sys.stderr)
    if report.errors:
        print(
            "guildlore import: what was read before each error is imported; fix or re-export "
            "the file and run the same import again (imported messages are skipped)",
            file=sys.stderr,
        )
    if report.interrupted:
        print(
            "guildlore import: interrupted; run the same command again to continue",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if report.errors:
        return 1
    return EXIT_INCOMPLETE if report.waiting_retry or report.failed else 0
