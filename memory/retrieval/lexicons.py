"""Which lexicon a message search uses, and building them
(``memory.retrieval.lexicon``).

A guild's lexicon is built on its first message search: a small guild's
before that search goes on (every search then ranks alike), a big one's in
the background while FTS5 answers (tokenising 100k long messages takes
seconds). The snapshot is read on a reader thread, the words are counted on
a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from memory.retrieval.lexicon import GuildLexicon, LexiconConfig, LexiconIndex
from memory.store.db import Database
from memory.store.message_texts import guild_message_count, guild_texts

log = logging.getLogger(__name__)


class Lexicons:
    def __init__(self, db: Database, cfg: LexiconConfig | None = None) -> None:
        self.db = db
        self.index = LexiconIndex(cfg)
        self._unsubscribe: Callable[[], None] | None = None
        self._starting: dict[str, asyncio.Task[None]] = {}  # builds a search waits for
        self._builds: dict[str, asyncio.Task[None]] = {}  # big guilds' background builds

    async def get(self, guild_id: str) -> GuildLexicon | None:
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
                log.warning("lexicon build failed for guild %s: %s", guild_id, exc)
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
            rows = await self.db.read(guild_message_count, guild_id)
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

    async def _fill(self, guild_id: str, lex: GuildLexicon) -> None:
        try:
            texts = await self.db.read(guild_texts, guild_id)
            await asyncio.to_thread(lex.fill, texts)
            self.index.built()
        except Exception as exc:  # FTS5 keeps answering
            self.index.drop(guild_id, lex)
            log.warning("lexicon build failed for guild %s: %s", guild_id, exc)
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
