"""Operator operations of the ``Memory`` facade: traces, fact editing, names,
per-guild settings, voice consent, the action log, counters and health.

They live in a mixin so service.py stays about the lifecycle, ingest, retrieval
and forget; ``Memory`` inherits them, so callers see one object.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from memory.clock import Clock, iso
from memory.config import MemoryConfig
from memory.embed.service import GUILD_MODEL_KEY, EmbeddingService
from memory.errors import InvalidInput
from memory.extract.guards import normalise_fact, normalise_type
from memory.guild_settings import GuildSettings, GuildSettingsCache
from memory.guild_settings import parse_value as parse_setting
from memory.ingest.pipeline import BatchProcessor
from memory.ingest.queue import IngestQueue
from memory.models import (
    ActionLogEntry,
    Fact,
    HistoryEntry,
    Hit,
    StoredMessage,
    Trace,
)
from memory.snapshot import SnapshotRefresher
from memory.store import facts as store
from memory.store import ops as store_ops
from memory.store.db import Database


class OperatorOps:
    """Mixed into ``Memory``; the attributes below are set by ``Memory.__init__``."""

    db: Database
    clock: Clock
    embeddings: EmbeddingService
    snapshot: SnapshotRefresher
    settings_cache: GuildSettingsCache
    _background: set[asyncio.Task[Any]]
    config: MemoryConfig
    queue: IngestQueue
    pipeline: BatchProcessor
    rejected: dict[str, int]
    _search_calls: int
    _search_ms_total: float

    # -- traces --------------------------------------------------------------------------------------
    async def record_traces(
        self,
        guild_id: str,
        channel_id: str | None,
        message_id: str | None,
        *,
        retrieved: Sequence[Hit] = (),
        stored: Sequence[tuple[Fact, str]] = (),
        reply_id: str | None = None,
    ) -> int:
        """MemoryTrace rows: facts a reply retrieved, and facts it stored or updated."""
        rows: list[dict[str, Any]] = []
        for h in retrieved:
            rows.append(
                {
                    "guild_id": guild_id,
                    "channel_id": channel_id,
                    "message_id": message_id,
                    "reply_id": reply_id,
                    "fact_id": int(h.id) if h.kind == "fact" else None,
                    "action": "retrieved",
                    "content": h.text,
                    "score": h.score,
                    "score_parts": {**h.parts.as_dict(), "kind": h.kind, "ref": h.id},
                }
            )
        for fact, event in stored:
            rows.append(
                {
                    "guild_id": guild_id,
                    "channel_id": channel_id,
                    "message_id": message_id,
                    "reply_id": reply_id,
                    "fact_id": fact.id,
                    "action": "stored" if event == "add" else "updated",
                    "content": fact.fact,
                    "score": None,
                    "score_parts": None,
                }
            )
        if not rows:
            return 0
        now = iso(self.clock())

        def work(con: Any) -> int:
            n = store_ops.add_traces(con, rows, now)
            store_ops.log_action(
                con,
                "memory_trace",
                f"{n} traces for message {message_id}",
                now,
                guild_id=guild_id,
                detail={"message_id": message_id, "reply_id": reply_id},
            )
            return n

        return int(await self.db.write(work))

    async def traces_for_message(self, guild_id: str, message_id: str) -> list[Trace]:
        return list(await self.db.read(store_ops.traces_for_message, guild_id, message_id))

    async def last_traced_message(self, guild_id: str, channel_id: str) -> str | None:
        result: str | None = await self.db.read(store_ops.last_traced_message, guild_id, channel_id)
        return result

    async def traces_for_fact(self, guild_id: str, fact_id: int) -> list[Trace]:
        return list(await self.db.read(store_ops.traces_for_fact, guild_id, fact_id))

    async def recent_traces(self, guild_id: str | None, limit: int = 50) -> list[Trace]:
        return list(await self.db.read(store_ops.recent_traces, guild_id, limit))

    # -- operator: facts ----------------------------------------------------------------------------
    async def list_facts(
        self,
        guild_id: str,
        *,
        subject: str | None = None,
        fact_type: str | None = None,
        active: bool | None = True,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[Fact]:
        return list(
            await self.db.read(
                lambda con: store.list_facts(
                    con,
                    guild_id,
                    subject=subject,
                    fact_type=fact_type,
                    active=active,
                    before_id=before_id,
                    limit=max(1, min(500, limit)),
                )
            )
        )

    async def get_fact(self, guild_id: str, fact_id: int) -> Fact | None:
        result: Fact | None = await self.db.read(store.get_fact, guild_id, fact_id)
        return result

    async def edit_fact(
        self,
        guild_id: str,
        fact_id: int,
        *,
        text: str | None = None,
        fact_type: str | None = None,
        actor: str = "operator",
    ) -> Fact | None:
        """Correct a fact's text or type. Raises InvalidInput for text the guards refuse."""
        new_text = None
        if text is not None:
            new_text = normalise_fact(text)
            if new_text is None:
                raise InvalidInput("fact text must be 4 to 190 characters")
        new_type = normalise_type(fact_type) if fact_type is not None else None
        now = iso(self.clock())
        from memory.store.sqlite import IntegrityError

        try:
            fact: Fact | None = await self.db.write(
                lambda con: store.edit_fact(
                    con, guild_id, fact_id, text=new_text, fact_type=new_type, actor=actor, now=now
                )
            )
        except IntegrityError as exc:
            raise InvalidInput("another fact about this subject already has that text") from exc
        if fact is not None:
            self.embeddings.schedule_facts([fact])
            self.snapshot.request()
        return fact

    async def set_fact_active(
        self, guild_id: str, fact_id: int, active: bool, *, actor: str = "operator"
    ) -> Fact | None:
        now = iso(self.clock())
        fact: Fact | None = await self.db.write(
            store.set_fact_active, guild_id, fact_id, active, actor, now
        )
        if fact is not None:
            if active:
                self.embeddings.schedule_facts([fact])
            self.snapshot.request()
        return fact

    async def delete_fact(self, guild_id: str, fact_id: int, *, actor: str = "operator") -> bool:
        now = iso(self.clock())
        ok = bool(await self.db.write(store.delete_fact, guild_id, fact_id, actor, now))
        if ok:
            self.snapshot.request()
        return ok

    async def fact_history(self, guild_id: str, fact_id: int) -> list[HistoryEntry]:
        return list(await self.db.read(store.fact_history, guild_id, fact_id))

    async def get_message(self, guild_id: str, message_id: str) -> StoredMessage | None:
        result: StoredMessage | None = await self.db.read(store.get_message, guild_id, message_id)
        return result

    # -- operator: guilds, settings, health ----------------------------------------------------------
    async def guilds(self) -> list[dict[str, Any]]:
        return list(await self.db.read(store_ops.guild_overview))

    async def members(self, guild_id: str) -> list[dict[str, Any]]:
        return list(await self.db.read(store_ops.members, guild_id))

    async def channels(self, guild_id: str) -> list[dict[str, Any]]:
        return list(await self.db.read(store_ops.channels, guild_id))

    async def set_names(
        self,
        guild_id: str,
        *,
        guild_name: str | None = None,
        channels: dict[str, str] | None = None,
        members: dict[str, str] | None = None,
    ) -> None:
        """Record display names (guild, channels, members) for pages and the snapshot."""
        now = iso(self.clock())

        def work(con: Any) -> None:
            store.set_guild_name(con, guild_id, guild_name, now)
            for cid, name in (channels or {}).items():
                store.set_channel_name(con, guild_id, cid, name, now)
            for uid, name in (members or {}).items():
                store.upsert_member(con, guild_id, uid, name, now)

        await self.db.write(work)

    async def guild_settings(self, guild_id: str) -> GuildSettings:
        """Resolved per-guild settings (cached; the cache is updated on every change)."""
        return await self.settings_cache.get(guild_id)

    async def raw_guild_settings(self, guild_id: str) -> dict[str, str]:
        return dict(await self.db.read(store_ops.get_guild_settings, guild_id))

    async def set_guild_setting(
        self, guild_id: str, key: str, value: str | None, *, actor: str = "operator"
    ) -> None:
        """Validate and store one setting (InvalidInput on bad values); applies at once."""
        value = parse_setting(key, value)
        now = iso(self.clock())

        def work(con: Any) -> None:
            store_ops.set_guild_setting(con, guild_id, key, value, now)
            store_ops.log_action(
                con,
                "settings_change",
                f"{key} = {value!r} by {actor}",
                now,
                guild_id=guild_id,
                detail={"key": key, "value": value, "actor": actor},
            )

        await self.db.write(work)
        self.settings_cache.invalidate(guild_id)
        if key == GUILD_MODEL_KEY:
            self.embeddings.set_guild_model(guild_id, value)
            # Vectors of the old model stay (never mixed); fill the new model's.
            task = asyncio.create_task(self.embeddings.reindex([guild_id]))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def set_voice_opt_out(self, guild_id: str, user_id: str, opted_out: bool) -> None:
        now = iso(self.clock())
        await self.db.write(store_ops.set_voice_opt_out, guild_id, user_id, opted_out, now)

    async def voice_opt_outs(self) -> set[tuple[str, str]]:
        return set(await self.db.read(store_ops.voice_opt_outs))

    async def log_action(
        self,
        kind: str,
        message: str,
        *,
        guild_id: str | None = None,
        subject: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        now = iso(self.clock())
        await self.db.write(
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
        return list(
            await self.db.read(
                lambda con: store_ops.action_log(
                    con,
                    kind=kind,
                    guild_id=guild_id,
                    before_id=before_id,
                    limit=max(1, min(500, limit)),
                )
            )
        )

    async def reindex(self, progress: Any = None) -> dict[str, int]:
        guild_ids = [g["guild_id"] for g in await self.guilds()]
        return await self.embeddings.reindex(guild_ids, progress=progress)

    def counters(self) -> dict[str, Any]:
        q = self.queue.stats
        p = self.pipeline.stats
        e = self.embeddings.stats
        return {
            "queue_depth": self.queue.depth,
            "queue_in_flight": self.queue.in_flight,
            "queue_capacity": self.config.ingest.queue_capacity,
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
            "candidates_rejected": p.candidates_rejected,
            "journal_errors": p.journal_errors,
            "ingest_retries_scheduled": p.retries_scheduled,
            "ingest_failed": p.messages_failed,
            "embedding_calls": e.calls,
            "embedding_errors": e.errors,
            "embedding_backlog": self.embeddings.backlog,
            "snapshot_runs": self.snapshot.runs,
            "snapshot_errors": self.snapshot.errors,
            "search_calls": self._search_calls,
            "search_ms_total": self._search_ms_total,
            "search_ms_avg": (
                self._search_ms_total / self._search_calls if self._search_calls else 0.0
            ),
            "rejected_reasons": dict(self.rejected),
        }

    async def health(self) -> dict[str, Any]:
        counts = await self.db.read(store_ops.health_counts)
        warnings: list[str] = []
        if counts["facts_fts_rows"] != counts["facts_total"]:
            warnings.append(
                f"fact FTS rows ({counts['facts_fts_rows']}) != facts ({counts['facts_total']})"
            )
        if counts["messages_fts_rows"] != counts["messages"]:
            warnings.append("message FTS rows differ from messages")
        model = self.embeddings.default_model
        if model is not None:
            v = counts["vectors"].get(model, {"fact_index": 0})
            missing = counts["facts_active"] - v.get("fact_index", 0)
            if missing > 0:
                warnings.append(f"{missing} active facts have no vector for {model} yet")
        if self.queue.stats.dropped:
            warnings.append(f"{self.queue.stats.dropped} messages dropped by queue overflow")
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
        return {
            **counts,
            "messages_retry": waiting,
            "messages_failed": failed,
            "sqlite": self.db.versions,
            "embedding_model": model,
            "counters": self.counters(),
            "warnings": warnings,
            "ok": not warnings,
        }
