"""A guild with 10k and 100k facts: what linking a new fact to its related
facts, budgets, consolidation and the snapshot cost there.

    .venv/bin/python bench/big_guild.py                 # 10,000 and 100,000 facts
    .venv/bin/python bench/big_guild.py --sizes 10000   # one size
    .venv/bin/python bench/big_guild.py --quick         # 2,000 and 10,000, fewer samples

One guild grows to each size: facts of ``bench/search.py``'s synthetic guild
(2,000 members, fact sentences over a pool of predicates, real MiniLM
vectors pooled and perturbed), written straight through the store with their
vectors, as an import leaves them (their own relations are not written: at
100k that alone would take the old code over an hour). At each size:

- **linking, live**: ``--live`` new facts, one at a time, each written with
  its vector and then linked to its related facts (what the embedding worker
  does after a fact's vector is written: ``memory.store.relations.relate_written``
  with the engine's in-memory neighbours, or sqlite-vec in code before them);
  reported per fact and per edge written (p50 / p95 / mean);
- **linking, import**: ``--batch`` new facts written together and linked in
  one call, as an import's embedding batches are: per fact;
- **budgets**: the guild's total budget set to its current size, then
  ``--writes`` facts each written with the budget check the ingest pipeline
  runs in the same transaction (offline: each write archives the guild's
  lowest-value fact): the transaction's p50 / p95;
- **consolidation**: one offline run over the guild (``--recent`` of its facts
  changed in the last 72 hours, so the candidate pool is full);
- **snapshot**: MEMORY.md rendered and written (``Memory.refresh_snapshot``).

Linking runs with the guild's vector matrix loaded (a search happened, or an
earlier link started its load) and, once the guild is big, its coarse index
built, as in a running bot; ``link_cold_ms`` is the first link, before, and
``matrix_load_s`` / ``coarse_build_s`` what loading and building took once.
Writes ``bench/results/big-guild.json`` (``--out``) and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import loadavg, percentile, print_table, write_json
from bench._search_corpus import TARGET_GUILD, Corpus, write_facts, write_in_chunks, write_members

GUILD = TARGET_GUILD


async def link(mem: Any, model: str, rows: list[tuple[int, str, str, bytes]], now: str) -> int:
    """Link facts whose vectors were just written, as the engine does; the
    number of edges written."""
    from memory.store.relations import relate_written

    nearest = getattr(mem.embeddings, "nearest_facts", None)
    if nearest is None:  # code that predates the in-memory neighbours: sqlite-vec
        return int(await relate_written(mem.db, model, rows, now))
    return int(await relate_written(mem.db, model, rows, now, nearest))


async def _coarse_built(mem: Any, model: str, vec: Any) -> float | None:
    """Start the coarse index of a big guild's matrix (one neighbour search
    does) and wait for it: the seconds it took, None when this code has none
    (a small guild, or code from before the in-memory neighbours)."""
    vectors = getattr(getattr(mem.retriever, "ctx", None), "vectors", None)
    if vectors is None or not hasattr(vectors, "coarse"):
        return None
    import numpy as np

    began = time.perf_counter()
    await vectors.nearest_facts(model, GUILD, np.asarray(vec, dtype=np.float32)[None, :], 1)
    await vectors.settle()
    return time.perf_counter() - began if vectors.coarse(model, GUILD) is not None else None


def _fact_rows(con: Any, model: str, facts: list[dict[str, Any]], now: str) -> list[Any]:
    """Write ``facts`` with their vectors (one transaction); the rows as the
    embedding worker hands them to linking."""
    from memory.embed.base import vector_to_blob
    from memory.store import facts as store
    from memory.store import vectors as store_vectors

    rows = []
    for f in facts:
        up = store.upsert_fact(
            con,
            guild_id=f["guild"],
            channel_id=f["channel"],
            subject=f["subject"],
            fact=f["fact"],
            fact_type=f["type"],
            evidence=f["evidence"],
            source_message_id=None,
            confidence=f["confidence"],
            now=now,
            actor="bench",
        )
        rows.append((up.fact.id, f["guild"], f"bench{up.fact.id}", vector_to_blob(f["vec"])))
    store_vectors.put_fact_vectors(con, model, len(facts[0]["vec"]), rows, now)
    return rows


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
        "mean": round(statistics.fmean(values), 3) if values else 0.0,
    }


async def measure_linking(
    mem: Any, model: str, fresh: list[dict[str, Any]], live: int, batch: int, now: str
) -> dict[str, Any]:
    per_fact: list[float] = []
    edges: list[int] = []
    cold_ms = None
    warm_s = coarse_s = None
    for i, f in enumerate(fresh[:live]):
        rows = await mem.db.write(_fact_rows, model, [f], now)
        began = time.perf_counter()
        edges.append(await link(mem, model, rows, now))
        took = (time.perf_counter() - began) * 1000
        if i == 0:
            cold_ms = took
            # The matrix loads beside the first link (a live bot's first search
            # does the same), and a big guild's coarse index is built behind
            # it; the rest are measured with both ready, as a running bot has
            # them. What that costs once is reported beside.
            began = time.perf_counter()
            await mem.retriever.warm(GUILD)
            warm_s = time.perf_counter() - began
            coarse_s = await _coarse_built(mem, model, f["vec"])
            continue
        per_fact.append(took)
    per_edge = [t / e for t, e in zip(per_fact, edges[1:], strict=True) if e]
    rows = await mem.db.write(_fact_rows, model, fresh[live : live + batch], now)
    began = time.perf_counter()
    batch_edges = await link(mem, model, rows, now)
    batch_ms = (time.perf_counter() - began) * 1000
    return {
        "link_cold_ms": round(cold_ms or 0.0, 2),
        "matrix_load_s": None if warm_s is None else round(warm_s, 3),
        "coarse_build_s": None if coarse_s is None else round(coarse_s, 3),
        "link_ms_per_fact": _stats(per_fact),
        "link_ms_per_edge": _stats(per_edge),
        "edges_per_fact": round(statistics.fmean(edges), 2),
        "batch": len(rows),
        "batch_ms_per_fact": round(batch_ms / max(1, len(rows)), 3),
        "batch_edges": batch_edges,
    }


async def measure_budgets(mem: Any, fresh: list[dict[str, Any]], now: str) -> dict[str, Any]:
    from memory.store import facts as store

    active = await mem.db.read(
        lambda con: int(
            con.execute(
                "SELECT count(*) FROM memory_facts WHERE guild_id = ? AND is_active = 1", (GUILD,)
            ).fetchone()[0]
        )
    )
    await mem.guilds.set_setting(GUILD, "budget_guild_total", str(active))
    budgets = mem.pipeline.budgets

    def one(con: Any, f: dict[str, Any]) -> None:
        store.upsert_fact(
            con,
            guild_id=f["guild"],
            channel_id=f["channel"],
            subject=f["subject"],
            fact=f["fact"],
            fact_type=f["type"],
            evidence=f["evidence"],
            source_message_id=None,
            confidence=f["confidence"],
            now=now,
            actor="bench",
        )
        budgets.after_write(con, f["guild"], f["subject"], now, channel_id=f["channel"])

    took: list[float] = []
    archived0 = budgets.stats.archived
    for f in fresh:
        began = time.perf_counter()
        await mem.db.write(one, f)
        took.append((time.perf_counter() - began) * 1000)
    return {
        "budget": active,
        "write_ms": _stats(took),
        "writes": len(fresh),
        "archived": budgets.stats.archived - archived0,
    }


async def measure_consolidation(mem: Any, recent: int, now: datetime) -> dict[str, Any]:
    at = (now - timedelta(hours=1)).isoformat().replace("+00:00", "Z")

    def touch(con: Any) -> None:
        # The newest ``recent`` facts changed an hour ago: the run's candidates.
        con.execute(
            "UPDATE memory_facts SET updated_at = ? WHERE id IN (SELECT id FROM memory_facts "
            "WHERE guild_id = ? AND is_active = 1 ORDER BY id DESC LIMIT ?)",
            (at, GUILD, recent),
        )

    await mem.db.write(touch)
    began = time.perf_counter()
    done = await mem.consolidation.run(GUILD)
    took = time.perf_counter() - began
    rep = done.report
    return {
        "run_s": round(took, 3),
        "candidates": rep["candidates"],
        "pairs": rep["pairs"],
        "checked": rep["checked"],
        "changes": len(rep.get("applied", [])),
    }


async def measure_snapshot(mem: Any, rounds: int) -> dict[str, Any]:
    took = []
    size = 0
    for _ in range(rounds):
        began = time.perf_counter()
        text = await mem.refresh_snapshot()
        took.append(time.perf_counter() - began)
        size = len(text.encode())
    return {"seconds": round(min(took), 3), "bytes": size}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from memory.clock import iso
    from memory.config import EmbeddingConfig, MemoryConfig
    from memory.embed.local import LocalMiniLMEmbedder
    from memory.engine import Memory
    from memory.extract.rules.extractor import RuleExtractor

    sizes = sorted(args.sizes)
    extra_per_size = args.live + args.batch + args.writes
    corpus = Corpus(args.pool, args.noise)
    emb = LocalMiniLMEmbedder(threads=2, batch_size=64)
    emb.load()
    corpus.embed_pool(emb)
    total = sizes[-1] + extra_per_size * len(sizes)
    facts = corpus.facts(0, total, seed=100)
    random.Random(3).shuffle(facts)
    data = Path(tempfile.mkdtemp(prefix="guildlore-bench-big-", dir=args.tmp))
    cfg = replace(MemoryConfig.for_data_dir(data), embedding=EmbeddingConfig(provider="local"))
    now_dt = datetime.now(UTC)
    now = iso(now_dt)
    out: dict[str, Any] = {"sizes": {}}
    written = 0
    mem = await Memory.open(cfg, extractor=RuleExtractor(), embedder=emb, ingest=False)
    try:
        model = mem.embeddings.model_for_guild(GUILD)
        assert model is not None, "the bench embeds with the local model"
        await mem.db.write(write_members, corpus, now)
        for size in sizes:
            began = time.perf_counter()
            base = facts[written:size]
            await write_in_chunks(mem, write_facts, model, base, now)
            written = size
            build_s = time.perf_counter() - began
            fresh = facts[sizes[-1] :][: extra_per_size * len(sizes)]
            k = sizes.index(size)
            fresh = fresh[k * extra_per_size : (k + 1) * extra_per_size]
            print(f"{size} facts written in {build_s:.1f} s; measuring", flush=True)
            linking = await measure_linking(mem, model, fresh, args.live, args.batch, now)
            print(f"  linking {linking}", flush=True)
            budgets = await measure_budgets(mem, fresh[args.live + args.batch :], now)
            print(f"  budgets {budgets}", flush=True)
            consolidation = await measure_consolidation(mem, args.recent, now_dt)
            print(f"  consolidation {consolidation}", flush=True)
            snapshot = await measure_snapshot(mem, args.snapshot_rounds)
            print(f"  snapshot {snapshot}", flush=True)
            out["sizes"][str(size)] = {
                "linking": linking,
                "budgets": budgets,
                "consolidation": consolidation,
                "snapshot": snapshot,
                "build_s": round(build_s, 1),
            }
            # The budget stage set the guild's budget; the next size grows past it.
            await mem.guilds.set_setting(GUILD, "budget_guild_total", str(10 * sizes[-1]))
    finally:
        await mem.close()
        if not args.keep:
            import shutil

            shutil.rmtree(data, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--live", type=int, default=61, help="facts linked one at a time")
    ap.add_argument("--batch", type=int, default=256, help="facts linked in one call")
    ap.add_argument("--writes", type=int, default=100, help="writes with the budget check")
    ap.add_argument("--recent", type=int, default=2000, help="facts changed in the last 72 h")
    ap.add_argument("--snapshot-rounds", type=int, default=2)
    ap.add_argument("--pool", type=int, default=4000)
    ap.add_argument("--noise", type=float, default=0.02)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--label", default=None, help="a name for this run in the JSON")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.live, args.batch, args.writes = [2000, 10_000], 21, 64, 30
    result = asyncio.run(run(args))
    rows = []
    for size, r in result["sizes"].items():
        lk, bu = r["linking"], r["budgets"]
        rows.append(
            [
                size,
                lk["link_ms_per_fact"]["p50"],
                lk["link_ms_per_fact"]["p95"],
                lk["link_ms_per_edge"]["p50"],
                lk["edges_per_fact"],
                lk["batch_ms_per_fact"],
                bu["write_ms"]["p50"],
                bu["write_ms"]["p95"],
                r["consolidation"]["run_s"],
                r["snapshot"]["seconds"],
            ]
        )
    print_table(
        [
            "facts",
            "link ms/fact p50",
            "p95",
            "ms/edge p50",
            "edges/fact",
            "import link ms/fact",
            "budget write p50",
            "p95",
            "consolidation s",
            "snapshot s",
        ],
        rows,
    )
    payload = {**result, "label": args.label, "machine": {"loadavg": loadavg()}}
    path = write_json("big-guild", payload, args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
