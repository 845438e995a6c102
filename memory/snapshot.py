"""``MEMORY.md``: a bounded, regenerated Markdown snapshot for operators.

Runtime prompts never read this file (SQLite retrieval does that); it exists
so people can see what the bot remembers. ``render_snapshot`` is a pure
function of its inputs plus the journal files it reads (or the days rendered
from the database it is given), ``write_atomic``
publishes it, and ``SnapshotRefresher`` decides when to do both.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from memory.clock import iso
from memory.config import SnapshotConfig
from memory.disk import TroubleLog
from memory.journal import Journal, JournalEntry, atomic_write_bytes
from memory.models import LORE_SUBJECT, Fact
from memory.sensitive import mask_secrets

logger = logging.getLogger(__name__)

TITLE = "# Durable Memory Snapshot"
NOTICE = (
    "_Runtime prompts use SQLite retrieval, not this file. "
    "It is regenerated automatically; edits are overwritten._"
)
PEOPLE_HEADING = "## People (Durable Facts)"
LORE_HEADING = "## Ongoing Lore"
HIGHLIGHTS_HEADING = "## Recent Journal Highlights"
SOURCES_HEADING = "## Source Daily Logs"
NO_PEOPLE = "_No durable facts yet._"
NO_LORE = "_No lore yet._"
NO_HIGHLIGHTS = "_No journal highlights yet._"
NO_SOURCES = "_No daily logs yet._"

LABELS = {
    "preference": "Preference",
    "profile": "Profile",
    "relationship": "Relationship",
    "project": "Project",
}
# Lore can hold 120 facts per guild; the snapshot shows the newest few.
LORE_PER_GUILD = 12
FACT_MAX_CHARS = 300
HIGHLIGHT_MAX_CHARS = 240
HIGHLIGHT_MIN_CHARS = 8

_URL = re.compile(r"<?\bhttps?://\S+>?", re.IGNORECASE)
_SPACES = re.compile(r"[\s\x00-\x1f\x7f]+")
# Characters that start Markdown constructs anywhere in a line.
_INLINE_SPECIAL = re.compile(r"([\\`*\[\]<>|~])")
# "_" only matters at word edges: intra-word underscores never emphasise.
_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
# "#" at the start or after a space can open a heading or close one.
_HASH = re.compile(r"(?:(?<=\s)|^)#")
# Block markers at the very start of a text that follows a list bullet.
_LEADING_BLOCK = re.compile(r"^(?:([-+])|(\d{1,9})([.)]))(?=\s|$)")


@dataclass(frozen=True)
class PersonFacts:
    guild_id: str
    guild_name: str | None
    subject_id: str
    display_name: str
    facts: Sequence[Fact]


@dataclass(frozen=True)
class GuildLore:
    guild_id: str
    guild_name: str | None
    facts: Sequence[Fact]


@dataclass(frozen=True)
class RecentJournal:
    """The newest journal days rendered from the database, newest first: each
    day's file name and its entries (in place of reading the files)."""

    days: Sequence[tuple[str, Sequence[JournalEntry]]]


def _recent_entries(journal: Journal | RecentJournal, n_days: int) -> list[JournalEntry]:
    if isinstance(journal, RecentJournal):
        return [e for _, entries in journal.days[:n_days] for e in entries]
    out: list[JournalEntry] = []
    for path in journal.daily_files(newest_first=True)[:n_days]:
        out.extend(journal.read_entries(path))
    return out


def _source_names(journal: Journal | RecentJournal, n_days: int) -> list[str]:
    if isinstance(journal, RecentJournal):
        return [name for name, _ in journal.days[:n_days]]
    return [p.name for p in journal.daily_files(newest_first=True)[:n_days]]


def md_inline(text: str, max_chars: int | None = None) -> str:
    """User text made safe to sit inside one Markdown line without changing structure."""
    flat = _SPACES.sub(" ", text).strip()
    if max_chars is not None and len(flat) > max_chars:
        # Cut before escaping so an escape sequence is never split.
        flat = flat[: max_chars - 1].rstrip() + "…"
    out = _INLINE_SPECIAL.sub(r"\\\1", flat)
    out = _UNDERSCORE.sub(r"\\_", out)
    out = _HASH.sub(r"\\#", out)
    return _LEADING_BLOCK.sub(
        lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}",
        out,
    )


def write_atomic(path: Path, text: str) -> None:
    """Temp file beside ``path``, fsync, ``os.replace``, fsync the directory."""
    atomic_write_bytes(path, text.encode("utf-8"))


# -- rendering ----------------------------------------------------------------


@dataclass(frozen=True)
class _Item:
    """One list line of a trimmable section and the headings it sits under."""

    heads: tuple[str, ...]
    line: str
    rank: int  # position within its innermost group; trimming lowers the cap on it


def _nbytes(lines: Sequence[str]) -> int:
    return sum(len(line.encode("utf-8")) + 1 for line in lines)


def _emit(items: Sequence[_Item]) -> list[str]:
    lines: list[str] = []
    prev: tuple[str, ...] = ()
    for item in items:
        if item.heads != prev:
            same = 0
            while same < min(len(prev), len(item.heads)) and prev[same] == item.heads[same]:
                same += 1
            for head in item.heads[same:]:
                if lines and lines[-1] != "":
                    lines.append("")
                lines.extend([head, ""])
            prev = item.heads
        lines.append(item.line)
    return lines


def _fit(items: Sequence[_Item], budget: int) -> tuple[list[_Item], int]:
    """Largest selection within ``budget`` bytes; returns it and how many items it drops.

    Lowering the per-group cap first keeps every person (or guild) visible
    with fewer lines; only when one line each is too much are whole groups
    dropped from the end.
    """
    if _nbytes(_emit(items)) <= budget:
        return list(items), 0
    top = max((i.rank for i in items), default=0)
    for cap in range(top, 0, -1):
        chosen = [i for i in items if i.rank < cap]
        if _nbytes(_emit(chosen)) <= budget:
            return chosen, len(items) - len(chosen)
    pool = [i for i in items if i.rank == 0]
    lo, hi = 0, len(pool)  # binary search the longest prefix that fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _nbytes(_emit(pool[:mid])) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return pool[:lo], len(items) - lo


def _guild_heading(guild_id: str, guild_name: str | None) -> str:
    if guild_name and guild_name.strip():
        return f"### {md_inline(guild_name)} (guild {md_inline(guild_id)})"
    return f"### Guild {md_inline(guild_id)}"


def _sort_facts(facts: Sequence[Fact]) -> list[Fact]:
    # Newest first, then the surer fact: that is what an operator checks first.
    return sorted(facts, key=lambda f: (f.updated_at, f.confidence, f.id), reverse=True)


def _fact_line(fact: Fact) -> str:
    label = LABELS.get(fact.fact_type)
    text = md_inline(fact.fact, FACT_MAX_CHARS)
    return f"- {label}: {text}" if label else f"- {text}"


def _people_items(people: Sequence[PersonFacts], per_person: int) -> list[_Item]:
    ordered = sorted(
        people,
        key=lambda p: (
            (p.guild_name or p.guild_id).casefold(),
            p.guild_id,
            (p.display_name or p.subject_id).casefold(),
            p.subject_id,
        ),
    )
    items: list[_Item] = []
    for person in ordered:
        facts = [
            f
            for f in person.facts
            if f.is_active and f.guild_id == person.guild_id and f.subject == person.subject_id
        ]
        if len(facts) != len(person.facts):
            logger.debug(
                "snapshot: skipped %d inactive or foreign facts for %s in guild %s",
                len(person.facts) - len(facts),
                person.subject_id,
                person.guild_id,
            )
        if not facts:
            continue
        name = person.display_name.strip() or person.subject_id
        heads = (
            _guild_heading(person.guild_id, person.guild_name),
            f"#### {md_inline(name)} ({md_inline(person.subject_id)})",
        )
        for rank, fact in enumerate(_sort_facts(facts)[:per_person]):
            items.append(_Item(heads, _fact_line(fact), rank))
    return items


def _lore_items(lore: Sequence[GuildLore]) -> list[_Item]:
    ordered = sorted(lore, key=lambda g: ((g.guild_name or g.guild_id).casefold(), g.guild_id))
    items: list[_Item] = []
    for guild in ordered:
        facts = [
            f
            for f in guild.facts
            if f.is_active and f.guild_id == guild.guild_id and f.subject == LORE_SUBJECT
        ]
        heads = (_guild_heading(guild.guild_id, guild.guild_name),)
        for rank, fact in enumerate(_sort_facts(facts)[:LORE_PER_GUILD]):
            items.append(_Item(heads, _fact_line(fact), rank))
    return items


def _highlight_text(content: str) -> str | None:
    text = _SPACES.sub(" ", content).strip()
    # A message that is only a link (or a link and "lol") says nothing a
    # reader can use without opening it.
    if len(_URL.sub("", text).strip()) < HIGHLIGHT_MIN_CHARS:
        return None
    return text


def _highlight_items(journal: Journal | RecentJournal, cfg: SnapshotConfig) -> list[_Item]:
    entries = _recent_entries(journal, cfg.highlight_files)
    # ISO UTC text sorts in time order; a stable sort keeps file order on ties.
    entries.sort(key=lambda e: e.time, reverse=True)
    per_author: dict[str, int] = {}
    seen: set[tuple[str, str]] = set()
    items: list[_Item] = []
    for entry in entries:
        if len(items) >= cfg.highlight_items:
            break
        text = _highlight_text(entry.content)
        if text is None:
            continue
        key = (entry.author_id, text.casefold())
        if key in seen or per_author.get(entry.author_id, 0) >= cfg.highlight_per_author:
            continue
        seen.add(key)
        per_author[entry.author_id] = per_author.get(entry.author_id, 0) + 1
        line = (
            f"- {md_inline(entry.time)} · {md_inline(entry.author_name)} "
            f"({md_inline(entry.author_id)}) · guild {md_inline(entry.guild_id)} "
            f"channel {md_inline(entry.channel_id)}: "
            # The journal keeps what members wrote, secrets included; the
            # snapshot is for reading, so a posted password or key is masked.
            f"{md_inline(mask_secrets(text), HIGHLIGHT_MAX_CHARS)}"
        )
        items.append(_Item((), line, 0))
    return items


def _more_line(n: int, what: str) -> str:
    return f"- _… {n} more {what} not shown (snapshot size limit)._"


@dataclass
class _Section:
    heading: str
    placeholder: str
    what: str  # noun for the "… N more" line
    items: list[_Item]
    shown: list[_Item] | None = None
    dropped: int = 0

    def body(self) -> list[str]:
        shown = self.items if self.shown is None else self.shown
        if not self.items:
            return [self.placeholder]
        lines = _emit(shown)
        if self.dropped:
            if lines:
                lines.append("")
            lines.append(_more_line(self.dropped, self.what))
        return lines


def _assemble(header: list[str], sections: Sequence[_Section], sources: list[str]) -> str:
    lines = list(header)
    for section in sections:
        lines.extend(["", section.heading, ""])
        lines.extend(section.body())
    lines.extend(["", SOURCES_HEADING, ""])
    lines.extend(sources)
    return "\n".join(lines) + "\n"


def render_snapshot(
    people: Sequence[PersonFacts],
    lore: Sequence[GuildLore],
    journal: Journal | RecentJournal,
    cfg: SnapshotConfig,
    now: datetime,
) -> str:
    """The whole ``MEMORY.md`` text, never more than ``cfg.max_bytes`` UTF-8 bytes.

    Reads the newest journal files (unless given days rendered from the
    database), so run it off the event loop.
    """
    header = [TITLE, "", NOTICE, f"_Generated at {iso(now)}._"]
    sections = [
        _Section(PEOPLE_HEADING, NO_PEOPLE, "facts", _people_items(people, cfg.facts_per_person)),
        _Section(LORE_HEADING, NO_LORE, "lore facts", _lore_items(lore)),
        _Section(HIGHLIGHTS_HEADING, NO_HIGHLIGHTS, "highlights", _highlight_items(journal, cfg)),
    ]
    sources = [f"- {name}" for name in _source_names(journal, cfg.source_files)]
    sources = sources or [NO_SOURCES]

    text = _assemble(header, sections, sources)
    if len(text.encode("utf-8")) <= cfg.max_bytes:
        return text

    # Fixed cost: the document with every trimmable section reduced to its
    # worst-case "… N more" line. What is left is shared in proportion to
    # each section's full size, so no section starves the others.
    for section in sections:
        section.shown, section.dropped = [], len(section.items)
    fixed = len(_assemble(header, sections, sources).encode("utf-8"))
    available = max(0, cfg.max_bytes - fixed)
    needs = [_nbytes(_emit(s.items)) for s in sections]
    total_need = sum(needs) or 1
    for section, need in zip(sections, needs, strict=True):
        if not section.items:
            section.shown, section.dropped = None, 0
            continue
        # The blank line before a "… more" line is part of what the items may use.
        budget = need * available // total_need - 1
        section.shown, section.dropped = _fit(section.items, budget)
    text = _assemble(header, sections, sources)
    data = text.encode("utf-8")
    if len(data) > cfg.max_bytes:
        # Only reachable when max_bytes is smaller than the fixed parts.
        logger.warning("snapshot: max_bytes=%d below the fixed layout; cutting", cfg.max_bytes)
        cut = data[: cfg.max_bytes]
        text = cut[: cut.rfind(b"\n") + 1].decode("utf-8")
    logger.debug(
        "snapshot trimmed to %d bytes (dropped %s)",
        len(text.encode("utf-8")),
        {s.what: s.dropped for s in sections},
    )
    return text


# -- refreshing ---------------------------------------------------------------


class SnapshotRefresher:
    """Debounces snapshot refreshes: many changes, one render, none lost.

    ``request()`` must be called on the event loop's thread. A request that
    arrives while a render runs causes exactly one more render after it
    (dropping it would leave a stale snapshot until the next timer).
    """

    def __init__(self, render: Callable[[], Awaitable[None]], debounce_s: float = 1.0) -> None:
        self._render = render
        self._debounce_s = debounce_s
        self._lock = asyncio.Lock()
        self._wakeup = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        # Requests are numbered; a render covers every request numbered up to
        # the value taken when it started.
        self._requested = 0
        self._covered = 0
        self._running = False
        self._closed = False
        self.runs = 0
        self.errors = 0
        self._trouble = TroubleLog(logger)

    @property
    def pending(self) -> bool:
        """A request is waiting for a render that has not started yet."""
        return self._requested > self._covered

    @property
    def running(self) -> bool:
        return self._running

    def request(self) -> None:
        """Ask for a refresh ``debounce_s`` from now; calls in between coalesce."""
        if self._closed:
            logger.debug("snapshot refresh requested after close; ignored")
            return
        self._requested += 1
        self._wakeup.set()
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(
                self._loop(), name="snapshot-refresher"
            )

    async def refresh_now(self) -> bool:
        """Render now (after any render in progress); True if it succeeded."""
        if self._closed:
            raise RuntimeError("SnapshotRefresher is closed")
        return await self._run_once()

    async def close(self) -> None:
        """Drop pending requests and wait for a render in progress to finish."""
        self._closed = True
        worker = self._worker
        # Holding the lock means no render runs, so cancelling the worker can
        # only interrupt its sleep or its wait for the lock, never a write.
        async with self._lock:
            if worker is not None:
                worker.cancel()
        if worker is not None:
            # asyncio.wait does not raise the worker's CancelledError, so a
            # cancellation of close() itself still propagates.
            await asyncio.wait({worker})

    async def _loop(self) -> None:
        while not self._closed:
            await self._wakeup.wait()
            await asyncio.sleep(self._debounce_s)
            self._wakeup.clear()
            # refresh_now may already have covered these requests.
            if self.pending and not self._closed:
                await self._run_once()

    async def _run_once(self) -> bool:
        async with self._lock:
            self._covered = self._requested
            self._running = True
            self.runs += 1
            try:
                await self._render()
                self._trouble.ok("snapshot refresh")
                return True
            except Exception as exc:
                self.errors += 1
                self._trouble.error(
                    "snapshot refresh", exc, "MEMORY.md is written once there is room"
                )
                return False
            finally:
                self._running = False
