"""The ``Memory`` facade: the one object bot/, dashboard/ and the CLI use.

It owns the database, the ingest queue and its workers, the journal, the
snapshot refresher and the embedding worker, and exposes ingest, retrieval,
lore, forget and the operator operations as async methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory.clock import Clock, iso, system_clock
from memory.config import MemoryConfig
from memory.embed.local import Embedder
from memory.embed.service import GUILD_MODEL_KEY, EmbeddingService
from memory.errors import InvalidInput
from memory.extract.guards import normalise_lore_line
from memory.extract.llm import Extractor
from memory.guild_settings import GuildSettingsCache
from memory.ingest.inbox import Inbox
from memory.ingest.pipeline import BatchProcessor
from memory.ingest.queue import IngestQueue
from memory.ingest.validate import validate_message
from memory.journal import Journal
from memory.models import (
    LORE_SUBJECT,
    Fact,
    ForgetReport,
    Hit,
    IncomingMessage,
    IngestOutcome,
    PromptSlice,
    SearchScope,
)
from memory.operator import OperatorOps
from memory.snapshot import GuildLore, PersonFacts, SnapshotRefresher, render_snapshot, write_atomic
from memory.store import facts as store
from memory.store import ops as store_ops
from memory.store.db import Database

log = logging.getLogger(__name__)

SNAPSHOT_NAME = "MEMORY.md"


@dataclass(frozen=True)
class ReplayReport:
    queued: int


class Memory(OperatorOps):
    def __init__(
        self,
        config: MemoryConfig,
        *,
        extractor: Extractor | None,
        embedder: Embedder | None = None,
        embedding_client: Any = None,
        env_embedding_model: str | None = None,
        clock: Clock = system_clock,
    ) -> None:
        self.config = config
        self.clock = clock
        self.db = Database(config.db_path, readers=config.read_connections)
        self.journal = Journal(config.journal_dir, config.timezone)
        self.extractor = extractor
        self.embeddings = EmbeddingService(
            self.db,
            config.embedding,
            client=embedding_client,
            clock=clock,
            env_default=env_embedding_model,
            embedder=embedder,
        )
        self.snapshot = SnapshotRefresher(self._refresh_snapshot_file, config.snapshot.debounce_s)
        self.settings_cache = GuildSettingsCache(self.db)
        self.pipeline = BatchProcessor(
            db=self.db,
            journal=self.journal,
            extractor=extractor,
            cfg=config.ingest,
            clock=clock,
            embeddings=self.embeddings,
            settings=self.settings_cache,
            on_memory_changed=self.snapshot.request,
        )
        self.inbox = Inbox(self.db, config.ingest, clock)
        self.queue = IngestQueue(config.ingest, inbox=self.inbox, process=self.pipeline)
        self._retriever: Any = None
        self._started = False
        self.rejected: dict[str, int] = {}
        # Retrieval latency (search + prompt slices), for the dashboard and /metrics.
        self._search_calls = 0
        self._search_ms_total = 0.0
        self._background: set[asyncio.Task[Any]] = set()

    # -- lifecycle ------------------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        config: MemoryConfig,
        *,
        extractor: Extractor | None = None,
        clock: Clock = system_clock,
        embedding_client: Any = None,
        env_embedding_model: str | None = None,
        embedder: Embedder | None = None,
        start: bool = True,
    ) -> Memory:
        if extractor is None:
            from memory.extract.llm import RuleExtractor

            extractor = RuleExtractor()
        mem = cls(
            config,
            extractor=extractor,
            clock=clock,
            embedding_client=embedding_client,
            env_embedding_model=env_embedding_model,
            embedder=embedder,
        )
        if start:
            await mem.start()
        return mem

    async def start(self) -> None:
        if self._started:
            return
        await self.db.open()
        settings = await self.db.read(store_ops.all_guild_settings)
        for gid, values in settings.items():
            self.embeddings.set_guild_model(gid, values.get(GUILD_MODEL_KEY))
        self.queue.start()
        self.embeddings.start()
        self._started = True
        self.inbox.start(self.queue)
        self.snapshot.request()

    async def close(self, drain_timeout: float | None = None) -> None:
        """Stop intake, drain the queue, stop jobs, write the snapshot, close the database."""
        if not self._started:
            return
        self.queue.accepting = False
        await self.inbox.stop()
        timeout = self.config.ingest.drain_timeout_s if drain_timeout is None else drain_timeout
        drained = await self.queue.drain(timeout)
        if not drained:
            log.warning("ingest queue not drained at shutdown; the rest is replayed next start")
        await self.queue.stop()
        await self.embeddings.settle(timeout=max(0.1, timeout))
        await self.embeddings.stop()
        if self._retriever is not None:  # never built: nothing to drop
            await self._retriever.close()
        await self.snapshot.close()
        with contextlib.suppress(Exception):
            await self._refresh_snapshot_file()
        await self.db.close()
        self._started = False

    async def __aenter__(self) -> Memory:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- ingest -------------------------------------------------------------------------------
    async def ingest_message(
        self, msg: IncomingMessage, *, backpressure: bool = False
    ) -> IngestOutcome:
        """Persist, then enqueue. Returns at once; ``outcome.wait()`` awaits processing."""
        if not self.queue.accepting:
            return self._reject(msg, "shutting down")
        try:
            clean = validate_message(msg, max_chars=self.config.ingest.message_max_chars)
        except InvalidInput as exc:
            return self._reject(msg, str(exc))
        if clean.is_bot and not self.config.ingest.ingest_bot_messages:
            return self._reject(msg, "bot messages are not ingested (setting)")
        gs = await self.guild_settings(clean.guild_id or "")
        if not gs.memory_enabled:
            return self._reject(msg, "memory is off for this guild (setting)")
        if clean.channel_id in gs.excluded_channels:
            return self._reject(msg, "channel excluded from memory (setting)")
        if clean.is_bot and not gs.ingest_bots:
            return self._reject(msg, "bot messages are not ingested (guild setting)")
        return await self.queue.submit(clean, backpressure=backpressure)

    def _reject(self, msg: IncomingMessage, reason: str) -> IngestOutcome:
        key = reason.split(":")[0][:60]
        self.rejected[key] = self.rejected.get(key, 0) + 1
        self.queue.stats.rejected += 1
        log.info("ingest rejected message %r: %s", str(msg.id)[:40], reason)
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        fut.set_result(False)
        return IngestOutcome(str(msg.id)[:64], "rejected", reason, fut)

    async def drain(self, timeout: float = 5.0) -> bool:
        return await self.queue.drain(timeout)

    async def settle(self, timeout: float = 30.0) -> bool:
        """Drain the queue and wait for the embeddings it caused (tests, import, demo)."""
        ok = await self.queue.drain(timeout)
        return await self.embeddings.settle(timeout) and ok

    # -- lore and forget ---------------------------------------------------------------------
    async def remember_line(
        self,
        guild_id: str,
        line: str,
        *,
        source_text: str,
        channel_id: str | None = None,
        source_message_id: str | None = None,
        actor: str = "lore",
    ) -> Fact | None:
        """Store a lore line (SPEC §3). None when the line fails the guards."""
        text = normalise_lore_line(line, source_text)
        if text is None:
            return None
        now = iso(self.clock())
        cfg = self.config.ingest

        def work(con: Any) -> Fact:
            up = store.upsert_fact(
                con,
                guild_id=guild_id,
                channel_id=channel_id,
                subject=LORE_SUBJECT,
                fact=text,
                fact_type="lore",
                evidence=None,
                source_message_id=source_message_id,
                confidence=0.72,
                now=now,
                actor=actor,
            )
            store.archive_excess(con, guild_id, LORE_SUBJECT, cfg.keep_lore_per_guild, now)
            store_ops.log_action(
                con,
                "memory_fact",
                f"{up.event} lore fact {up.fact.id}",
                now,
                guild_id=guild_id,
                subject=actor.removeprefix("user:") if actor.startswith("user:") else None,
                detail={"fact_id": up.fact.id, "event": up.event, "lore": True},
            )
            return up.fact

        fact = await self.db.write(work)
        self.embeddings.schedule_facts([fact])
        self.snapshot.request()
        return fact

    async def forget(self, guild_id: str, user_id: str, *, actor: str = "system") -> ForgetReport:
        """Erase a member from one guild everywhere: SQL rows, vectors, FTS, journals, snapshot."""
        now = iso(self.clock())
        # Anything of theirs still queued must not be processed after the erase.
        await self.queue.drain(self.config.ingest.drain_timeout_s)
        counts = await self.db.write(store.forget_user, guild_id, user_id, actor, now)
        self.embeddings.forget_queries()
        lines = await asyncio.to_thread(self.journal.redact_user, guild_id, user_id)
        await self.refresh_snapshot()
        await self.db.checkpoint()
        return ForgetReport(
            guild_id=guild_id,
            user_id=user_id,
            facts=counts.facts,
            vectors=counts.vectors,
            messages=counts.messages,
            traces=counts.traces,
            journal_lines=lines,
        )

    # -- retrieval ---------------------------------------------------------------------------------
    @property
    def retriever(self) -> Any:
        if self._retriever is None:
            from memory.retrieval.retriever import Retriever

            self._retriever = Retriever(self.db, self.embeddings, self.config.retrieval, self.clock)
        return self._retriever

    async def search(
        self,
        guild_id: str,
        query: str,
        *,
        channel_id: str | None = None,
        limit: int = 10,
        scope: SearchScope = "facts",
        visible_channels: set[str] | None = None,
    ) -> list[Hit]:
        """Strict hybrid search (SPEC §6). ``visible_channels`` hides facts and
        messages from channels the asker cannot read (None: no restriction)."""
        started = time.perf_counter()
        result: list[Hit] = await self.retriever.search(
            guild_id,
            query,
            channel_id=channel_id,
            limit=limit,
            scope=scope,
            visible_channels=visible_channels,
        )
        self._count_search(started)
        return result

    def _count_search(self, started: float) -> None:
        self._search_calls += 1
        self._search_ms_total += (time.perf_counter() - started) * 1000

    async def build_prompt_slice(
        self,
        guild_id: str,
        channel_id: str | None,
        user_id: str,
        query: str,
        *,
        visible_channels: set[str] | None = None,
        exclude_message_ids: Sequence[str] = (),
    ) -> PromptSlice:
        """``exclude_message_ids``: e.g. the message being answered, already ingested."""
        started = time.perf_counter()
        result: PromptSlice = await self.retriever.build_prompt_slice(
            guild_id,
            channel_id,
            user_id,
            query,
            visible_channels=visible_channels,
            exclude_message_ids=exclude_message_ids,
        )
        self._count_search(started)
        return result

    # -- snapshot -------------------------------------------------------------------------------------
    @property
    def snapshot_path(self) -> Any:
        return self.config.journal_dir / SNAPSHOT_NAME

    async def refresh_snapshot(self) -> str:
        await self._refresh_snapshot_file()
        return await self.snapshot_markdown()

    async def snapshot_markdown(self) -> str:
        def read() -> str:
            try:
                return self.snapshot_path.read_text(encoding="utf-8")
            except FileNotFoundError:
                return ""

        text = await asyncio.to_thread(read)
        if not text:
            await self._refresh_snapshot_file()
            text = await asyncio.to_thread(read)
        return text

    async def _refresh_snapshot_file(self) -> None:
        cfg = self.config.snapshot
        facts, names, guilds = await self.db.read(_snapshot_inputs, cfg.facts_per_person)
        people: dict[tuple[str, str], list[Fact]] = {}
        lore: dict[str, list[Fact]] = {}
        for f in facts:
            if f.subject == LORE_SUBJECT:
                lore.setdefault(f.guild_id, []).append(f)
            else:
                people.setdefault((f.guild_id, f.subject), []).append(f)
        person_list = [
            PersonFacts(gid, guilds.get(gid), sid, names.get((gid, sid), sid), fs)
            for (gid, sid), fs in people.items()
        ]
        lore_list = [GuildLore(gid, guilds.get(gid), fs) for gid, fs in lore.items()]
        now: datetime = self.clock()

        def render_and_write() -> None:
            text = render_snapshot(person_list, lore_list, self.journal, cfg, now)
            write_atomic(self.snapshot_path, text)

        await asyncio.to_thread(render_and_write)


def _snapshot_inputs(
    con: Any, per_subject: int
) -> tuple[list[Fact], dict[tuple[str, str], str], dict[str, str | None]]:
    return store.snapshot_facts(con, per_subject), store.display_names(con), store.guild_names(con)
