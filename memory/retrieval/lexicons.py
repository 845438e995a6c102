"""Which in-memory lexicon a search uses, keeping them coherent, and building
them: one ``Lexicons`` per kind of document (messages:
``memory.retrieval.lexicon``; facts: ``memory.retrieval.fact_lexicon``).

A guild's lexicon is built on its first search: a small guild's before that
search goes on (every search then ranks alike), a big one's in the
background while FTS5 answers (tokenising 100k long messages takes
seconds). The snapshot is read on a reader thread, the words are counted on
a worker thread, never on the event loop.

Every committed transaction's change events reach each lexicon (``follow``).
Another connection's commits are handled as the vector matrices handle an
unknown change (``ExternalCommit`` naming no guild): a lexicon older than
``external_reload_s`` is rebuilt. A commit that names its guilds only put
vectors there: each lexicon's refresh reads what it stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from memory.db.changes import Change, ExternalCommit
from memory.db.core import Connection, Database

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LexiconConfig:
    enabled: bool = True
    max_rows: int = 400_000  # a bigger guild stays on FTS5
    max_bytes: int = 512 * 1024 * 1024  # all lexicons of a kind; least recently used go first
    # Guilds up to this many rows are built before their first search
    # returns (a few hundred ms at most); bigger ones in the background.
    build_inline_max: int = 20_000
    external_reload_s: float = 60.0


class Lexicon(Protocol):
    """One guild's in-memory index of one kind of document."""

    guild_id: str
    ready: bool
    epoch: int
    started_at: float

    @property
    def rows(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    def stored(self, con: Connection) -> int:
        """How many documents the guild has in the database."""

    def snapshot(self, con: Connection) -> Any:
        """What ``fill`` installs (read on a reader thread)."""

    def fill(self, snapshot: Any) -> None: ...

    def follow(self, change: Change) -> None:
        """One change of a committed transaction (on the committing thread)."""


L = TypeVar("L", bound=Lexicon)


class LexiconIndex(Generic[L]):
    """Every guild's lexicon of one kind of one database, kept coherent by its
    change events (``apply``)."""

    def __init__(
        self, new: Callable[[str, int], L], cfg: LexiconConfig | None = None, kind: str = ""
    ) -> None:
        self.cfg = cfg or LexiconConfig()
        self.kind = kind  # for logs
        self._new = new
        self._lock = threading.Lock()
        self._lex: OrderedDict[str, L] = OrderedDict()
        self._too_big: set[str] = set()
        self._external = 0
        self.builds = 0

    def clear(self) -> None:
        with self._lock:
            self._lex.clear()
            self._too_big.clear()

    def get(self, guild_id: str) -> L | None:
        """The guild's ready lexicon, or None (not built, building, too big)."""
        with self._lock:
            lex = self._lex.get(guild_id)
            if lex is not None:
                self._lex.move_to_end(guild_id)
            external = self._external
        if lex is None or not lex.ready:
            return None
        if (
            lex.epoch != external
            and time.monotonic() - lex.started_at >= self.cfg.external_reload_s
        ):
            with self._lock:
                if self._lex.get(guild_id) is lex:
                    del self._lex[guild_id]
            return None
        return lex

    def needs_build(self, guild_id: str) -> bool:
        if not self.cfg.enabled:
            return False
        with self._lock:
            return guild_id not in self._lex and guild_id not in self._too_big

    def register(self, guild_id: str) -> L | None:
        """A new, empty lexicon that starts following changes now, before its
        snapshot is read; None when one exists."""
        with self._lock:
            if guild_id in self._lex or guild_id in self._too_big:
                return None
            lex = self._new(guild_id, self._external)
            self._lex[guild_id] = lex
            return lex

    def too_big(self, guild_id: str, rows: int) -> bool:
        if rows <= self.cfg.max_rows:
            return False
        with self._lock:
            self._lex.pop(guild_id, None)
            self._too_big.add(guild_id)
        log.info("%s lexicon: guild %s has %d rows; using FTS5", self.kind, guild_id, rows)
        return True

    def drop(self, guild_id: str, lex: L) -> None:
        with self._lock:
            if self._lex.get(guild_id) is lex:
                del self._lex[guild_id]

    def built(self) -> None:
        self.builds += 1
        with self._lock:
            total = sum(lx.nbytes for lx in self._lex.values())
            while total > self.cfg.max_bytes and len(self._lex) > 1:
                _, old = self._lex.popitem(last=False)
                total -= old.nbytes

    def stats(self) -> dict[str, Any]:
        with self._lock:
            lexes = list(self._lex.values())
        return {
            "lexicons": len(lexes),
            "rows": sum(lx.rows for lx in lexes),
            "bytes": sum(lx.nbytes for lx in lexes),
            "builds": self.builds,
        }

    def apply(self, changes: Sequence[Change]) -> None:
        """Follow one committed transaction's changes (a database subscriber)."""
        with self._lock:
            lexes = list(self._lex.values())
        for change in changes:
            if isinstance(change, ExternalCommit):
                if change.vector_guilds is None:
                    # Another connection may have deleted or edited rows. One
                    # that names its guilds only put vectors: what it stored
                    # is read by the next refresh, nothing to rebuild.
                    with self._lock:
                        self._external += 1
                continue
            for lex in lexes:
                lex.follow(change)


class Lexicons(Generic[L]):
    """The lexicons of one kind of document: which one a search uses, built on demand."""

    def __init__(
        self,
        db: Database,
        new: Callable[[str, int], L],
        cfg: LexiconConfig | None = None,
        kind: str = "",
    ) -> None:
        self.db = db
        self.index: LexiconIndex[L] = LexiconIndex(new, cfg, kind)
        self._unsubscribe: Callable[[], None] | None = None
        self._starting: dict[str, asyncio.Task[None]] = {}  # builds a search waits for
        self._builds: dict[str, asyncio.Task[None]] = {}  # big guilds' background builds

    async def get(self, guild_id: str) -> L | None:
        """The guild's ready lexicon, or None: FTS5 answers (a big guild's
        still building, too big, lexicons off, or the build failed)."""
        self._attach()
        lex = self.index.get(guild_id)
        if lex is not None:
            return lex
        task = self._starting.get(guild_id)
        if task is None and self.index.needs_build(guild_id):
            task = asyncio.get_running_loop().create_task(self._build(guild_id))
            self._starting[guild_id] = task
            task.add_done_callback(lambda _t: self._starting.pop(guild_id, None))
        if task is not None:
            # Every search that asks meanwhile (a question's parts) waits for
            # the same build, so all of them rank alike; shielded: a search
            # that is cancelled does not cancel the build.
            try:
                await asyncio.shield(task)
            except Exception as exc:
                log.warning(
                    "%s lexicon build failed for guild %s: %s", self.index.kind, guild_id, exc
                )
        return self.index.get(guild_id)

    async def warm(self, guild_id: str) -> None:
        """Build the guild's lexicon now, whatever its size (benchmarks)."""
        self._attach()
        task = self._starting.get(guild_id)
        if task is not None:
            await asyncio.shield(task)
        if self.index.needs_build(guild_id):
            await self._build(guild_id, wait=True)
        task = self._builds.get(guild_id)
        if task is not None:
            await asyncio.shield(task)

    async def _build(self, guild_id: str, wait: bool = False) -> None:
        lex = self.index.register(guild_id)
        if lex is None:
            return
        try:
            rows = await self.db.read(lex.stored)
            if self.index.too_big(guild_id, rows):
                return
            if rows > self.index.cfg.build_inline_max and not wait:
                # Answered by FTS5 meanwhile; the build goes on in the background.
                self._builds[guild_id] = asyncio.get_running_loop().create_task(
                    self._fill(guild_id, lex)
                )
                return
            await self._fill(guild_id, lex)
        except BaseException:
            self.index.drop(guild_id, lex)
            raise

    async def _fill(self, guild_id: str, lex: L) -> None:
        try:
            snapshot = await self.db.read(lex.snapshot)
            await asyncio.to_thread(lex.fill, snapshot)
            self.index.built()
        except Exception as exc:  # FTS5 keeps answering
            self.index.drop(guild_id, lex)
            log.warning("%s lexicon build failed for guild %s: %s", self.index.kind, guild_id, exc)
        except BaseException:
            self.index.drop(guild_id, lex)
            raise
        finally:
            if self._builds.get(guild_id) is asyncio.current_task():
                self._builds.pop(guild_id, None)

    def _attach(self) -> None:
        if self._unsubscribe is not None or not self.index.cfg.enabled:
            return
        self._unsubscribe = self.db.subscribe(self.index.apply)
        self.index.clear()  # built before: may have missed changes

    async def close(self) -> None:
        tasks = [t for t in (*self._starting.values(), *self._builds.values()) if not t.done()]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._builds.clear()
        self._starting.clear()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.index.clear()

    def stats(self) -> dict[str, Any]:
        return self.index.stats()
