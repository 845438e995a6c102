"""Write-decision benchmark: the offline decision's added cost per fact.

    .venv/bin/python bench/decision.py            # full run
    .venv/bin/python bench/decision.py --quick    # short smoke run

Candidates come from the real export's messages (``--export``, default the
one in tests/data), each author a subject, observed at increasing times: the
rule extractor's guarded facts, else the "<author> said …" fact an LLM
extractor (the fake server) makes of the message; one candidate in eight
repeats an earlier one (a re-observation) and one in four is a slot phrase
("X lives in …", "X works at …") of one of the same authors. Each subject
first holds ``--facts-per-subject`` current facts (default 60, a member near
the 80-fact cap: the decision compares a candidate with every current fact of
its subject), then a warm-up half of the candidates goes through the decision
path (SQLite file, migrated, WAL); then each candidate of the timed half is
written twice, into two copies of that database:

- ``with decision``: read the subject's current facts, decide (rules),
  apply the decision (add / noop / update / supersede with history);
- ``plain upsert``: the store's upsert of the same text (what writing a
  candidate costs without any decision).

The added cost per fact is the difference of the two, per candidate; the
decision alone (read current facts + rules, no write) is timed too. Each
write runs in its own transaction and ends with the archive beyond the cap,
as the pipeline's per-message writes do.

Target: added cost p50 ≤ 2 ms. Writes bench/results/decision.json and
prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import EXPORT, export_texts, loadavg, percentile, print_table, write_json
from memory.clock import iso
from memory.config import IngestConfig
from memory.db.sqlite import driver as sqlite
from memory.db.sqlite.migrations import migrate
from memory.decision import decide
from memory.extract.guards import filter_candidates
from memory.extract.rules.extractor import RuleExtractor
from memory.ingest.budgets import archive_over_budget
from memory.store.fact_decision import NewFact, apply_decision, current_facts, observed_time
from memory.store.facts import upsert_fact

GUILD = "900000000000000001"
INGEST = IngestConfig()  # the pipeline's budgets
START = datetime(2024, 1, 1, tzinfo=UTC)
CITIES = ("Lisbon", "Porto", "Oslo", "Tokyo", "Berlin", "Lyon", "Austin", "Denver")
EMPLOYERS = ("Google", "a bakery", "the hospital", "Acme", "the university")


@dataclass(frozen=True)
class Item:
    new: NewFact
    name: str


def _said(author: str, text: str) -> str | None:
    """What an LLM extractor might make of a message the rules find nothing
    in: "<author> said <its first words>." (the fake server's echo)."""
    words = text.split()[:8]
    return f"{author} said {' '.join(words).rstrip('.!?,;:')}." if len(words) >= 3 else None


async def candidates(export: Path, limit: int) -> tuple[list[Item], int]:
    """``limit`` candidates from the export's messages in message order: the
    rule extractor's guarded facts, else the message's "<author> said …"
    fact; one candidate in eight repeats an earlier one (a re-observation)
    and one in four is a slot phrase ("X lives in …", "X works at …") of one
    of the same authors, so that noops and supersedes happen."""
    rules = RuleExtractor()
    rng = random.Random(7)
    real: list[tuple[str, str, str, str | None]] = []
    for author, text in export_texts(export):
        accepted = filter_candidates(await rules.extract(text, author, 4), text, author=author)
        found = [(author, c.fact, c.type, c.evidence) for c in accepted.accepted]
        said = _said(author, text)
        if not found and said is not None:
            found = [(author, said, "other", None)]
        real.extend(found)
        if len(real) >= limit:
            break
    if not real:
        raise SystemExit(f"{export}: no candidates")
    authors = sorted({a for a, *_ in real})
    out: list[Item] = []
    fresh = iter(real * (limit // len(real) + 1))
    for k in range(limit):
        at = iso(START + timedelta(minutes=k))
        if k % 4 == 3:
            author = rng.choice(authors)
            place = rng.choice(
                (f"lives in {rng.choice(CITIES)}", f"works at {rng.choice(EMPLOYERS)}")
            )
            fact, ftype, evidence = f"{author} {place}.", "profile", None
        elif k % 8 == 1 and out:
            again = rng.choice(out).new
            author = next(i.name for i in out if i.new.subject == again.subject)
            fact, ftype, evidence = again.fact, again.fact_type, again.evidence
        else:
            author, fact, ftype, evidence = next(fresh)
        subject = str(920000000000000000 + zlib.crc32(author.encode()))
        new = NewFact(GUILD, "c1", subject, fact, ftype, evidence, None, 0.6, at)
        out.append(Item(new, author))
    return out, len({f for _, f, *_ in real})


VERBS = ("collects", "repairs", "paints", "studies", "photographs", "restores", "sketches")
THINGS = ("old maps", "clocks", "bicycles", "fossils", "stamps", "radios", "papyri", "coins")


def _fill(con: Any, items: list[Item], per_subject: int, now: str) -> None:
    """``per_subject`` distinct current facts for each subject of ``items``."""
    names = {i.new.subject: i.name for i in items}
    with con:
        for subject, name in names.items():
            for k in range(per_subject):
                verb, thing = VERBS[k % len(VERBS)], THINGS[(k // len(VERBS)) % len(THINGS)]
                upsert_fact(
                    con,
                    guild_id=GUILD,
                    channel_id="c1",
                    subject=subject,
                    fact=f"{name} {verb} {thing} from region {k}.",
                    fact_type="other",
                    evidence=None,
                    source_message_id=None,
                    confidence=0.6,
                    now=now,
                    actor="bench",
                    observed_at=iso(START - timedelta(days=1, minutes=k)),
                )


def _with_decision(con: Any, item: Item, now: str) -> str:
    with con:
        current = current_facts(con, GUILD, item.new.subject)
        seen = observed_time(con, item.new, now)
        d = decide(item.new.fact, seen, current, item.name)
        apply_decision(con, item.new, d, now=now, actor="bench")
        archive_over_budget(con, INGEST, GUILD, item.new.subject, now)
    return d.kind


def _plain(con: Any, item: Item, now: str) -> None:
    n = item.new
    with con:
        upsert_fact(
            con,
            guild_id=n.guild_id,
            channel_id=n.channel_id,
            subject=n.subject,
            fact=n.fact,
            fact_type=n.fact_type,
            evidence=n.evidence,
            source_message_id=None,
            confidence=n.confidence,
            now=now,
            actor="bench",
            observed_at=n.observed_at,
        )
        archive_over_budget(con, INGEST, GUILD, n.subject, now)


def _decide_only(con: Any, item: Item, now: str) -> None:
    current = current_facts(con, GUILD, item.new.subject)
    decide(item.new.fact, observed_time(con, item.new, now), current, item.name)


def _timed(fn: Any, *args: Any) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t0) * 1000


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
    now = iso(START + timedelta(days=400))
    base = tmp / "base.sqlite3"
    con = sqlite.connect(base)
    migrate(con)
    _fill(con, items, per_subject, now)
    for item in warm:
        _with_decision(con, item, now)
    per_subject = con.execute(
        "SELECT count(*) FROM memory_facts WHERE is_active = 1 AND valid_to IS NULL GROUP BY subject"
    ).fetchall()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    shutil.copy(base, tmp / "plain.sqlite3")
    with_con = sqlite.connect(base)
    plain_con = sqlite.connect(tmp / "plain.sqlite3")
    decide_ms: list[float] = []
    with_ms: list[float] = []
    plain_ms: list[float] = []
    kinds: dict[str, int] = {}
    for item in timed:
        decide_ms.append(_timed(_decide_only, with_con, item, now))
        t0 = time.perf_counter()
        kind = _with_decision(with_con, item, now)
        with_ms.append((time.perf_counter() - t0) * 1000)
        kinds[kind] = kinds.get(kind, 0) + 1
        plain_ms.append(_timed(_plain, plain_con, item, now))
    with_con.close()
    plain_con.close()
    added = [w - p for w, p in zip(with_ms, plain_ms, strict=True)]
    counts = sorted(int(r[0]) for r in per_subject)
    return {
        "export_facts": export_facts,
        "candidates_timed": len(timed),
        "candidates_warmup": len(warm),
        "subjects": len(counts),
        "current_facts_per_subject": {
            "p50": percentile([float(c) for c in counts], 50),
            "max": max(counts) if counts else 0,
        },
        "decisions": kinds,
        "decision_only_ms": _stats(decide_ms),
        "write_with_decision_ms": _stats(with_ms),
        "plain_upsert_ms": _stats(plain_ms),
        "added_ms": _stats(added),
        "target_added_p50_ms": 2.0,
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
        f"\nOffline write decision: {result['candidates_timed']} candidates timed after "
        f"{result['candidates_warmup']} warm-up ({result['export_facts']} distinct facts "
        f"from the export), {result['subjects']} subjects "
        f"(current facts per subject p50 {result['current_facts_per_subject']['p50']:.0f}, "
        f"max {result['current_facts_per_subject']['max']})"
    )
    print_table(
        ["ms per fact", "p50", "p95", "p99", "mean"],
        [
            [label, r["p50"], r["p95"], r["p99"], r["mean"]]
            for label, r in (
                ("decision only (read + rules)", result["decision_only_ms"]),
                ("write with decision", result["write_with_decision_ms"]),
                ("plain upsert", result["plain_upsert_ms"]),
                ("added by the decision", result["added_ms"]),
            )
        ],
    )
    print(f"decisions: {result['decisions']}")
    print(f"load average before {load_before}, after {load_after}")
    payload = {**result, "load_average": {"before": load_before, "after": load_after}}
    path = write_json("decision", payload, args.json)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
