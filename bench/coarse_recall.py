"""How many relation edges the coarse index keeps, on real sentence vectors.

    .venv/bin/python bench/coarse_recall.py --db /tmp/lme-s-db [--queries 1000]

Linking a new fact to its related facts reads the guild's nearest facts
(cosine ≥ 0.6, at most 5, ``memory.store.relations``); once a guild has
``coarse_min_rows`` facts they come from a coarse index
(``memory.retrieval.coarse_index``), which reads only the rows of the
clusters nearest the new fact. ``bench/big_guild.py`` times it on synthetic
facts, whose vectors are perturbed copies of a few thousand sentences and
cluster far more neatly than chat does. This script measures what the index
loses on real MiniLM vectors: every message vector of a kept engine database
(LongMemEval S, ingested with ``guildlore bench longmemeval --db``: about
48,000 chat turns), pooled into one matrix as if they were one guild's facts.
For ``--queries`` of its rows, the edges an exact scan gives (the nearest 5
other rows at cosine ≥ 0.6) are compared with the coarse index's; reported:
the share of exact edges kept, of queries whose edges are identical, and the
rows a query reads. Writes ``bench/results/coarse-recall.json``.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import loadavg, print_table, write_json
from memory.retrieval import coarse_index
from memory.retrieval.vector_index import GuildMatrix
from memory.store.relations import LINK_MIN, MAX_LINKS, links_of


def load(db: Path) -> np.ndarray:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        blobs = [r[0] for r in con.execute("SELECT embedding FROM message_vectors")]
    finally:
        con.close()
    width = max(len(b) for b in blobs)
    vecs = np.stack([np.frombuffer(b, dtype=np.float32) for b in blobs if len(b) == width])
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs.astype(np.float32)


def run(vecs: np.ndarray, queries: int, seed: int) -> dict[str, Any]:
    m = GuildMatrix("facts", "model", "pooled", vecs.shape[1])
    m.fill(np.arange(1, len(vecs) + 1, dtype=np.int64), vecs)
    began = time.perf_counter()
    coarse = coarse_index.build(m, min_rows=1)
    build_s = time.perf_counter() - began
    assert coarse is not None
    rng = np.random.default_rng(seed)
    kept = total = same = 0
    read: list[int] = []
    exact_ms: list[float] = []
    coarse_ms: list[float] = []
    for row in rng.choice(len(vecs), size=min(queries, len(vecs)), replace=False):
        q = vecs[row]
        t0 = time.perf_counter()
        exact = links_of(int(row) + 1, m.top_k(q, MAX_LINKS + 1))
        t1 = time.perf_counter()
        found = links_of(int(row) + 1, coarse.top_k(m, q, MAX_LINKS + 1))
        t2 = time.perf_counter()
        exact_ms.append((t1 - t0) * 1000)
        coarse_ms.append((t2 - t1) * 1000)
        want = {o for o, _ in exact}
        got = {o for o, _ in found}
        total += len(want)
        kept += len(want & got)
        same += want == got
        read.append(len(coarse.candidates(m, q)))
    n = len(read)
    return {
        "rows": len(vecs),
        "lists": len(coarse.offsets) - 1,
        "probes": coarse.probes,
        "build_s": round(build_s, 2),
        "queries": n,
        "exact_edges": total,
        "edges_kept": round(kept / max(1, total), 4),
        "identical": round(same / max(1, n), 4),
        "rows_read_median": int(statistics.median(read)),
        "rows_read_share": round(statistics.median(read) / len(vecs), 4),
        "exact_ms_p50": round(statistics.median(exact_ms), 3),
        "coarse_ms_p50": round(statistics.median(coarse_ms), 3),
        "link_min": LINK_MIN,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, required=True, help="a kept engine data dir or its database")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    db = args.db / "guildlore.sqlite3" if args.db.is_dir() else args.db
    if not db.is_file():
        print(f"no database at {db}", file=sys.stderr)
        return 2
    result = run(load(db), args.queries, args.seed)
    print_table(list(result), [list(result.values())])
    path = write_json(
        "coarse-recall",
        {"result": result, "db": str(db), "machine": {"loadavg": loadavg()}},
        args.out,
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
