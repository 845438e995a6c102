"""The ``Memory`` facade: the one object bot/, dashboard/ and the CLI use.

It owns the database, the ingest queue and its workers, the journal, the
snapshot refresher and the embedding worker, and exposes ingest, retrieval,
forget, the snapshot and the journal as async methods. The rest is composed,
one object per concern (memory/roles/): ``lore`` (lore lines), ``facts``,
``traces``, ``guilds``, ``procedures``, ``admin``, ``members`` (a member's own
view), ``corrections``, ``opt_outs``, ``receipts``, ``provenance``, ``erasure``
(what members control and see), ``lifecycle`` (Discord's deletes and edits),
``retention`` (leave policies, guild purge), ``consent`` (sensitive facts
waiting for a member's answer), ``review`` (memories waiting for a
moderator), ``pins`` (pinned messages as canon lore), ``catch_up`` (what
Discord holds that the process missed while away) and ``usage`` (daily
series, the request log); besides them ``sessions`` (dashboard logins),
``inbox`` (the durable inbox: unfinished and failed messages) and ``replay``
(what the inbox holds unfinished, back into the queue).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memory.clock import Clock, system_clock
from memory.config import MemoryConfig
from memory.db.backend import open_database
from memory.embed.base import Embedder
from memory.embed.service import EmbeddingService
from memory.extract.base import Extractor
from memory.extract.sensitivity import classifier_for
from memory.guild_settings import GuildSettingsCache
from memory.ingest.admission import Admission
from memory.ingest.consent_gate import SensitiveGate
from memory.ingest.inbox import Inbox
from memory.ingest.llm_decision import LLMDecider
from memory.ingest.pipeline import BatchProcessor
from memory.ingest.queue import IngestQueue
from memory.ingest.replay import Replay
from memory.ingest.review_gate import ReviewGate
from memory.journal import Journal, JournalDay, JournalEntry
from memory.models import (
    ForgetReport,
    Hit,
    IncomingMessage,
    IngestOutcome,
    PromptSlice,
    SearchScope,
    StoredMessage,
)
from memory.retrieval.filters import FactFilter, consumer_filter
from memory.roles.admin import AdminOps, SearchStats
from memory.roles.catch_up import CatchUp
from memory.roles.consent import ConsentOps
from memory.roles.consolidation.role import Consolidation
from memory.roles.corrections import Corrections
from memory.roles.episodes.role import EpisodeOps
from memory.roles.erasure import Erasure
from memory.roles.facts import FactOps
from memory.roles.guilds import GuildOps
from memory.roles.journal_owed import OwedJournal
from memory.roles.journals import JournalViews
from memory.roles.leases import JobLeases
from memory.roles.lifecycle import DeleteReport, EditReport, MessageLifecycle
from memory.roles.lore import LoreOps
from memory.roles.members import MemberData
from memory.roles.opt_outs import OptOuts
from memory.roles.pins import PinOps
from memory.roles.procedures import ProcedureOps
from memory.roles.provenance import Provenance
from memory.roles.receipts import Receipts
from memory.roles.retention import Retention
from memory.roles.review.role import ReviewOps
from memory.roles.snapshot_file import SNAPSHOT_NAME, SnapshotFile
from memory.roles.storage_health import StorageHealth
from memory.roles.traces import TraceOps
from memory.roles.upkeep import MemoryUpkeep
from memory.roles.usage import UsageOps
from memory.sessions import OperatorSessions
from memory.snapshot import SnapshotRefresher
from memory.store import messages as store_messages
from memory.store.erase import ErasureCompactor
from memory.usage.recorder import UsageRecorder

log = logging.getLogger(__name__)


class Memory:
    def __init__(
        self,
        config: MemoryConfig,
        *,
        extractor: Extractor | None,
        embedder: Embedder | None = None,
        embedding_client: Any = None,
        env_embedding_model: str | None = None,
        clock: Clock = system_clock,
        decider: LLMDecider | None = None,
    ) -> None:
        """``decider``: the LLM write decision (None: derived from an LLM
        extractor, else the offline rules)."""
        self.config = config
        self.clock = clock
        self.db = open_database(config)
        self.sessions = OperatorSessions(self.db)
        self.journal = Journal(config.journal_dir, config.timezone)
        self.journals = JournalViews(self.db, self.journal, config, clock)
        self.journal_owed = OwedJournal(
            self.db, self.journal, self.journals.appender, config.ingest.clean_max_chars
        )
        self.storage_health = StorageHealth(self.db, self.journal_owed, clock)
        self.extractor = extractor
        self._usage = UsageRecorder(self.db, config.usage, clock)
        self.usage = UsageOps(self.db, self._usage, config.usage, clock)
        self.embeddings = EmbeddingService(
            self.db,
            config.embedding,
            client=embedding_client,
            clock=clock,
            env_default=env_embedding_model,
            embedder=embedder,
            usage=self._usage,
        )
        # Linking a written fact reads the retriever's in-memory matrices.
        self.embeddings.nearest_facts = lambda *a: self.retriever.nearest_facts(*a)
        self.opt_outs = OptOuts(self.db, clock)
        self.receipts = Receipts(self.db, clock)
        self.guilds = GuildOps(
            self.db, self.embeddings, clock, GuildSettingsCache(self.db), self.opt_outs
        )
        self._snapshot_file = SnapshotFile(
            self.db, self.journals, config.snapshot, config.journal_dir / SNAPSHOT_NAME, clock
        )
        self.snapshot = SnapshotRefresher(self._snapshot_file.write, config.snapshot.debounce_s)
        self.compactor = ErasureCompactor(self.db, config.compaction_delay_s)
        gate = SensitiveGate(classifier_for(extractor))
        review_gate = ReviewGate()
        self.pipeline = BatchProcessor(
            db=self.db,
            journal=self.journals.appender,
            extractor=extractor,
            cfg=config.ingest,
            clock=clock,
            embeddings=self.embeddings,
            settings=self.guilds.settings_cache,
            on_memory_changed=self.snapshot.request,
            gate=gate,
            decider=decider,
            review=review_gate,
            usage=self._usage,
        )
        self.inbox = Inbox(self.db, config.ingest, clock)
        self.queue = IngestQueue(config.ingest, inbox=self.inbox, process=self.pipeline)
        self.replay = Replay(self.inbox, self.queue, config.ingest, clock, config.ownership)
        self.rejected: dict[str, int] = {}
        self._search_stats = SearchStats()
        self.lore = LoreOps(
            self.db, self.pipeline, extractor, self.embeddings, self.snapshot, config.ingest, clock
        )
        self.facts = FactOps(self.db, self.embeddings, self.snapshot, clock)
        self.members = MemberData(self.db, clock)
        self.corrections = Corrections(
            self.db,
            self.facts,
            self.compactor,
            clock,
            receipts=self.receipts,
            embeddings=self.embeddings,
            snapshot=self.snapshot,
            settings=self.guilds.settings_cache,
            extractor=extractor,
            cfg=config.ingest,
        )
        self.traces = TraceOps(self.db, clock)
        self.provenance = Provenance(self.db)
        self.episodes = EpisodeOps(
            self.db, self.embeddings, self.guilds, extractor, clock, self.pipeline.budgets
        )
        self.consolidation = Consolidation(self.db, clock, self.snapshot.request)
        self.procedures = ProcedureOps(self.db, clock)
        self.leases = JobLeases(self.db, clock)
        self.consent = ConsentOps(
            self.db, self.embeddings, self.snapshot, config.ingest, clock, gate.stats
        )
        self.pins = PinOps(
            self.db, self.embeddings, self.snapshot, self.guilds.settings_cache, clock
        )
        self.review = ReviewOps(
            self.db,
            self.embeddings,
            self.snapshot,
            self.guilds.settings_cache,
            review_gate,
            config.ingest,
            clock,
        )
        self.admin = AdminOps(
            db=self.db,
            config=config,
            clock=clock,
            queue=self.queue,
            pipeline=self.pipeline,
            embeddings=self.embeddings,
            snapshot=self.snapshot,
            guilds=self.guilds,
            search=self._search_stats,
            rejected=self.rejected,
            storage=self.storage_health,
        )
        self.lifecycle = MessageLifecycle(
            db=self.db,
            journal=self.journal,
            queue=self.queue,
            snapshot=self.snapshot,
            compactor=self.compactor,
            cfg=config.ingest,
            clock=clock,
            ingesting=lambda: self._ingesting,
            opted_out=self.opt_outs.is_out,
        )
        self.retention = Retention(
            db=self.db,
            journal=self.journal,
            queue=self.queue,
            snapshot=self.snapshot,
            compactor=self.compactor,
            embeddings=self.embeddings,
            settings=self.guilds.settings_cache,
            clock=clock,
            forget=self.forget,
            drain_timeout_s=config.ingest.drain_timeout_s,
        )
        self.erasure = Erasure(
            db=self.db,
            queue=self.queue,
            journal=self.journal,
            embeddings=self.embeddings,
            compactor=self.compactor,
            receipts=self.receipts,
            opt_outs=self.opt_outs,
            refresh_snapshot=self.refresh_snapshot,
            cfg=config.ingest,
            clock=clock,
        )
        self.upkeep = MemoryUpkeep(self.db, self.pipeline, self.snapshot, self.compactor, clock)
        self._admission = Admission(
            config.ingest,
            self.queue,
            self.guilds.settings,
            self.lifecycle.before_ingest,
            ingesting=lambda: self._ingesting,
            rejected=self.rejected,
            opted_out=self.opt_outs.is_out,
        )
        self.catch_up = CatchUp(
            db=self.db,
            lifecycle=self.lifecycle,
            admit=self._admission.admit,
            cfg=config.ingest,
            clock=clock,
        )
        self._retriever: Any = None
        self._started = False
        self._ingesting = False
        self._ingest_stopped = False

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
        ingest: bool = True,
        decider: LLMDecider | None = None,
    ) -> Memory:
        if extractor is None:
            from memory.extract.rules.extractor import RuleExtractor

            extractor = RuleExtractor()
        mem = cls(
            config,
            extractor=extractor,
            clock=clock,
            embedding_client=embedding_client,
            env_embedding_model=env_embedding_model,
            embedder=embedder,
            decider=decider,
        )
        if start:
            await mem.start(ingest=ingest)
        return mem

    async def start(self, *, ingest: bool = True) -> None:
        """Open the database (migrated) with each guild's embedding model; with
        ``ingest``, also the queue, the workers and the replay of unfinished messages.
        Without, it takes no messages (CLI commands that run beside the bot)."""
        if self._started:
            return
        await self.db.open()
        self.storage_health.opened()
        try:
            await self.guilds.load_embedding_models()
            await self.opt_outs.warm()  # every admission reads them
        except BaseException:
            await self.db.close()
            raise
        self._started, self._ingesting, self._ingest_stopped = True, ingest, False
        # What a killed writer left in the journal folder may hold erased text.
        await self.journal_owed.remove_leftovers()
        self._usage.start()
        if ingest:
            # The journal as an interrupted run left it, repaired, with the
            # lines a full disk kept from it, before anything new is appended.
            await self.journal_owed.at_start()
            # Deletes and edits received before a crash first: a message
            # deleted then must not be queued again by the replay below.
            await self.lifecycle.replay(self.config.ownership.owns)
            self.queue.start()
            self.embeddings.start()
            await self.replay.start()
            self.snapshot.request()

    async def close(self, drain_timeout: float | None = None) -> None:
        """Stop intake, drain the queue, stop jobs, write the snapshot, close the database."""
        if not self._started:
            return
        await self.stop_ingest(drain_timeout)
        await self.upkeep.close()
        await self.embeddings.stop()
        if self._retriever is not None:  # never built: nothing to drop
            await self._retriever.close()
        await self.snapshot.close()
        if self._ingesting:
            with contextlib.suppress(Exception):
                await self._snapshot_file.write()
        await self._usage.close()
        try:
            await self.compactor.flush()
        except Exception:
            log.exception("the rewrite after an erase failed at shutdown")
        await self.db.close()
        self._started = False

    async def stop_ingest(self, drain_timeout: float | None = None) -> bool:
        """Take no more messages, drain the queue (up to the timeout), stop its
        workers; False if not drained (the rest stays in the inbox). ``close``
        does it first; a process holding shards does it before it gives its
        claims back, so that nothing here still processes their guilds."""
        if not self._started or not self._ingesting or self._ingest_stopped:
            return True
        self._ingest_stopped = True
        self.queue.accepting = False
        await self.replay.stop()
        timeout = self.config.ingest.drain_timeout_s if drain_timeout is None else drain_timeout
        drained = await self.queue.drain(timeout)
        if not drained:
            log.warning("ingest queue not drained at shutdown; the rest is replayed next start")
        await self.queue.stop()
        await self.embeddings.settle(timeout=max(0.1, timeout))
        return drained

    async def __aenter__(self) -> Memory:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- ingest -------------------------------------------------------------------------------
    async def ingest_message(
        self, msg: IncomingMessage, *, backpressure: bool = False
    ) -> IngestOutcome:
        """Persist, then enqueue. Returns at once; ``outcome.wait()`` awaits
        processing. Messages reach the queue in the order of the calls, even
        when calls overlap (``memory.ingest.admission``)."""
        return await self._admission.admit(msg, backpressure=backpressure)

    async def drain(self, timeout: float = 5.0) -> bool:
        return await self.queue.drain(timeout)

    async def settle(self, timeout: float = 30.0) -> bool:
        """Drain the queue, wait for the embeddings it caused and run a pending
        rewrite after an erase (tests, import, demo)."""
        ok = await self.queue.drain(timeout)
        ok = await self.embeddings.settle(timeout) and ok
        await self.upkeep.settle(timeout)
        await self._usage.flush()
        return ok

    async def get_message(self, guild_id: str, message_id: str) -> StoredMessage | None:
        """An ingested message with its processing status, or None."""
        result: StoredMessage | None = await self.db.read(
            store_messages.get_message, guild_id, message_id
        )
        return result

    async def delete_messages(self, guild_id: str, message_ids: Sequence[str]) -> DeleteReport:
        """Discord deleted these messages: erase them and what only they supported."""
        return await self.lifecycle.delete_messages(guild_id, message_ids)

    async def edit_message(
        self, guild_id: str, message_id: str, content: str, edited_at: str | None = None
    ) -> EditReport:
        """Discord edited a message: store the new text and extract it again."""
        return await self.lifecycle.edit_message(guild_id, message_id, content, edited_at)

    # -- lore and forget ---------------------------------------------------------------------
    async def forget(
        self,
        guild_id: str,
        user_id: str,
        *,
        actor: str = "system",
        opt_out: bool = False,
    ) -> ForgetReport:
        """Erase a member from one guild everywhere: SQL rows, vectors, FTS, journals,
        snapshot; with a deletion receipt. ``opt_out``: and stop remembering
        them here from now on (``memory.roles.erasure``)."""
        return await self.erasure.forget(guild_id, user_id, actor=actor, opt_out=opt_out)

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
        gate: bool = True,
        as_of: datetime | None = None,
        consumer: str | Sequence[str] | None = None,
        types: Sequence[str] | None = None,
        subjects: Sequence[str] | None = None,
        after: datetime | None = None,
        before: datetime | None = None,
    ) -> list[Hit]:
        """Hybrid search of facts, past messages or both (``scope="all"``:
        merged by score; what every product surface asks by default,
        ``DEFAULT_SEARCH_SCOPE``). ``visible_channels`` hides facts and
        messages of channels the
        asker cannot read (None: no restriction); ``gate=False`` returns every candidate
        best first (benchmarks) instead of only those that pass the relevance gate;
        ``as_of`` returns the facts valid at that time and no message created after
        it (None: the current facts).

        Facts are limited to the memory types ``consumer`` may see (a name such as
        "api", or several: the types all of them allow; None: facts, lore and
        episodes); ``types`` narrows that further and a type outside it raises
        ``TypeNotAllowed``. ``subjects`` (member ids, ``__lore__``) and
        ``after``/``before`` (observation time) filter facts before ranking."""
        started = time.perf_counter()
        only = await self.fact_filter(guild_id, consumer, types, after=after, before=before)
        with self._usage.searching(guild_id, consumer, self._search_model(guild_id)) as call:
            result: list[Hit] = await self.retriever.search(
                guild_id,
                query,
                channel_id=channel_id,
                limit=limit,
                scope=scope,
                visible_channels=visible_channels,
                gate=gate,
                as_of=as_of,
                only=only,
                subjects=list(subjects) if subjects else None,
            )
            call.hits = len(result)
        self._search_stats.count(started)
        return result

    def _search_model(self, guild_id: str) -> str:
        return self.embeddings.model_for_guild(guild_id) or "lexical"

    async def fact_filter(
        self,
        guild_id: str,
        consumer: str | Sequence[str] | None,
        types: Sequence[str] | None = None,
        *,
        after: datetime | None = None,
        before: datetime | None = None,
    ) -> FactFilter:
        """What ``consumer`` may see of the guild's facts (its allowlists are
        guild settings); ``TypeNotAllowed`` when ``types`` asks for more."""
        settings = await self.guilds.settings(guild_id) if consumer else None
        return consumer_filter(settings, consumer, types, after=after, before=before)

    async def warm_up(self, guild_id: str) -> None:
        """Load the guild's vectors now, so the first search is not a cold start."""
        await self.retriever.warm(guild_id)

    async def build_prompt_slice(
        self,
        guild_id: str,
        channel_id: str | None,
        user_id: str,
        query: str,
        *,
        visible_channels: set[str] | None = None,
        exclude_message_ids: Sequence[str] = (),
        as_of: datetime | None = None,
        consumer: str | None = None,
    ) -> PromptSlice:
        """``exclude_message_ids``: e.g. the message being answered, already ingested;
        ``as_of`` and ``consumer``: as in ``search``."""
        started = time.perf_counter()
        only = await self.fact_filter(guild_id, consumer)
        with self._usage.searching(guild_id, "reply memory", self._search_model(guild_id)) as call:
            result: PromptSlice = await self.retriever.build_prompt_slice(
                guild_id,
                channel_id,
                user_id,
                query,
                visible_channels=visible_channels,
                exclude_message_ids=exclude_message_ids,
                as_of=as_of,
                only=only,
            )
            call.hits = result.size
        self._search_stats.count(started)
        return result

    # -- snapshot -------------------------------------------------------------------------------------
    @property
    def snapshot_path(self) -> Path:
        return self._snapshot_file.path

    async def refresh_snapshot(self) -> str:
        """Write MEMORY.md now and return it (errors are raised)."""
        await self._snapshot_file.write()
        return await self._snapshot_file.read()

    async def write_snapshot(self) -> bool:
        """Write MEMORY.md after any write in progress, as the debounced refresher
        does (the scheduled job); False if it failed (logged and counted)."""
        return await self.snapshot.refresh_now()

    async def snapshot_markdown(self) -> str:
        return await self._snapshot_file.read()

    # -- journal ------------------------------------------------------------------------------------
    async def journal_days(self) -> list[JournalDay]:
        """The daily journals (files, or rendered from the database), newest first."""
        return await self.journals.days()

    async def journal_entries(self, day: str) -> list[JournalEntry] | None:
        """The lines of one day (``YYYY-MM-DD``, else InvalidInput); None: it has none."""
        return await self.journals.entries_of_day(day)
