"""Budgets and compaction: a scope that a write takes past its budget is
brought back to it exactly.

Scopes (memory/store/budgets.py): each member's facts, the guild's lore,
each channel's episodes and the guild's total, each with a budget from the
guild's settings (blank: the deployment's default).

Without an LLM, the write's own transaction archives the scope's
lowest-value facts. With one, the write only notes the scope; compaction
then runs beside the ingest path, never inside the writer transaction: it
reads the scope, asks the model for one decision (``memory.ingest.compaction``),
and applies it in a write that checks again that the scope is still over
and the facts are still what the model saw. An LLM error, a timeout, an
invalid decision or a database error falls back to archiving the
lowest-value facts; each cause is logged and counted. Compaction archives,
never hard-deletes (the purge does that, later), and every change has a
history row with its reason.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import openai

from memory.clock import Clock, iso
from memory.config import IngestConfig
from memory.db.core import Connection, Database
from memory.db.sqlite import driver as sqlite
from memory.embed.service import EmbeddingService
from memory.extract.base import Extractor
from memory.guild_settings import GuildSettings, resolve
from memory.ingest.batch_decision import WriteDecisions
from memory.ingest.compaction import (
    CompactionDecision,
    CompactionError,
    CompactionLLM,
    CompactionRequest,
    InvalidCompaction,
    show,
)
from memory.models import Fact
from memory.store import budgets as store_budgets
from memory.store import ops as store_ops
from memory.store.budgets import Scope, ScopeKind
from memory.store.facts import get_fact

log = logging.getLogger(__name__)

# The lowest-value facts a compaction call shows besides the new one.
SHOWN = 60
FALLBACK_CAUSES = ("llm_error", "timeout", "invalid", "db_error", "call_cap")
BUDGET_KEYS: dict[ScopeKind, str] = {
    "member": "budget_member_facts",
    "lore": "budget_lore",
    "episodes": "budget_channel_episodes",
    "guild": "budget_guild_total",
}


@dataclass
class CompactionStats:
    compactions: int = 0  # scopes brought back to budget after an LLM-era write
    llm_calls: int = 0
    llm_applied: int = 0  # decisions of the model applied
    archived: int = 0  # facts archived by budgets, any path
    merged: int = 0
    offline: int = 0  # facts archived by value without an LLM configured
    failed: int = 0  # compactions that raised (logged; the next write retries)
    fallbacks: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FALLBACK_CAUSES, 0))


def budget_of(settings: GuildSettings, kind: ScopeKind, cfg: IngestConfig) -> int:
    defaults: dict[ScopeKind, int] = {
        "member": cfg.keep_facts_per_subject,
        "lore": cfg.keep_lore_per_guild,
        "episodes": cfg.keep_episodes_per_channel,
        "guild": cfg.keep_facts_per_guild,
    }
    return max(1, settings.number(BUDGET_KEYS[kind], defaults[kind]))


@dataclass(frozen=True)
class _Over:
    budget: int
    lowest: list[Fact]
    new: Fact


class BudgetKeeper:
    def __init__(
        self,
        db: Database,
        cfg: IngestConfig,
        clock: Clock,
        embeddings: EmbeddingService,
        decisions: WriteDecisions,
        extractor: Extractor | None,
    ) -> None:
        """Compaction asks the write decision's LLM (its endpoint and model);
        without one, budgets archive by value."""
        self._db = db
        self._cfg = cfg
        self._clock = clock
        self._embeddings = embeddings
        self._decisions = decisions
        self._extractor = extractor
        self._llms: dict[tuple[int, str], CompactionLLM] = {}
        self._pending: set[Scope] = set()
        self._lock = threading.Lock()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self.stats = CompactionStats()
        self._bind()

    def _bind(self) -> None:
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            pass

    def llm(self) -> CompactionLLM | None:
        decider = self._decisions.decider_for(self._extractor)
        if decider is None:
            return None
        key = (id(decider.client), decider.model)
        found = self._llms.get(key)
        if found is None:
            found = self._llms[key] = CompactionLLM(decider.client, decider.model)
        return found

    # -- in the writer transaction ----------------------------------------------------

    def after_write(
        self,
        con: Connection,
        guild_id: str,
        subject: str,
        now: str,
        *,
        channel_id: str | None = None,
        fact_type: str = "other",
    ) -> None:
        """A fact of these fields was written in this transaction: bring its
        scopes back to budget (offline), or note them for compaction."""
        if self.llm() is None:
            n = archive_over_budget(
                con, self._cfg, guild_id, subject, now, channel_id=channel_id, fact_type=fact_type
            )
            self.stats.offline += n
            self.stats.archived += n
            return
        settings = resolve(store_ops.get_guild_settings(con, guild_id))
        for scope in store_budgets.scopes_of(guild_id, subject, channel_id, fact_type):
            if store_budgets.count(con, scope) <= budget_of(settings, scope.kind, self._cfg):
                continue
            with self._lock:
                self._pending.add(scope)
            if self._loop is not None and not self._closed:
                self._loop.call_soon_threadsafe(self._kick)

    # -- beside the ingest path ------------------------------------------------------

    def _kick(self) -> None:
        if self._closed:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        # A scope is noted inside the write's transaction, before its commit:
        # a write queued behind it runs once it has committed (one writer).
        await self._db.write(_barrier)
        while not self._closed:
            with self._lock:
                if not self._pending:
                    return
                scope = self._pending.pop()
            try:
                await self.compact(scope)
            except Exception:
                self.stats.failed += 1
                log.exception("compaction of %s failed", scope.label)

    async def settle(self, timeout: float = 30.0) -> None:
        """Wait for the compactions under way (tests, import, shutdown)."""
        self._bind()
        with self._lock:
            waiting = bool(self._pending)
        if waiting:
            self._kick()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout)
            except TimeoutError:
                log.warning("compaction still running after %.1fs", timeout)
        # A merge re-embeds its fact.
        await self._embeddings.settle(timeout)

    async def close(self, timeout: float = 5.0) -> None:
        await self.settle(timeout)
        self._closed = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def compact(self, scope: Scope) -> None:
        """Bring ``scope`` back to its budget: the model's decision while it
        gives usable ones (at most ``compaction_llm_calls``), else by value."""
        calls = 0
        counted = False
        while True:
            over: _Over | None = await self._db.read(self._look, scope)
            if over is None:
                return
            if not counted:
                self.stats.compactions += 1
                counted = True
            now = iso(self._clock())
            llm = self.llm()
            cause: str | None
            if llm is None:
                cause = None
            elif calls >= self._cfg.compaction_llm_calls:
                cause = "call_cap"
            else:
                calls += 1
                cause = await self._ask(llm, scope, over, now)
                if cause == "":
                    continue
            await self._fallback(scope, over.budget, cause, now)

    def _look(self, con: Connection, scope: Scope) -> _Over | None:
        settings = resolve(store_ops.get_guild_settings(con, scope.guild_id))
        budget = budget_of(settings, scope.kind, self._cfg)
        if store_budgets.count(con, scope) <= budget:
            return None
        new = store_budgets.newest(con, scope)
        if new is None:
            return None
        return _Over(budget, store_budgets.lowest_value(con, scope, SHOWN), new)

    async def _ask(self, llm: CompactionLLM, scope: Scope, over: _Over, now: str) -> str:
        """One model decision, applied; "" when applied, else the fallback's cause."""
        self.stats.llm_calls += 1
        request = CompactionRequest(show(over.lowest, over.new), over.new.id, over.budget)
        try:
            decision = await llm.decide(request, self._cfg.compaction_timeout_s)
        except TimeoutError:
            return self._failed(scope, "timeout", f"no answer in {self._cfg.compaction_timeout_s}s")
        except CompactionError as exc:
            timed_out = isinstance(exc.__cause__, openai.APITimeoutError)
            return self._failed(scope, "timeout" if timed_out else "llm_error", str(exc))
        except InvalidCompaction as exc:
            return self._failed(scope, "invalid", str(exc))
        try:
            outcome: str = await self._db.write(self._apply, scope, decision, over, now)
        except sqlite.Error as exc:
            return self._failed(scope, "db_error", f"{type(exc).__name__}: {exc}")
        if outcome == "stale":
            return self._failed(scope, "invalid", "the decision's facts changed meanwhile")
        if outcome == "applied":
            self.stats.llm_applied += 1
        return ""

    def _failed(self, scope: Scope, cause: str, detail: str) -> str:
        self.stats.fallbacks[cause] += 1
        log.warning("compaction of %s falls back to value (%s): %s", scope.label, cause, detail)
        return cause

    def _apply(
        self, con: Connection, scope: Scope, d: CompactionDecision, over: _Over, now: str
    ) -> str:
        """Apply the model's decision if the scope is still over and its facts
        still count in it unchanged: "applied"; "done" when the scope is back
        at budget already, "stale" when the facts changed (nothing written)."""
        if store_budgets.count(con, scope) <= over.budget:
            return "done"
        facts = [d.target] if d.action == "delete" else [d.target, over.new]
        for f in facts:
            now_f = get_fact(con, scope.guild_id, f.id)
            if now_f is None or now_f.fact != f.fact:
                return "stale"
            if not store_budgets.counts_in_scope(con, scope, f.id):
                return "stale"
        reason = f"compaction ({scope.kind} over budget {over.budget}): {d.reason}"
        if d.action == "delete":
            store_budgets.archive(
                con, d.target, now=now, actor=store_budgets.COMPACTION_ACTOR, reason=reason
            )
        else:
            assert d.new_content is not None
            store_budgets.merge_into(con, d.target, d.new_content, over.new, now=now, reason=reason)
            self.stats.merged += 1
        self.stats.archived += 1
        _log(con, scope, now, {"action": d.action, "target": d.target.id, "reason": d.reason})
        if d.action == "edit":
            merged = get_fact(con, scope.guild_id, d.target.id)
            if merged is not None:
                self._embeddings.schedule_facts([merged])
        return "applied"

    async def _fallback(self, scope: Scope, budget: int, cause: str | None, now: str) -> None:
        def work(con: Connection) -> list[int]:
            gone = store_budgets.archive_lowest(
                con, scope, budget, now=now, reason=_value_reason(scope, budget, cause)
            )
            if gone:
                _log(con, scope, now, {"action": "archive", "facts": gone, "fallback": cause})
            return gone

        gone = await self._db.write(work)
        self.stats.archived += len(gone)
        if cause is None:
            self.stats.offline += len(gone)


def _barrier(con: Connection) -> None:
    return None


def archive_over_budget(
    con: Connection,
    cfg: IngestConfig,
    guild_id: str,
    subject: str,
    now: str,
    *,
    channel_id: str | None = None,
    fact_type: str = "other",
) -> int:
    """In the write's transaction: archive the lowest-value facts of each
    scope the written fact counts in until each is at its budget."""
    settings = resolve(store_ops.get_guild_settings(con, guild_id))
    n = 0
    for scope in store_budgets.scopes_of(guild_id, subject, channel_id, fact_type):
        budget = budget_of(settings, scope.kind, cfg)
        gone = store_budgets.archive_lowest(
            con, scope, budget, now=now, reason=_value_reason(scope, budget, None)
        )
        if gone:
            _log(con, scope, now, {"action": "archive", "facts": gone, "fallback": None})
        n += len(gone)
    return n


def _value_reason(scope: Scope, budget: int, cause: str | None) -> str:
    why = f"over the {scope.kind} budget of {budget}: lowest value"
    return why if cause is None else f"{why} (compaction fallback: {cause})"


def _log(con: Connection, scope: Scope, now: str, detail: dict[str, Any]) -> None:
    store_ops.log_action(
        con,
        "memory_compaction",
        f"compaction of {scope.label}: {detail.get('action')}",
        now,
        guild_id=scope.guild_id,
        subject=scope.key if scope.kind == "member" else None,
        detail={"scope": scope.label, **detail},
    )
