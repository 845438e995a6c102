"""What ``guildlore import`` prints about the engine's ``ImportReport``
(``summary``), and the process's peak memory reading it adds to the report."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING

from bot.commands._common import fmt_duration

if TYPE_CHECKING:
    from memory import ImportReport


def summary(report: ImportReport) -> str:
    """The lines ``guildlore import`` prints when it is done."""
    s = report.stats
    skipped = ", ".join(f"{reason} {n}" for reason, n in s.skipped.most_common())
    lines = [
        f"{'Interrupted' if report.interrupted else 'Imported'}: {s.files} "
        f"file{'s' if s.files != 1 else ''}, {s.bytes / 1e6:.1f} MB in "
        f"{fmt_duration(report.seconds)} ({report.seconds:.1f} s)",
        f"  messages   {s.messages} read: {report.new} new, {report.resumed} resumed, "
        f"{report.already} already imported"
        + (
            ", " + ", ".join(f"{n} rejected ({r})" for r, n in report.rejected.most_common())
            if report.rejected
            else ""
        ),
        f"  skipped    {s.total_skipped}" + (f" ({skipped})" if skipped else ""),
        f"  facts      {report.facts_added} created, {report.facts_updated} updated",
        f"  vectors    {report.fact_vectors} facts, {report.message_vectors} messages",
        f"  rate       {report.ready_rate:,.0f} messages/s until the memory was ready "
        f"({report.ready_seconds:.1f} s: journal, facts, fact vectors)",
        f"             {report.rate:,.0f} messages/s with message vectors too "
        f"({report.seconds:.1f} s)",
    ]
    if s.channels:
        lines.append(
            f"  channels   {s.channels} channel object{'s' if s.channels != 1 else ''} "
            "read as channel names"
        )
    if report.skipped_files:
        n = len(report.skipped_files)
        lines.append(
            f"  files      {n} file{'s' if n != 1 else ''} not read "
            "(not a regular file: a FIFO, device or socket)"
        )
    if report.pinned:
        lines.append(f"  pins       {report.pinned} pinned messages made canon lore")
    if report.peak_rss_mib is not None:
        lines.append(f"  memory     peak RSS {report.peak_rss_mib:,.0f} MiB")
    if report.extract_errors:
        lines.append(
            f"  warning    {report.extract_errors} of {report.extract_calls} extraction calls "
            "failed (logged)"
        )
    if report.waiting_retry:
        lines.append(
            f"  warning    {report.waiting_retry} messages wait for a retry of their "
            "extraction: the bot retries them on its own, the same import retries them now"
        )
    if report.failed:
        lines.append(
            f"  warning    {report.failed} messages failed: `guildlore retry --list` shows "
            "why, `guildlore retry` tries them again"
        )
    if report.journal_owed:
        lines.append(
            f"  warning    {report.journal_owed} journal lines could not be written (the journal's "
            "disk is full or read-only): the messages are stored and the lines are owed, "
            "written at the next start of the bot or an import once there is room"
        )
    if report.dropped:
        lines.append(f"  warning    {report.dropped} messages dropped by the queue (replayed)")
    if not report.settled:
        lines.append(
            "  note       some accepted messages were not processed yet; they are kept "
            "and finished by the next `guildlore import` or `guildlore run`"
        )
    elif report.message_vectors_pending:
        lines.append(
            "  note       some messages have no vector yet (search finds them by their "
            "words); `guildlore reindex` or the next import embeds them"
        )
    return "\n".join(lines)


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
