"""Daily consolidation of a guild's facts (``Memory.consolidation``).

Bounded: the candidate pool is the current facts changed in the last 72
hours and the most retrieved ones (at most ``MAX_POOL``); their pairs with
the same subject's current facts are prefiltered, pairs checked in the last
14 days (by fingerprint) are skipped, and at most ``MAX_PAIRS`` are checked
a run. A pair's verdict is a merge or a supersede through the write
decision's rules (``memory.roles.consolidation.pairs``), applied with a history
row and its reason. A dry run writes its report and changes nothing; a run
can be undone by its id, which puts back exactly the rows it changed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from memory.clock import Clock, iso
from memory.db.core import Connection, Database
from memory.errors import LLMError
from memory.roles.consolidation.insights import (
    Insight,
    MemberFacts,
    active_members,
    gather_insights,
)
from memory.roles.consolidation.llm import BATCH, PairChecker, in_band
from memory.roles.consolidation.pairs import offline_verdict, pairs_of
from memory.store import consolidation as store
from memory.store.facts import guilds_with_active_facts

log = logging.getLogger(__name__)

MAX_POOL = 500
MAX_PAIRS = 200
OFTEN_RETRIEVED = 50
RECENT_HOURS = 72


@dataclass(frozen=True)
class ConsolidationReport:
    run_id: int
    guild_id: str
    dry_run: bool
    report: dict[str, Any]


@dataclass(frozen=True)
class _Outcome:
    """What a run found, to write in one transaction."""

    actions: list[store.Action]
    checked: list[tuple[str, str]]
    insights: list[Insight]
    ran: list[str]


class _Tally:
    """One run's pair checks: the bound, the fingerprints skipped, the verdicts."""

    def __init__(self, fresh: set[str]) -> None:
        self.fresh = fresh
        self.checked: list[tuple[str, str]] = []
        self.actions: list[store.Action] = []
        self.skipped = self.calls = self.errors = 0
        self._asked = 0

    def take(
        self, pairs: list[tuple[store.PoolFact, store.PoolFact]]
    ) -> Iterator[tuple[store.PoolFact, store.PoolFact]]:
        """The pairs to check: not checked in the last 14 days, within the bound."""
        for a, b in pairs:
            if store.fingerprint(a, b) in self.fresh:
                self.skipped += 1
                continue
            if len(self.checked) + self._asked >= MAX_PAIRS:
                return
            self._asked += 1
            yield a, b

    def judged(self, a: store.PoolFact, b: store.PoolFact, verdict: store.Action | None) -> None:
        self._asked -= 1
        self.checked.append((store.fingerprint(a, b), verdict.kind if verdict else "different"))
        if verdict is not None:
            self.actions.append(verdict)

    async def ask(
        self, checker: PairChecker, batch: list[tuple[store.PoolFact, store.PoolFact]]
    ) -> None:
        self.calls += 1
        try:
            verdicts = await checker.check(batch)
        except LLMError as exc:
            # Not fingerprinted: the next run asks again.
            log.warning("consolidation pair check failed: %s", exc)
            self.errors += 1
            self._asked -= len(batch)
            return
        for (a, b), verdict in zip(batch, verdicts, strict=True):
            self.judged(a, b, verdict)


class Consolidation:
    def __init__(
        self, db: Database, clock: Clock, on_changed: Callable[[], None] | None = None
    ) -> None:
        self._db = db
        self._clock = clock
        self._on_changed = on_changed

    async def run(
        self,
        guild_id: str,
        *,
        dry_run: bool = False,
        actor: str = "consolidation",
        checker: PairChecker | None = None,
    ) -> ConsolidationReport:
        """One run over ``guild_id``; its report (also kept with the run).
        ``checker``: the LLM that judges the pairs offline rules cannot."""
        now = self._clock()
        since = iso(now - timedelta(hours=RECENT_HOURS))
        fresh_since = iso(now - timedelta(days=store.FINGERPRINT_DAYS))
        pool, partners, fresh, vectors = await self._db.read(
            self._gather, guild_id, since, fresh_since, checker is not None
        )
        sure = pairs_of(pool, partners)
        taken = {(min(a.id, b.id), max(a.id, b.id)) for a, b in sure}
        unsure = pairs_of(
            pool,
            partners,
            lambda a, b: (min(a.id, b.id), max(a.id, b.id)) not in taken and in_band(a, b, vectors),
        )
        tally = _Tally(fresh)
        for a, b in tally.take(sure):
            tally.judged(a, b, offline_verdict(a, b))
        if checker is not None:
            batch: list[tuple[store.PoolFact, store.PoolFact]] = []
            for pair in tally.take(unsure):
                batch.append(pair)
                if len(batch) == BATCH:
                    await tally.ask(checker, batch)
                    batch = []
            if batch:
                await tally.ask(checker, batch)
        insights: list[Insight] = []
        ran: list[str] = []
        members: list[MemberFacts] = []
        if checker is not None:
            day_ago = iso(now - timedelta(hours=24))
            members = await self._db.read(active_members, guild_id, day_ago)
            if not dry_run:
                insights, ran, errors = await gather_insights(checker, members)
                tally.calls += len(members)
                tally.errors += errors
        report: dict[str, Any] = {
            "insight_members": len(members),
            "mode": "llm" if checker is not None else "offline",
            "candidates": len(pool),
            "pairs": len(sure) + (len(unsure) if checker is not None else 0),
            "checked": len(tally.checked),
            "skipped_recent": tally.skipped,
            "llm_calls": tally.calls,
            "llm_errors": tally.errors,
            "proposed": [x.as_dict() for x in tally.actions],
        }
        run_id, report = await self._db.write(
            self._write,
            guild_id,
            _Outcome(tally.actions, tally.checked, insights, ran),
            report,
            dry_run,
            iso(now),
            fresh_since,
            actor,
        )
        if (report.get("applied") or report.get("insights")) and self._on_changed is not None:
            self._on_changed()
        log.info(
            "consolidation run %d of guild %s: %d pairs checked, %d changes%s",
            run_id,
            guild_id,
            len(tally.checked),
            len(report.get("applied", [])),
            " (dry run)" if dry_run else "",
        )
        return ConsolidationReport(run_id, guild_id, dry_run, report)

    async def run_all(
        self,
        *,
        dry_run: bool = False,
        checker: PairChecker | None = None,
        owned: Callable[[str], bool] | None = None,
    ) -> list[ConsolidationReport]:
        """The daily job: one run per guild that has active facts."""
        out = []
        for guild_id in await self._db.read(guilds_with_active_facts):
            if owned is not None and not owned(guild_id):
                continue
            out.append(await self.run(guild_id, dry_run=dry_run, checker=checker))
        return out

    async def undo(self, guild_id: str, run_id: int, *, actor: str = "operator") -> list[int]:
        """Undo run ``run_id``: the facts it changed are as they were before it
        (InvalidInput when it cannot be undone). The facts restored."""
        restored: list[int] = await self._db.write(
            store.undo_run, guild_id, run_id, actor, iso(self._clock())
        )
        if restored and self._on_changed is not None:
            self._on_changed()
        return restored

    async def runs(self, guild_id: str, limit: int = 50) -> list[store.RunRecord]:
        return list(await self._db.read(store.list_runs, guild_id, limit))

    async def get(self, guild_id: str, run_id: int) -> store.RunRecord | None:
        result: store.RunRecord | None = await self._db.read(store.get_run, guild_id, run_id)
        return result

    # -- transactions ------------------------------------------------------------------------
    @staticmethod
    def _gather(
        con: Connection, guild_id: str, since: str, fresh_since: str, with_vectors: bool
    ) -> tuple[list[store.PoolFact], dict[str, list[store.PoolFact]], set[str], dict[int, bytes]]:
        pool = store.candidate_pool(con, guild_id, since, MAX_POOL, OFTEN_RETRIEVED)
        partners = store.subject_facts(con, guild_id, sorted({f.subject for f in pool}))
        ids = sorted({f.id for f in pool} | {f.id for fs in partners.values() for f in fs})
        vectors = store.pair_vectors(con, guild_id, ids) if with_vectors else {}
        return pool, partners, store.fresh_fingerprints(con, guild_id, fresh_since), vectors

    @staticmethod
    def _write(
        con: Connection,
        guild_id: str,
        outcome: _Outcome,
        report: dict[str, Any],
        dry_run: bool,
        now: str,
        fresh_since: str,
        actor: str,
    ) -> tuple[int, dict[str, Any]]:
        run_id = store.start_run(con, guild_id, str(report["mode"]), dry_run, now)
        report = {**report, "run_id": run_id, "dry_run": dry_run}
        if not dry_run:
            writer = store.RunWriter(con, guild_id, run_id, now, actor)
            report["applied"] = [a.as_dict() for a in outcome.actions if writer.apply(a)]
            report["insights"] = [
                {"fact_id": fid, "member": i.user_id, "cites": list(i.cites)}
                for i in outcome.insights
                if (fid := writer.add_insight(i.user_id, i.text, i.cites)) is not None
            ]
            writer.insight_runs(outcome.ran)
            report["after"] = writer.after_images()
            store.save_fingerprints(con, guild_id, outcome.checked, now, fresh_since)
        store.finish_run(con, run_id, report)
        return run_id, report
