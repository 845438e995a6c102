"""Hand-written test doubles that record their calls (no mock.patch)."""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory.clock import iso
from memory.errors import ExtractionError
from memory.extract.base import ExtractionItem
from memory.models import Candidate, Hit, IncomingMessage, ScoreParts

_ids = itertools.count(1_000_000_000_000_000)

# A real DiscordChatExporter export shipped with the tests (tests/data/README.md).
# It is part of the suite: a test that needs it fails, never skips, without it.
REAL_EXPORT = Path(__file__).resolve().parent / "data" / "vesuvius-papyrology.json"

GUILD = "111111111111111111"
OTHER_GUILD = "222222222222222222"
CHANNEL = "333333333333333333"
ALICE = "444444444444444444"
BOB = "555555555555555555"


# Generous on purpose: a passing test returns at the first true check, so the
# deadline only matters on a slow or busy machine, where a tight one flakes.
EVENTUALLY_S = 30.0


async def eventually(
    check: Callable[[], bool | Awaitable[bool]],
    timeout: float = EVENTUALLY_S,
    interval: float = 0.02,
) -> bool:
    """Poll ``check`` (plain or async) until it is true; False at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(interval)


def msg(
    content: str,
    *,
    author: str = ALICE,
    name: str = "Alice",
    guild: str | None = GUILD,
    channel: str = CHANNEL,
    id: str | None = None,
    created_at: str | None = None,
    source: str = "text",
    is_bot: bool = False,
) -> IncomingMessage:
    from datetime import UTC, datetime

    return IncomingMessage(
        id=id or str(next(_ids)),
        guild_id=guild,
        channel_id=channel,
        author_id=author,
        author_name=name,
        content=content,
        created_at=created_at or iso(datetime.now(UTC)),
        source=source,  # type: ignore[arg-type]
        is_bot=is_bot,
    )


@dataclass
class ScriptedExtractor:
    """Returns ``fn(text, author)`` per message; can be slowed down or made to fail."""

    fn: Callable[[str, str], list[Candidate]] = lambda text, author: []
    delay_s: float = 0.0
    fail: bool = False
    name: str = "scripted"
    calls: list[list[str]] = field(default_factory=list)

    async def extract(self, text: str, author: str, max_facts: int) -> list[Candidate]:
        return (await self.extract_batch([ExtractionItem(text=text, author=author)], max_facts))[0]

    async def extract_batch(
        self, items: Sequence[ExtractionItem], max_facts: int
    ) -> list[list[Candidate]]:
        self.calls.append([i.text for i in items])
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail:
            raise ExtractionError("scripted failure")
        return [self.fn(i.text, i.author)[:max_facts] for i in items]


def echo_fact(text: str, author: str) -> list[Candidate]:
    """One fact per message: '<author> said <text>.' — always grounded."""
    body = text.rstrip(".!?")
    return [Candidate(fact=f"{author} said {body}.", type="other", confidence=0.6, evidence=text)]


# -- reading an engine's database directly, on either backend -------------------


def database_url(mem_or_config: Any) -> str | None:
    """The PostgreSQL URL an engine (or its config) runs on; None on SQLite."""
    config = getattr(mem_or_config, "config", mem_or_config)
    url: str | None = config.database_url
    return url


def inspect_db(mem_or_config: Any, *, writable: bool = False) -> Any:
    """A connection to an engine's database for a test to read rows with
    ``execute(sql, params)`` in the store's SQL (SQLite's spelling; on
    PostgreSQL the adapter translates it): the SQLite file opened read-only
    (``writable``: read-write), or a new connection to the PostgreSQL
    database. The caller closes it."""
    url = database_url(mem_or_config)
    if url:
        from memory.db.postgres import driver as postgres

        return postgres.connect(url)
    from memory.db.sqlite import driver as sqlite

    config = getattr(mem_or_config, "config", mem_or_config)
    return sqlite.connect(config.db_path, read_only=not writable)


def is_postgresql(con: Any) -> bool:
    from memory.db.sql import dialect_of

    return dialect_of(con) == "postgresql"


def table_names(con: Any) -> list[str]:
    """Every table of the database (SQLite's virtual and shadow tables too;
    its own ``sqlite_*`` bookkeeping tables excepted)."""
    if is_postgresql(con):
        sql = (
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' "
            "ORDER BY table_name"
        )
        return [str(r[0]) for r in con.execute(sql)]
    sql = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    return [str(r[0]) for r in con.execute(sql) if not str(r[0]).startswith("sqlite_")]


def every_cell_text(con: Any) -> list[str]:
    """Every non-null cell of every table as text (bytes decoded leniently):
    what a search for a word in "the whole database" reads. Tables that
    cannot be read whole (SQLite's vec0 shadow tables) are left out."""
    from memory.db.sqlite import driver as sqlite

    parts: list[str] = []
    for table in table_names(con):
        try:
            rows = con.execute(f'SELECT * FROM "{table}"').fetchall()
        except sqlite.Error:
            continue
        for row in rows:
            for v in tuple(row):
                if isinstance(v, bytes | bytearray | memoryview):
                    parts.append(bytes(v).decode("utf-8", "ignore"))
                elif v is not None:
                    parts.append(str(v))
    return parts


def fts_condition(con: Any, table: str, words: Sequence[str]) -> tuple[str, str]:
    """(SQL condition, its one parameter): rows of the full-text table
    ``table`` (``messages_fts``, ``memory_facts_fts``) whose index holds all
    of ``words`` — FTS5's ``MATCH`` on SQLite, the tsvector's ``@@`` on
    PostgreSQL."""
    if is_postgresql(con):
        query = " & ".join("'" + w.replace("'", "''") + "'" for w in words)
        return f"{table}.tsv @@ to_tsquery('simple', ?)", query
    return f"{table} MATCH ?", " AND ".join('"' + w.replace('"', '""') + '"' for w in words)


def fts_count(con: Any, table: str, *words: str) -> int:
    """How many rows of the full-text table ``table`` match all of ``words``."""
    cond, param = fts_condition(con, table, words)
    return int(con.execute(f"SELECT count(*) FROM {table} WHERE {cond}", (param,)).fetchone()[0])


def fts_terms(con: Any, table: str) -> set[str]:
    """Every term the full-text table ``table`` holds in its index."""
    if is_postgresql(con):
        return {
            str(r[0]) for r in con.execute(f"SELECT word FROM ts_stat('SELECT tsv FROM {table}')")
        }
    con.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_terms USING fts5vocab(main, {table}, row)"
    )
    return {str(r[0]) for r in con.execute(f"SELECT term FROM temp.{table}_terms")}


async def journal_files(mem: Any) -> list[Path]:
    """The journal's day files, newest first. Where the days are rendered from
    the database (PostgreSQL), the lease holder's round writes them first."""
    await mem.journals.publish()
    files: list[Path] = mem.journal.daily_files()
    return files


async def journal_text(mem: Any) -> str:
    """Every journal day file's text, oldest day first (see ``journal_files``)."""
    return "\n".join(p.read_text(encoding="utf-8") for p in reversed(await journal_files(mem)))


def make_hit(
    id: str,
    text: str,
    *,
    score: float = 0.5,
    subject: str = "u-alice",
    kind: str = "message",
    created_at: str = "2023-01-01T00:00:00.000Z",
    guild_id: str = "g",
) -> Hit:
    """A search hit for the ranking rules' tests: its semantic part is
    ``score`` (the combined score too), the rest neutral."""
    parts = ScoreParts(
        lexical=0.0, semantic=score, confidence=0.5, recency=0.0, channel=0.0, combined=score
    )
    return Hit(
        kind=kind,  # type: ignore[arg-type]
        id=id,
        guild_id=guild_id,
        channel_id="c",
        subject=subject,
        text=text,
        fact_type=None,
        evidence_text=None,
        source_message_id=id if kind == "message" else None,
        confidence=0.5,
        created_at=created_at,
        score=score,
        parts=parts,
    )
