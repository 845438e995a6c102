"""``Memory.journals``: the daily journals as the engine shows them.

With one process on SQLite the journal is the append-only files the ingest
pipeline writes (``memory.journal``). When several processes share one
PostgreSQL database (``database_url`` set), no process has every guild's
lines on its disk, so the journal is rendered from the stored messages
instead: the engine's journal views and MEMORY.md's highlights read the
database, the pipeline appends nothing, and the process holding the
``journal_files`` lease writes the rendered days into its journal folder
(``publish``): the days whose messages changed since the last round, plus
today; a day with no message left loses its file.

A rendered day has the same header and lines as the appended file for the
same messages (a line per message in time order, edited ones marked
``(edited)``). Deleted messages and forgotten members' messages are gone from
the database, so they are absent from a rendered day, not ``[deleted]`` or
``[redacted]`` lines as in an appended file; other members' messages are
rendered as stored, so a forgotten member's id mentioned in them stays (an
appended file scrubs it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from memory.clock import Clock, iso, parse_iso
from memory.config import MemoryConfig
from memory.db.core import Connection, Database
from memory.db.url import is_postgres_url
from memory.errors import InvalidInput
from memory.extract.guards import clean_line
from memory.journal import EDITED, Journal, JournalDay, JournalEntry, format_line, parse_line
from memory.snapshot import RecentJournal
from memory.store import journal_days as store

log = logging.getLogger(__name__)

# Bytes a line adds to its fields: "- ", the 24-character time, the separators.
_LINE_OVERHEAD = 54


def render_lines(messages: Sequence[store.DayMessage], clean_max_chars: int) -> list[str]:
    """The journal lines of stored messages, as the pipeline would append them:
    the text cleaned (a long one cut at a word, with "…"), ``(edited) ``
    before an edited one, nothing for a message whose text cleans to nothing."""
    lines = []
    for m in messages:
        text = clean_line(m.content, clean_max_chars)
        if text is None:
            continue
        if m.edited:
            text = EDITED + text
        lines.append(
            format_line(m.created_at, m.author_name, m.author_id, m.guild_id, m.channel_id, text)
        )
    return lines


def as_day(day: date | str) -> date:
    if isinstance(day, date):
        return day
    try:
        return date.fromisoformat(day.strip())
    except ValueError as exc:
        raise InvalidInput(f"not a date: {day!r}") from exc


class JournalViews:
    def __init__(self, db: Database, journal: Journal, config: MemoryConfig, clock: Clock) -> None:
        self._db = db
        self._journal = journal
        self._zone = ZoneInfo(journal.tz)
        self._clean_max_chars = config.ingest.clean_max_chars
        self._clock = clock
        self.from_database = is_postgres_url(config.database_url)
        self.published = 0  # day files written or removed by ``publish``
        self.skipped_times = 0  # stored message times that are not times, left out of the days
        self._complete = False  # a round has written every day

    @property
    def appender(self) -> Journal | None:
        """The journal the ingest pipeline appends to; None when the days are
        rendered from the database."""
        return None if self.from_database else self._journal

    # -- days and their time ranges ---------------------------------------------------
    def bounds(self, day: date) -> tuple[str, str]:
        """The ISO UTC range ``[start, end)`` of a local journal day."""
        start = datetime.combine(day, time(0), self._zone)
        end = datetime.combine(day + timedelta(days=1), time(0), self._zone)
        return iso(start), iso(end)

    def local_day(self, when: str) -> date:
        return parse_iso(when).astimezone(self._zone).date()

    def days_of_utc_date(self, utc_day: str) -> set[date]:
        """The local days a UTC date overlaps (one or two; none for a stored
        time that is not a date, which no day shows)."""
        try:
            start = datetime.combine(date.fromisoformat(utc_day), time(0), UTC)
        except ValueError:
            return set()
        last = start + timedelta(days=1) - timedelta(milliseconds=1)
        return {start.astimezone(self._zone).date(), last.astimezone(self._zone).date()}

    # -- views --------------------------------------------------------------------------
    async def days(self) -> list[JournalDay]:
        """The journal days, newest first, with their size in bytes (for rendered
        days an estimate from the stored text lengths)."""
        if not self.from_database:
            return await asyncio.to_thread(self._journal.days)
        return await self._db.read(self._days)

    def _days(self, con: Connection) -> list[JournalDay]:
        out: list[JournalDay] = []
        when = store.first_at_or_after(con, "")
        # One index seek per day rather than a scan of every message.
        while when is not None:
            try:
                day = self.local_day(when)
            except ValueError:
                # A stored time that is not one (a row from an import that
                # failed on it): no day shows it; go on after it.
                self.skipped_times += 1
                when = store.first_at_or_after(con, when + "\x00")
                continue
            start, end = self.bounds(day)
            count, chars = store.range_size(con, start, end)
            header = len(self._journal.header(day).encode("utf-8"))
            out.append(JournalDay(day.isoformat(), header + count * _LINE_OVERHEAD + chars))
            when = store.first_at_or_after(con, end)
        out.reverse()
        return out

    async def entries_of_day(self, day: date | str) -> list[JournalEntry] | None:
        """The parsed lines of one day; None when it has none."""
        if not self.from_database:
            return await asyncio.to_thread(self._journal.entries_of_day, day)
        text = await self.render_day(as_day(day))
        if text is None:
            return None
        return [e for e in map(parse_line, text.splitlines()) if e is not None]

    async def render_day(self, day: date) -> str | None:
        """One day's journal file text rendered from the database; None when
        the day has no lines."""
        messages = await self._db.read(store.messages_between, *self.bounds(day))
        lines = render_lines(messages, self._clean_max_chars)
        if not lines:
            return None
        return self._journal.header(day) + "".join(f"{line}\n" for line in lines)

    async def recent(self, with_entries: int, n_days: int) -> Journal | RecentJournal:
        """What MEMORY.md reads its highlights and sources from: the files, or
        the newest ``n_days`` days from the database, the newest
        ``with_entries`` of them rendered (the others only named)."""
        if not self.from_database:
            return self._journal
        days: list[tuple[str, list[JournalEntry]]] = []
        end = "9999"  # after any ISO time
        while len(days) < n_days:
            when = await self._db.read(store.last_before, end)
            if when is None:
                break
            try:
                day = self.local_day(when)
            except ValueError:  # not a time (see ``_days``): go on before it
                self.skipped_times += 1
                end = when
                continue
            end = self.bounds(day)[0]
            if len(days) >= with_entries:
                days.append((self._journal.path_for(day).name, []))
                continue
            entries = await self.entries_of_day(day)
            if entries:  # a day of messages that all clean to nothing has no file
                days.append((self._journal.path_for(day).name, entries))
        return RecentJournal(days)

    # -- the files, written by the lease holder -------------------------------------------
    async def publish(self) -> int:
        """Write the rendered files of the days changed since the last round,
        and today's; remove the file of a day left with no line. A process's
        first round writes every day and removes the files of days with no
        message (it may have taken the lease over from a process on another
        host, whose folder it does not have). Returns the files written or
        removed. The appended files need none of this: 0."""
        if not self.from_database:
            return 0
        dirty = await self._db.write(store.take_dirty)
        days = {self._clock().astimezone(self._zone).date()}
        for utc_day in dirty:
            days |= self.days_of_utc_date(utc_day)
        done = 0
        try:
            if not self._complete:
                stored = {date.fromisoformat(d.day) for d in await self.days()}
                on_disk = {
                    date.fromisoformat(p.stem)
                    for p in await asyncio.to_thread(self._journal.daily_files)
                }
                days |= stored | on_disk
            for day in sorted(days):
                text = await self.render_day(day)
                await asyncio.to_thread(self._journal.write_day, day, text)
                done += 1
        except Exception:
            # Marked again, so the next round renders them.
            await self._db.write(store.mark_dirty, dirty)
            raise
        self._complete = True
        self.published += done
        if dirty:
            log.debug("journal files rendered for %d days", done)
        return done
