"""What ``guildlore import`` reports: the ``ImportReport`` and its small helpers.

Kept apart from ``bot.commands.import_`` (which reads the files and waits for
the engine) so that module stays about the import itself: this one holds the
tallies an import collects, how they are printed (``summary``) or serialised
(``as_dict``, the ``--json`` output), the progress-note and error-text helpers,
and the process's peak memory reading.
"""

from __future__ import annotations

import contextlib
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.commands._common import Progress, fmt_duration

if TYPE_CHECKING:
    from memory.importer.reader import ImportStats


@dataclass
class ImportReport:
    """What an import did: reader totals, engine outcomes, and what it cost."""

    stats: ImportStats
    new: int = 0
    resumed: int = 0
    already: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
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
    # Messages of the imported guilds whose processing failed, at the end:
    # waiting for a retry, or given up.
    waiting_retry: int = 0
    failed: int = 0
    # The whole process's high-water mark, set by the command (None in-process).
    peak_rss_mib: float | None = None

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
            "waiting_retry": self.waiting_retry,
            "failed": self.failed,
            "errors": list(self.errors),
            "interrupted": self.interrupted,
            "settled": self.settled,
            "seconds": round(self.seconds, 3),
            "messages_per_s": round(self.rate, 1),
            "ready_seconds": round(self.ready_seconds, 3),
            "ready_messages_per_s": round(self.ready_rate, 1),
            "message_vectors_pending": self.message_vectors_pending,
            "peak_rss_mib": self.peak_rss_mib,
        }

    def summary(self) -> str:
        s = self.stats
        skipped = ", ".join(f"{reason} {n}" for reason, n in s.skipped.most_common())
        lines = [
            f"{'Interrupted' if self.interrupted else 'Imported'}: {s.files} "
            f"file{'s' if s.files != 1 else ''}, {s.bytes / 1e6:.1f} MB in "
            f"{fmt_duration(self.seconds)} ({self.seconds:.1f} s)",
            f"  messages   {s.messages} read: {self.new} new, {self.resumed} resumed, "
            f"{self.already} already imported"
            + (
                ", " + ", ".join(f"{n} rejected ({r})" for r, n in self.rejected.most_common())
                if self.rejected
                else ""
            ),
            f"  skipped    {s.total_skipped}" + (f" ({skipped})" if skipped else ""),
            f"  facts      {self.facts_added} created, {self.facts_updated} updated",
            f"  vectors    {self.fact_vectors} facts, {self.message_vectors} messages",
            f"  rate       {self.ready_rate:,.0f} messages/s until the memory was ready "
            f"({self.ready_seconds:.1f} s: journal, facts, fact vectors)",
            f"             {self.rate:,.0f} messages/s with message vectors too "
            f"({self.seconds:.1f} s)",
        ]
        if self.peak_rss_mib is not None:
            lines.append(f"  memory     peak RSS {self.peak_rss_mib:,.0f} MiB")
        if self.extract_errors:
            lines.append(
                f"  warning    {self.extract_errors} of {self.extract_calls} extraction calls "
                "failed (logged)"
            )
        if self.waiting_retry:
            lines.append(
                f"  warning    {self.waiting_retry} messages wait for a retry of their "
                "extraction: the bot retries them on its own, the same import retries them now"
            )
        if self.failed:
            lines.append(
                f"  warning    {self.failed} messages failed: `guildlore retry --list` shows "
                "why, `guildlore retry` tries them again"
            )
        if self.dropped:
            lines.append(f"  warning    {self.dropped} messages dropped by the queue (replayed)")
        if not self.settled:
            lines.append(
                "  note       some accepted messages were not processed yet; they are kept "
                "and finished by the next `guildlore import` or `guildlore run`"
            )
        elif self.message_vectors_pending:
            lines.append(
                "  note       some messages have no vector yet (search finds them by their "
                "words); `guildlore reindex` or the next import embeds them"
            )
        return "\n".join(lines)


def progress_note(progress: Progress | None, text: str) -> None:
    """Change the bar's note (the bar itself is redrawn at its own pace)."""
    if progress is not None:
        progress.update(progress.done, progress.messages, text)


def peak_rss_mib() -> float | None:
    """This process's peak resident memory in MiB, or None where it cannot be read.

    Linux's VmHWM belongs to this program alone; ``ru_maxrss`` is the fallback
    (on Linux it may include the memory of the process that forked us).
    """
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/self/status", encoding="ascii") as fh:
            kib = next(int(ln.split()[1]) for ln in fh if ln.startswith("VmHWM:"))
        return round(kib / 1024, 1)
    try:
        import resource
    except ImportError:  # not on POSIX
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / 2**20 if sys.platform == "darwin" else peak / 1024, 1)


def error_text(exc: BaseException, path: Path) -> str:
    text = str(exc)
    return text if str(path) in text else f"{path}: {text}"
