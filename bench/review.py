"""Review-queue benchmark: what the review gate adds to writing one fact.

    .venv/bin/python bench/review.py            # full run
    .venv/bin/python bench/review.py --quick    # short smoke run

The candidates of ``bench/decision.py`` (the real export's messages, one in
eight a re-observation, one in four a "lives in" / "works at" slot phrase,
each subject first holding ``--facts-per-subject`` current facts). A warm-up
half goes through the write decision into a base database, where each
subject's current "lives in" fact is then pinned (so that a later slot
phrase contradicts a pinned fact); the timed half is written into one copy
of that database per review policy, each candidate in its own transaction as
the pipeline writes it — read the subject's current facts, decide, then the
review gate (``ReviewGate.consider``, timed on its own too), then apply the
decision unless the gate queued it, then the archive beyond the budget:

- ``off``: the default; the gate returns at once;
- ``flagged``: confidence check (the candidates' 0.6 is above the default
  50 %), the near-miss check on the candidate's message, the pinned-fact
  check on every update and supersede; contradictions of a pinned fact wait;
- ``all``: every add, update and supersede waits (a queue row instead of a
  fact).

The same candidates in the same order on each copy, interleaved per
candidate so the machine's noise falls on all policies alike. Writes
bench/results/review.json and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import EXPORT, loadavg, percentile, print_table, write_json
from bench.decision import START, Item, candidates
from memory.clock import iso
from memory.config import IngestConfig
from memory.db.sqlite import driver as sqlite
from memory.db.sqlite.migrations import migrate
from memory.decision import decide
from memory.guild_settings import GuildSettings
from memory.ingest.budgets import archive_over_budget
from memory.ingest.review_gate import ReviewGate
from memory.store.fact_decision import apply_decision, current_facts, observed_time
from memory.store.facts import upsert_fact

GUILD = "900000000000000001"
INGEST = IngestConfig()
POLICIES = ("off", "flagged", "all")
VERBS = ("collects", "repairs", "paints", "studies", "photographs", "restores", "sketches")
THINGS = ("old maps", "clocks", "bicycles", "fossils", "stamps", "radios", "papyri", "coins")


def _fill(con: Any, items: list[Item], per_subject: int, now: str) -> None:
    names = {i.new.subject: i.name for i in items}
    with con:
        for subject, name in names.items():
            for k in range(per_subject):
                upsert_fact(
                    con,
                    guild_id=GUILD,
                    channel_id="c1",
                    subject=subject,
                    fact=f"{name} {VERBS[k % 7]} {THINGS[(k // 7) % 8]} from region {k}.",
                    fact_type="other",
                    evidence=None,
                    source_message_id=None,
                    confidence=0.6,
                    now=now,
                    actor="bench",
                )


def _pin_residences(con: Any, now: str) -> int:
    """Pin every subject's current "lives in" fact; how many."""
    with con:
        rows = con.execute(
            "SELECT id FROM memory_facts WHERE guild_id = ? AND is_active = 1 "
            "AND valid_to IS NULL AND fact LIKE '% lives in %'",
            (GUILD,),
        ).fetchall()
        for r in rows:
            con.execute(
                "INSERT INTO memory_pins (fact_id, guild_id, pinned_by, pinned_at) "
                "VALUES (?, ?, 'bench', ?) ON CONFLICT DO NOTHING",
                (int(r[0]), GUILD, now),
            )
    return len(rows)


def _write(
    con: Any, gate: ReviewGate | None, settings: GuildSettings, item: Item, now: str
) -> tuple[str, float]:
    """One candidate as the pipeline writes it: "queued" or the decision, and
    the milliseconds the gate's call took (its checks, and the queue row when
    it held the candidate)."""
    new = item.new
    gate_ms = 0.0
    with con:
        seen = observed_time(con, new, now)
        d = decide(new.fact, seen, current_facts(con, GUILD, new.subject), item.name)
        if gate is not None:
            t0 = time.perf_counter()
            held = gate.consider(
                con, settings, new, d, kind="fact", author_id=new.subject, now=now,
                message=new.evidence or new.fact, author_name=item.name,
            )  # fmt: skip
            gate_ms = (time.perf_counter() - t0) * 1000
            if held is not None:
                return "queued", gate_ms
        apply_decision(con, new, d, now=now, actor="bench")
        archive_over_budget(con, INGEST, GUILD, new.subject, now)
    return d.kind, gate_ms


def _stats(ms: list[float]) -> dict[str, float]:
    return {
        "p50": percentile(ms, 50),
        "p95": percentile(ms, 95),
        "p99": percentile(ms, 99),
        "mean": sum(ms) / len(ms),
    }


async def run(n: int, per_subject: int, export: Path, tmp: Path) -> dict[str, Any]:
    items, export_facts = await candidates(export, n)
    warm, timed = items[: len(items) // 2], items[len(items) // 2 :]
    now = iso(START.replace(year=START.year + 1))
    base = tmp / "base.sqlite3"
    con = sqlite.connect(base)
    migrate(con)
    _fill(con, items, per_subject, now)
    for item in warm:
        _write(con, None, GuildSettings(), item, now)
    pinned = _pin_residences(con, now)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    cons: dict[str, Any] = {}
    for policy in POLICIES:
        shutil.copy(base, tmp / f"{policy}.sqlite3")
        cons[policy] = sqlite.connect(tmp / f"{policy}.sqlite3")
    gates = {p: ReviewGate() for p in POLICIES}
    settings = {p: GuildSettings(review_policy=p) for p in POLICIES}
    ms: dict[str, list[float]] = {p: [] for p in POLICIES}
    gate_ms: dict[str, list[float]] = {p: [] for p in POLICIES}
    outcomes: dict[str, dict[str, int]] = {p: {} for p in POLICIES}
    for item in timed:
        for p in POLICIES:
            t0 = time.perf_counter()
            kind, in_gate = _write(cons[p], gates[p], settings[p], item, now)
            ms[p].append((time.perf_counter() - t0) * 1000)
            gate_ms[p].append(in_gate)
            outcomes[p][kind] = outcomes[p].get(kind, 0) + 1
    for c in cons.values():
        c.close()
    added = {
        p: [x - o for x, o in zip(ms[p], ms["off"], strict=True)] for p in POLICIES if p != "off"
    }
    return {
        "export_facts": export_facts,
        "candidates_timed": len(timed),
        "candidates_warmup": len(warm),
        "pinned_residences": pinned,
        "write_ms": {p: _stats(ms[p]) for p in POLICIES},
        "gate_call_ms": {p: _stats(gate_ms[p]) for p in POLICIES},
        "added_vs_off_ms": {p: _stats(v) for p, v in added.items()},
        "outcomes": outcomes,
        "queued_by_flag": {p: dict(gates[p].stats.by_flag) for p in POLICIES},
    }


async def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short run (smoke test)")
    ap.add_argument("--candidates", type=int, default=4000)
    ap.add_argument("--facts-per-subject", type=int, default=60)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--export", type=Path, default=EXPORT, help="a DiscordChatExporter JSON file")
    args = ap.parse_args()
    n = min(args.candidates, 800) if args.quick else args.candidates
    load_before = loadavg()
    with tempfile.TemporaryDirectory() as tmp:
        result = await run(n, args.facts_per_subject, args.export, Path(tmp))
    load_after = loadavg()
    print(
        f"\nReview gate in the write path: {result['candidates_timed']} candidates timed after "
        f"{result['candidates_warmup']} warm-up, {result['pinned_residences']} pinned facts"
    )
    rows = [[f"write, review_policy = {p}", *result["write_ms"][p].values()] for p in POLICIES]
    rows += [[f"the gate's call alone, {p}", *result["gate_call_ms"][p].values()] for p in POLICIES]
    rows += [[f"added by {p} (vs off)", *r.values()] for p, r in result["added_vs_off_ms"].items()]
    print_table(["ms per fact", "p50", "p95", "p99", "mean"], rows)
    for p in POLICIES:
        print(f"{p}: {result['outcomes'][p]}  flags: {result['queued_by_flag'][p]}")
    print(f"load average before {load_before}, after {load_after}")
    payload = {**result, "load_average": {"before": load_before, "after": load_after}}
    path = write_json("review", payload, args.json)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
