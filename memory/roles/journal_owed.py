"""``Memory.journal_owed``: journal lines that could not be written, written later.

A full or read-only disk makes a journal append fail while the message
itself is stored (SQLite may still have room, or the journal lives on
another disk). The pipeline then finishes the message with
``journaled = 0``, in the same transaction: its line is owed
(``memory.store.journal_owed``). An append never leaves a line cut short
(``memory.file_writes.append_whole``).

At the next start (the bot, an import), before anything new is appended:

1. temp files of rewrites a killed process left in the journal folder (which
   may hold text deleted or forgotten since) are removed;
2. a line left unfinished at the end of a daily file (a power loss, an older
   version's full disk) is cut, and its message is owed again when the cut
   text still names it;
3. the owed lines are written into their days' files, where a line is not
   there already (a line cut short mid-file by an older version is replaced
   by the whole line), and marked written.

Step 3 also runs while the bot runs (the journal job, every minute), so the
lines come back as soon as there is room again. Health and
``guildlore doctor`` count what is owed. With the journal rendered from the
database (PostgreSQL) nothing is appended, so nothing is owed.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any

from memory.db.core import Connection, Database
from memory.disk import TroubleLog, disk_problem
from memory.extract.guards import clean_line
from memory.file_writes import remove_leftovers
from memory.journal import EDITED, HELD_LINE, Journal
from memory.store import held_messages as store_held
from memory.store import journal_owed as store
from memory.store import messages as store_messages

log = logging.getLogger(__name__)

PAGE = 2_000  # owed messages read, written and marked per round
# The start of a journal line: enough of it to know whose message it was
# (its time and author; the guild and channel when the cut left them).
_HEAD = re.compile(
    r"^- (?P<time>\S+) \| .* \((?P<author_id>[^()]*)\) \| "
    r"(?:\[guild:(?P<guild_id>\S*) channel:(?P<channel_id>[^\]\s]*)\])?"
)


@dataclass
class StartRepair:
    """What the start-up repair found and did."""

    cut: int = 0  # unfinished lines cut from the end of a file
    owed_again: int = 0  # messages whose line was cut, owed again
    written: int = 0  # owed lines written


class OwedJournal:
    def __init__(
        self, db: Database, journal: Journal, appender: Journal | None, clean_max_chars: int
    ) -> None:
        """``journal``: the folder's files; ``appender``: the journal the
        pipeline appends to (None: days rendered from the database)."""
        self._db = db
        self._journal = journal
        self._appender = appender
        self._clean_max_chars = clean_max_chars
        self._trouble = TroubleLog(log)
        self.written = 0  # owed lines written by this process

    async def count(self) -> int:
        """Processed messages whose journal line is not written yet."""
        if self._appender is None:
            return 0
        return int(await self._db.read(store.count_owed))

    async def remove_leftovers(self) -> list[str]:
        """Remove the temp files killed writers left in the journal folder
        (never one a live process is writing: see ``memory.file_writes``)."""
        try:
            removed = await asyncio.to_thread(remove_leftovers, self._journal.root)
        except OSError as exc:
            self._failed("removing leftover temp files", exc)
            return []
        if removed:
            log.warning(
                "removed %d temp files an interrupted write left in %s: %s",
                len(removed),
                self._journal.root,
                ", ".join(removed),
            )
        return removed

    async def at_start(self) -> StartRepair:
        """Steps 2 and 3 of the module doc (step 1 is ``remove_leftovers``, at
        every start). A disk that still fails is logged once and leaves the
        lines owed."""
        report = StartRepair()
        if self._appender is None:
            return report
        try:
            await self._repair(self._appender, report)
        except Exception as exc:
            if disk_problem(exc) is None:
                raise
            # Starting matters more: the lines stay owed for the next round.
            self._failed("journal repair", exc)
        return report

    async def _repair(self, journal: Journal, report: StartRepair) -> None:
        cut = await asyncio.to_thread(journal.cut_partial_tails)
        for path, text in cut:
            report.cut += 1
            head = _HEAD.match(text)
            again = 0
            if head is not None:
                again = await self._db.write(
                    store.owe_again,
                    head["time"],
                    head["author_id"],
                    head["guild_id"],
                    head["channel_id"],
                )
            report.owed_again += again
            log.warning(
                "journal %s ended in an unfinished line (%d characters): cut%s",
                path.name,
                len(text),
                f"; its message's line is written again ({again})"
                if again
                else (" (it names no stored message)" if head is not None else ""),
            )
        report.written = await self.write()

    async def write(self) -> int:
        """Write the owed lines; how many were written now (lines already in
        their file are only marked). Stops at a disk that still fails."""
        if self._appender is None:
            return 0
        journal = self._appender
        after = 0
        written = 0
        while True:
            owed = await self._db.read(store.owed_after, after, PAGE)
            if not owed:
                break
            after = owed[-1].seq
            # A message withheld with a pending sensitive fact has no text in
            # ``messages``: its line says so, as the pipeline's would have.
            emptied = [m for m in owed if not m.content and m.guild_id]
            held = await self._db.read(_held_of, emptied) if emptied else set()
            lines = []
            for m in owed:
                text = HELD_LINE if m.id in held else clean_line(m.content, self._clean_max_chars)
                if text is None:  # nothing to show (a changed cleaning limit)
                    continue
                lines.append(
                    (
                        m.created_at,
                        m.author_name,
                        m.author_id,
                        m.guild_id,
                        m.channel_id,
                        EDITED + text if m.edited else text,
                    )
                )
            try:
                result = await asyncio.to_thread(journal.append_missing, lines)
            except OSError as exc:
                self._failed("writing owed journal lines", exc)
                break
            self._trouble.ok("writing owed journal lines")
            if result.unplaceable:
                log.warning(
                    "%d owed journal lines have a time no day can show; left out",
                    result.unplaceable,
                )
            await self._db.write(store_messages.mark_journaled, [m.id for m in owed])
            written += result.written
        if written:
            self.written += written
            log.info("wrote %d owed journal lines", written)
        return written

    def _failed(self, what: str, exc: BaseException) -> None:
        problem = disk_problem(exc)
        if problem is None:
            log.error("%s failed: %s; the lines stay owed", what, exc)
            return
        self._trouble.failed(what, problem, "the lines stay owed and are written later")


def _held_of(con: Connection, messages: list[Any]) -> set[str]:
    """The ids among ``messages`` withheld while their author decides."""
    out: set[str] = set()
    for guild in {m.guild_id for m in messages}:
        out |= store_held.held_among(con, guild, [m.id for m in messages if m.guild_id == guild])
    return out
