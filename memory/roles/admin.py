"""``Memory.admin``: the action log, counters, health and re-indexing — what an
operator watches and the jobs run."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from memory.clock import Clock, iso
from memory.config import MemoryConfig
from memory.db.core import Database
from memory.disk import disk_problem
from memory.embed.service import EmbeddingService
from memory.guild_settings import GUILD_SETTINGS
from memory.ingest.budgets import BUDGET_KEYS, budget_of
from memory.ingest.pipeline import BatchProcessor
from memory.ingest.queue import IngestQueue
from memory.models import ActionLogEntry
from memory.roles.guilds import GuildOps
from memory.roles.storage_health import StorageHealth
from memory.roles.upkeep import TTL_KEYS
from memory.snapshot import SnapshotRefresher
from memory.store import ops as store_ops

LOG_LIMIT_MAX = 500
# How often a health read that waits on the database looks whether the
# database has meanwhile been found unreachable (then health answers without it).
HEALTH_WATCH_S = 0.1
# Health's counts when the database cannot be read (damaged, gone).
_UNREAD: dict[str, Any] = {
    "facts_active": 0,
    "facts_total": 0,
    "facts_fts_rows": 0,
    "messages": 0,
    "messages_fts_rows": 0,
    "message_states": {},
    "vectors": {},
}


@dataclass
class SearchStats:
    """Retrieval latency (searches and prompt slices), for the dashboard and /metrics."""

    calls: int = 0
    ms_total: float = 0.0

    def count(self, started: float) -> None:
        """One call that began at ``time.perf_counter()`` value ``started``."""
        self.calls += 1
        self.ms_total += (time.perf_counter() - started) * 1000


@dataclass(frozen=True)
class ReindexReport:
    """Vectors a re-index wrote, and the embedding errors it met (the last one's text)."""

    facts: int
    messages: int
    errors: int
    last_error: str | None


class AdminOps:
    def __init__(
        self,
        *,
        db: Database,
        config: MemoryConfig,
        clock: Clock,
        queue: IngestQueue,
        pipeline: BatchProcessor,
        embeddings: EmbeddingService,
        snapshot: SnapshotRefresher,
        guilds: GuildOps,
        search: SearchStats,
        rejected: dict[str, int],
        storage: StorageHealth | None = None,
    ) -> None:
        self._db = db
        self._config = config
        self._clock = clock
        self._queue = queue
        self._pipeline = pipeline
        self._embeddings = embeddings
        self._snapshot = snapshot
        self._guilds = guilds
        self._search = search
        self._rejected = rejected  # reason → count, kept by Memory.ingest_message
        self._storage = storage

    # -- the action log --------------------------------------------------------------------
    async def log_action(
        self,
        kind: str,
        message: str,
        *,
        guild_id: str | None = None,
        subject: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        now = iso(self._clock())
        await self._db.write(
            lambda con: store_ops.log_action(
                con, kind, message, now, guild_id=guild_id, subject=subject, detail=detail
            )
        )

    async def action_log(
        self,
        *,
        kind: str | None = None,
        guild_id: str | None = None,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[ActionLogEntry]:
        """Newest first; ``before_id`` pages."""
        return list(
            await self._db.read(
                lambda con: store_ops.action_log(
                    con,
                    kind=kind,
                    guild_id=guild_id,
                    before_id=before_id,
                    limit=max(1, min(LOG_LIMIT_MAX, limit)),
                )
            )
        )

    async def prune_action_log(self) -> int:
        """Apply the action log's retention (``config.action_log``); returns rows deleted.
        Deletes in chunks so a large backlog never holds the writer for long."""
        cfg = self._config.action_log
        older_than = (
            iso(self._clock() - timedelta(days=cfg.keep_days)) if cfg.keep_days > 0 else None
        )
        if older_than is None and cfg.max_rows <= 0:
            return 0
        deleted = 0
        while True:
            n = await self._db.write(
                lambda con: store_ops.prune_action_log(
                    con, older_than=older_than, keep_rows=cfg.max_rows, limit=cfg.prune_chunk
                )
            )
            deleted += n
            if n < cfg.prune_chunk:
                return deleted

    # -- embeddings ----------------------------------------------------------------------------
    async def reindex(
        self,
        progress: Callable[[str, int], None] | None = None,
        *,
        foreground: bool = False,
    ) -> ReindexReport:
        """Embed every fact and message of every guild that has no vector for its
        guild's model. ``foreground``: a command someone waits for, so the
        embedding is not niced like the live bot's background work."""
        guild_ids = [g["guild_id"] for g in await self._guilds.overview()]
        stats = self._embeddings.stats
        errors_before = stats.errors
        niced_before = self._embeddings.low_priority
        if foreground:
            self._embeddings.low_priority = False
        try:
            totals = await self._embeddings.reindex(guild_ids, progress=progress)
        finally:
            self._embeddings.low_priority = niced_before
        errors = stats.errors - errors_before
        return ReindexReport(
            facts=totals["facts"],
            messages=totals["messages"],
            errors=errors,
            last_error=stats.last_error if errors else None,
        )

    # -- settings in force ----------------------------------------------------------------------
    async def settings_in_force(self, guild_id: str) -> dict[str, Any]:
        """Each guild setting's value in force now, blank ones included: the
        guild's own, else the deployment's (budgets from the ingest
        configuration, the extraction and embedding models this engine
        uses), else the declared default."""
        s = await self._guilds.settings(guild_id)
        out: dict[str, Any] = {spec.key: getattr(s, spec.key) for spec in GUILD_SETTINGS}
        for kind, key in BUDGET_KEYS.items():
            out[key] = budget_of(s, kind, self._config.ingest)
        for key in (*TTL_KEYS.values(), "purge_after_days"):
            out[key] = s.number(key)
        extractor = self._pipeline.extractor
        default_model = getattr(extractor, "model", None) or (extractor and extractor.name)
        out["extract_model"] = (s.extract_model if default_model != "rules" else None) or (
            default_model
        )
        out["embedding_model"] = self._embeddings.model_for_guild(guild_id)
        return out

    # -- counters and health ---------------------------------------------------------------------
    def counters(self) -> dict[str, Any]:
        q = self._queue.stats
        p = self._pipeline.stats
        e = self._embeddings.stats
        search = self._search
        consent = self._pipeline.gate.stats
        return {
            "queue_depth": self._queue.depth,
            "queue_in_flight": self._queue.in_flight,
            "queue_capacity": self._config.ingest.queue_capacity,
            "ingest_accepted": q.accepted,
            "ingest_duplicates": q.duplicates,
            "ingest_rejected": q.rejected,
            "ingest_dropped": q.dropped,
            "ingest_processed": q.processed,
            "ingest_replayed": q.replayed,
            "ingest_failed_batches": q.failed_batches,
            "last_drop_id": q.last_drop_id,
            "extract_calls": p.extract_calls,
            "extract_errors": p.extract_errors,
            "extract_ms_avg": (p.extract_ms_total / p.extract_calls) if p.extract_calls else 0.0,
            "facts_added": p.facts_added,
            "facts_updated": p.facts_updated,
            "decision_adds": p.decision_adds,
            "decision_noops": p.decision_noops,
            "decision_updates": p.decision_updates,
            "decision_supersedes": p.decision_supersedes,
            "decision_llm_calls": self._pipeline.decisions.llm_calls,
            "decision_llm_errors": self._pipeline.decisions.llm_errors,
            "decision_llm_fallbacks": self._pipeline.decisions.llm_fallbacks,
            "candidates_rejected": p.candidates_rejected,
            "guard_refused": p.guard_refused,
            "sensitive_queued": consent.queued,
            "sensitive_dropped": consent.dropped,
            "sensitive_stored": consent.stored,
            "review_queued": self._pipeline.review.stats.queued,
            "journal_errors": p.journal_errors,
            "ingest_retries_scheduled": p.retries_scheduled,
            "ingest_failed": p.messages_failed,
            "embedding_calls": e.calls,
            "embedding_errors": e.errors,
            "embedding_backlog": self._embeddings.backlog,
            "snapshot_runs": self._snapshot.runs,
            "snapshot_errors": self._snapshot.errors,
            "search_calls": search.calls,
            "search_ms_total": search.ms_total,
            "search_ms_avg": (search.ms_total / search.calls if search.calls else 0.0),
            "rejected_reasons": dict(self._rejected),
        }

    def database(self) -> dict[str, Any]:
        """Whether the database answers, since when not, reconnect attempts
        (``memory.db.status``); the give-up limit and the failure, if any."""
        self._db.status.check()
        return self._db.status.as_dict()

    async def database_failure(self) -> str:
        """Return once the process should stop using the database (unreachable
        past ``database.unreachable_exit_s``, or damaged): why, in one line."""
        return await self._db.status.wait_failure()

    async def _unless_unreachable(self, read: Awaitable[Any]) -> Any | None:
        """``read``'s result, or None once the database is found unreachable
        while it waits (the read finishes in the background when it is back)."""
        task = asyncio.ensure_future(read)
        while not task.done():
            await asyncio.wait({task}, timeout=HEALTH_WATCH_S)
            if not task.done() and (not self._db.status.reachable or self._db.status.failure):
                task.add_done_callback(_consume)
                return None
        return task.result()

    async def health(self) -> dict[str, Any]:
        database = self.database()
        warnings: list[str] = []
        counts = None
        # Passing states that clear themselves: shown, but not "needs attention".
        notices: list[str] = []
        if database["reachable"] and not database["failure"]:
            try:
                counts = await self._unless_unreachable(self._db.read(store_ops.health_counts))
            except Exception as exc:
                problem = disk_problem(exc)
                if problem is None:
                    raise
                # Health must say so, not fail: what the file checks found follows.
                counts = dict(_UNREAD)
                warnings.append(f"the database cannot be read: {problem.describe()}")
            database = self.database()
        if counts is None:
            away = self._database_away(database)
            # The file's own checks need no connection, and they are what an
            # operator needs most when the database was given up on.
            lost = None if self._storage is None else await self._storage.report()
            if lost is not None:
                away["storage"] = lost.as_dict()
                away["warnings"].extend(lost.warnings)
            return away
        if counts["facts_fts_rows"] != counts["facts_total"]:
            warnings.append(
                f"fact FTS rows ({counts['facts_fts_rows']}) != facts ({counts['facts_total']})"
            )
        if counts["messages_fts_rows"] != counts["messages"]:
            warnings.append("message FTS rows differ from messages")
        model = self._embeddings.default_model
        if model is not None:
            v = counts["vectors"].get(model, {"fact_index": 0})
            missing = counts["facts_active"] - v.get("fact_index", 0)
            if missing > 0 and self._embeddings.catching_up:
                notices.append(
                    f"{missing} active fact{'s' if missing != 1 else ''} (new or just edited) "
                    f"wait for their vector ({model}); this process is making them now. "
                    "Until then search finds them by their words only."
                )
            elif missing > 0:
                warnings.append(
                    f"{missing} active fact{'s have' if missing != 1 else ' has'} no vector for "
                    f"{model}: search finds them by their words only. The bot's hourly "
                    "re-index (jobs.reindex_interval_min) or `guildlore reindex` embeds them; "
                    "this warning clears itself then"
                    + (
                        f" (the last embedding error: {self._embeddings.stats.last_error})"
                        if self._embeddings.stats.last_error
                        else ""
                    )
                )
        if self._queue.stats.dropped:
            warnings.append(f"{self._queue.stats.dropped} messages dropped by queue overflow")
        states = counts["message_states"]
        waiting, failed = int(states.get("retry", 0)), int(states.get("failed", 0))
        if waiting:
            warnings.append(
                f"{waiting} messages wait for a retry of their processing "
                "(the engine retries them on its own)"
            )
        if failed:
            warnings.append(
                f"{failed} messages failed processing: `guildlore retry` lists the reasons "
                "and tries them again"
            )
        storage = None if self._storage is None else await self._storage.report()
        if storage is not None:
            warnings.extend(storage.warnings)
        return {
            **counts,
            "storage": None if storage is None else storage.as_dict(),
            "messages_retry": waiting,
            "messages_failed": failed,
            "sqlite": self._db.versions,
            "database_connection": database,
            "embedding_model": model,
            "counters": self.counters(),
            "warnings": warnings,
            "notices": notices,
            "ok": not warnings,
        }

    def _database_away(self, database: dict[str, Any]) -> dict[str, Any]:
        """Health while the database cannot be read: what this process knows."""
        if database["failure"]:
            warning = f"the process gave up on the database: {database['failure']}"
        else:
            limit = database["unreachable_exit_s"]
            warning = (
                f"the database is unreachable since {database['unreachable_since']} "
                f"({database['unreachable_s']:.0f} s; {database['reconnect_attempts']} reconnect "
                f"attempts so far; last error: {database['last_error']}); work waits for it"
                + (f", the process exits after {limit:g} s" if limit else "")
            )
        return {
            "sqlite": self._db.versions,
            "database_connection": database,
            "embedding_model": self._embeddings.default_model,
            "counters": self.counters(),
            "warnings": [warning],
            "ok": False,
        }


def _consume(task: asyncio.Future[Any]) -> None:
    """A read health stopped waiting for: its error is not news (the outage is)."""
    if not task.cancelled():
        task.exception()
