"""``guildlore import PATH...``: DiscordChatExporter exports and raw API arrays.

The engine does the import (``memory.import_files``: the live ingest path,
bounded however large the file, facts embedded before message vectors; see
its module doc). This command finds the files, shows a progress bar, turns
Ctrl-C/SIGTERM into the engine's stop requests and prints the report.

Re-running an import is a no-op for messages already processed (ingest
de-duplicates by id). Messages accepted but not processed when the run ended
(Ctrl-C twice, a crash) are ``pending`` in the inbox and are replayed by the
next run — of this command or of the bot.

A file that cannot be read (truncated, malformed, wrong schema, a broken or
looping symbolic link) is one error line, with its byte position where there
is one; what was read before the error is imported and settled, the other
files still run, and the exit status is 1; when not one file is an export,
nothing is created (no database, no journal folder). A FIFO, device or socket named
``*.json`` is skipped unread and counted (``skipped_files``). Files are opened
and their headers read in a worker thread, so the event loop (and with it
Ctrl-C/SIGTERM) is never held by the file system.

A message whose extraction failed (an LLM outage: errors, rate limits,
timeouts, replies that are not the JSON asked for) is not lost: it waits for
a retry, which the engine makes on its own with a growing back-off, the next
import makes at once, and the bot makes at start-up. One that cannot be
processed at all, or that failed ``ingest.retry_max_attempts`` times, is
``failed`` until ``guildlore retry``. The summary counts both for the
imported guilds.

Exit status 3 when every file was read but messages of the imported guilds
wait for a retry or have failed, or journal lines are owed (the journal's
disk refused them; the next start writes them): the memory is not complete
yet (run the same import again, or ``guildlore retry``). Exit status 130
after Ctrl-C/SIGTERM.

A full or read-only disk stops the import with one line that says so and
what to do (free space, then run the same import again: it goes on where
this one stopped). At most one import runs into a data dir at a time
(``memory.importer.lock``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import stat
import sys
from collections.abc import Iterator
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
from bot.commands.import_report import peak_rss_mib, summary

if TYPE_CHECKING:
    from memory import DatabaseUnavailable, ImportStop

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


@contextlib.contextmanager
def stop_on_signals(stop: ImportStop, loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Ctrl-C/SIGTERM trigger ``stop`` (first: finish what was accepted; second: now)."""
    sigs = (signal.SIGINT, signal.SIGTERM)
    added: list[signal.Signals] = []
    for sig in sigs:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.trigger)
            added.append(sig)
    try:
        yield
    finally:
        for sig in added:
            loop.remove_signal_handler(sig)


@reports_errors
def run(args: argparse.Namespace) -> int:
    from memory import InvalidInput, iter_paths

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
    _require_an_export(args, paths)
    return asyncio.run(_main(args, settings, paths))


def _require_an_export(args: argparse.Namespace, paths: list[Path]) -> None:
    """Refuse before anything is created (the database, the journal folder)
    when not one of the files is an export; files that are not, beside ones
    that are, are reported by the import itself."""
    from memory import GuildloreError, ImportReport, check_export

    problems: list[tuple[Path, BaseException]] = []
    for path in paths:
        try:
            check_export(path)
        except (GuildloreError, OSError) as exc:
            problems.append((path, exc))
        else:
            return
    report = ImportReport.unread(problems)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    for skipped in report.skipped_files:
        print(f"guildlore import: skipped {skipped}", file=sys.stderr)
    for err in report.errors:
        print(f"guildlore import: error: {err}", file=sys.stderr)
    raise CliError(
        "guildlore import: no file is a DiscordChatExporter export or a Discord API message "
        "array; nothing imported, nothing created",
        1,
    )


def _total_bytes(paths: list[Path]) -> int:
    """The regular files' sizes; what cannot be read counts 0 (each is reported later)."""
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            st = path.stat()
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


def database_gone(exc: DatabaseUnavailable) -> str:
    """The one line for a database that went away (past
    ``database.unreachable_exit_s``) or broke during the import."""
    if exc.unreachable:
        return (
            f"guildlore import: the database went away during the import: {exc}. "
            "Run the import again; it resumes (imported messages are skipped)."
        )
    return f"guildlore import: the database failed during the import: {exc}"


async def _main(args: argparse.Namespace, settings: Any, paths: list[Path]) -> int:
    from memory import ImportBusy, import_lock

    try:
        with import_lock(settings.memory_config()):
            return await _import(args, settings, paths)
    except ImportBusy as exc:
        raise CliError(f"guildlore import: {exc}") from exc


async def _import(args: argparse.Namespace, settings: Any, paths: list[Path]) -> int:
    from memory import DatabaseUnavailable, ImportStop, import_files

    total = await asyncio.to_thread(_total_bytes, paths)
    progress = Progress(total)
    stop = ImportStop()

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
    try:
        with stop_on_signals(stop, loop):
            async with open_memory(settings, ingest=True, drain_timeout=0.1) as memory:
                try:
                    report = await import_files(
                        memory, paths, default_guild_id=args.guild, progress=progress, stop=stop
                    )
                except BaseException:
                    # Stopped by an error that is said in one line on the way out:
                    # that what was accepted is finished by the next run goes
                    # without the engine's shutdown warning.
                    logging.getLogger("memory.engine").setLevel(logging.ERROR)
                    raise
                progress.finish("" if report.settled else "not finished")
    except DatabaseUnavailable as exc:
        progress.finish("stopped")
        raise CliError(database_gone(exc), code=1) from exc
    report.peak_rss_mib = peak_rss_mib()
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(summary(report))
    for skipped in report.skipped_files:
        print(f"guildlore import: skipped {skipped}", file=sys.stderr)
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
    return EXIT_INCOMPLETE if report.waiting_retry or report.failed or report.journal_owed else 0
