"""Search and prompt-slice latency at 1k, 10k and 100k facts in one guild.

    .venv/bin/python bench/search.py [--sizes 1000,10000,100000] [--other-guild-facts 10000]
                                     [--queries 200] [--rounds 2] [--pool 4000]
                                     [--message-sizes 10000,100000] [--data LONGMEMEVAL]
                                     [--backends sqlite,postgresql]

One on-disk database holds 10 guilds: the measured guild grows through the
sizes (1k → 10k → 100k active facts), the 9 others hold ``--other-guild-facts``
each, so every FTS match and every vec0 partition sits beside other guilds'
rows. The measured guild also holds ``--messages`` chat messages with vectors
(a constant: the prompt slice searches messages too).

Facts are written straight through the store (``store.upsert_fact`` and
``store_vectors.put_fact_vectors``, as the extraction pipeline does), not
extracted. Their vectors are real MiniLM embeddings: ``--pool`` distinct fact
sentences are embedded with the offline model, and every fact reuses the
vector of its predicate's pooled sentence, perturbed (σ=``--noise``) and
re-normalised — the name in the fact differs from the pooled one, the meaning
does not.

Timed per size, over ``--queries`` generated member questions × ``--rounds``:

- ``search``: ``Memory.search`` (strict, scope "facts", limit 10, channel and
  visible channels set, as ``/memory search`` calls it) — query reading,
  vector KNN, FTS5 BM25, the join, scoring and the gate;
- ``slice``: ``Memory.build_prompt_slice`` (user facts, relevant facts and
  messages, as a reply calls it);
- ``numpy``: brute-force cosine top-k over the same guild's vectors, matrix
  already in RAM (``X @ q``, argpartition, sort);
- ``vec0``: bare sqlite-vec KNN on the guild's partition
  (``... WHERE embedding MATCH ? AND k = ? AND guild_id = ?``);
- ``fts``: the bare FTS5 query (``store.search_facts_fts``), what answers
  while a big guild's fact lexicon is built;
- ``lexicon``: the guild's in-memory BM25 alone (``FactLexicon.best``, as
  many candidates as search asks for), what fact search ranks by.

The three baselines run on their own connection, in a pass of their own
after each round of searches and slices (not interleaved query by query:
OpenBLAS helper threads spin on after a product and would slow the next
search), so every column sees about the same machine load. On a shared machine
that load moves a lot: the 1-min load average at the start of each
size is printed, and the JSON also has the process CPU time per search.

Query embedding is excluded: every query is run once untimed first, which
puts its vector in the engine's query-vector cache (``EmbeddingService``), and
the timed runs check that the cache answered (``embed_ms`` ≈ 0). The KNN depth
is the retriever's own (knn_candidates + fact_overfetch).

Then message search (``bench._search_messages``): the second guild grows to
each of ``--message-sizes`` messages of realistic length (the export's
messages, and LongMemEval's haystack turns with ``--data``), and
``Memory.search`` with ``scope="messages"`` and ``scope="all"`` is timed.

Targets at 100k: facts search p50 ≤ 3× numpy p50, search p95 ≤ 50 ms;
``scope="all"`` p95 ≤ 50 ms at 100k messages.
Writes bench/results/search.json.

``--backends sqlite,postgresql`` runs all of the above once per backend, one
after the other: the same corpus, written the same way, into a SQLite file
and into a new database of a PostgreSQL started for the run (the pgserver
wheel, ``bench/_pg.py``). On PostgreSQL the baselines (numpy, vec0, bare FTS)
are not timed — they read the SQLite file. Prints the backends side by side
and writes bench/results/search-backends.json (``bench._search_backends``).
Target: PostgreSQL's search p95 ≤ 2× SQLite's at the largest size.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make the project importable
    sys.path.insert(0, str(ROOT))

from bench._common import loadavg, percentile, print_table, write_json  # noqa: E402
from bench._pg import PgServer, database_url, parse_backends, postgres_if  # noqa: E402
from bench._search_backends import compare_backends  # noqa: E402
from bench._search_corpus import (  # noqa: E402
    CHANNELS_PER_GUILD,
    GUILDS,
    LORE_PER_GUILD,
    MEMBERS_PER_GUILD,
    TARGET_GUILD,
    Corpus,
    channel_id,
    questions,
    user_id,
    write_facts,
    write_in_chunks,
    write_members,
    write_messages,
)
from bench._search_messages import run_messages  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "search.json"
BACKENDS_RESULTS = ROOT / "bench" / "results" / "search-backends.json"
TARGET_AT = 100_000
TARGET_RATIO = 3.0
TARGET_P95_MS = 50.0

# -- measuring ----------------------------------------------------------------------------------


def _stats(ms: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(ms, 50), 3),
        "p95_ms": round(percentile(ms, 95), 3),
        "mean_ms": round(sum(ms) / len(ms), 3),
        "max_ms": round(max(ms), 3),
        "n": len(ms),
    }


async def _quiet(mem: Any) -> None:
    """Let start-up work (snapshot render, replay) finish before timing."""
    await asyncio.sleep(0.2)
    for _ in range(600):
        snap = mem.snapshot
        if not snap.pending and not snap.running and mem.embeddings.backlog == 0:
            return
        await asyncio.sleep(0.1)


class Baselines:
    """numpy brute force, bare vec0 KNN and the bare FTS query over the measured
    guild, on their own connection; timed right after each search of the same
    query, so all columns see the same machine load."""

    def __init__(self, db_path: Path, model: str, k: int, lexicon: Any, fts_k: int) -> None:
        from memory.db.sqlite import driver as sqlite
        from memory.store import vectors as store_vectors

        self.k = k
        self.lexicon = lexicon  # the guild's FactLexicon (None: not built)
        self.fts_k = fts_k
        self.con = sqlite.connect(db_path)
        dims = store_vectors.model_dims(self.con, model)
        assert dims is not None
        # store_vectors.knn's query for facts, with its per-call model lookup done
        # once here: the column is the bare vec0 KNN.
        self.sql = (
            f"SELECT fact_id, distance FROM vec_facts_{store_vectors.model_number(self.con, model)} "
            "WHERE embedding MATCH ? AND k = ? AND guild_id = ?"
        )
        load0 = time.perf_counter()
        self.ids, mat = store_vectors.load_vectors(self.con, "facts", model, TARGET_GUILD, dims)
        self.load_ms = (time.perf_counter() - load0) * 1000
        self.x = np.array(mat, dtype=np.float32)  # own, writable, C-contiguous
        self.x /= np.linalg.norm(self.x, axis=1, keepdims=True)
        self.numpy_ms: list[float] = []
        self.einsum_ms: list[float] = []
        self.vec0_ms: list[float] = []
        self.fts_ms: list[float] = []
        self.lexicon_ms: list[float] = []
        self.overlap: list[float] = []

    def run(self, q: np.ndarray, match: str | None) -> None:
        from memory.embed.base import vector_to_blob
        from memory.store import facts as store

        k = self.k
        t0 = time.perf_counter()
        sims = self.x @ q
        part = np.argpartition(-sims, k - 1)[:k] if k < len(sims) else np.arange(len(sims))
        top = self.ids[part[np.argsort(-sims[part])]]
        self.numpy_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        np.einsum("ij,j->i", self.x, q)  # the product alone, one core (what the engine uses)
        self.einsum_ms.append((time.perf_counter() - t0) * 1000)
        blob = vector_to_blob(q)
        t0 = time.perf_counter()
        rows = self.con.execute(self.sql, (blob, k, TARGET_GUILD)).fetchall()
        self.vec0_ms.append((time.perf_counter() - t0) * 1000)
        got = {int(r[0]) for r in rows}
        self.overlap.append(len(got & set(top.tolist())) / max(1, len(got)))
        if match:
            t0 = time.perf_counter()
            store.search_facts_fts(self.con, TARGET_GUILD, match, 64)
            self.fts_ms.append((time.perf_counter() - t0) * 1000)
            if self.lexicon is not None:
                t0 = time.perf_counter()
                self.lexicon.best(match, self.fts_k)
                self.lexicon_ms.append((time.perf_counter() - t0) * 1000)

    def result(self) -> dict[str, Any]:
        return {
            "rows": int(len(self.ids)),
            "matrix_load_ms": round(self.load_ms, 1),
            "numpy": _stats(self.numpy_ms),
            "numpy_einsum_product_only": _stats(self.einsum_ms),
            "vec0": _stats(self.vec0_ms),
            "fts": _stats(self.fts_ms) if self.fts_ms else None,
            "lexicon": _stats(self.lexicon_ms) if self.lexicon_ms else None,
            "vec0_numpy_topk_overlap": round(float(np.mean(self.overlap)), 4),
        }

    def close(self) -> None:
        self.con.close()


async def _measure(
    mem: Any, qs: list[str], asker: list[tuple[str, str]], rounds: int, k: int, baselines: bool
) -> dict[str, Any]:
    retriever = mem.retriever
    visible = {channel_id(0, c) for c in range(CHANNELS_PER_GUILD)}
    cold0 = time.perf_counter()
    await mem.search(TARGET_GUILD, qs[0], channel_id=asker[0][0], visible_channels=visible)
    cold_ms = (time.perf_counter() - cold0) * 1000  # query embedded, vec0 path, load started
    w0 = time.perf_counter()
    await retriever.warm(TARGET_GUILD)
    warm_ms = (time.perf_counter() - w0) * 1000
    # Untimed pass: embeds every query (cached by the engine) and warms caches.
    for q, (ch, user) in zip(qs, asker, strict=True):
        await mem.search(TARGET_GUILD, q, channel_id=ch, visible_channels=visible)
        await mem.build_prompt_slice(TARGET_GUILD, ch, user, q, visible_channels=visible)
    # The very vectors search used: the engine's cached query vectors.
    model = mem.embeddings.model_for_guild(TARGET_GUILD)
    plans = [await retriever.plan(TARGET_GUILD, q) for q in qs]
    qvecs = []
    for p in plans:
        found = await mem.embeddings.embed_query(TARGET_GUILD, p.content)  # cached: no model run
        assert found is not None and found[0] == model
        qvecs.append(found[1])
    # The baselines read the SQLite file: on PostgreSQL only the engine's own
    # search and slice are timed.
    base = None
    if baselines:
        lexicon = retriever.ctx.fact_lexicons.index.get(TARGET_GUILD)
        base = Baselines(mem.config.db_path, model, k, lexicon, mem.config.retrieval.fts_candidates)
    search_ms: list[float] = []
    search_cpu: list[float] = []  # CPU of every thread of this process: load-independent
    slice_ms: list[float] = []
    load_before = loadavg()
    facts_part: list[float] = []
    embed_part: list[float] = []
    hits = 0
    try:
        for _ in range(rounds):
            for q, (ch, user) in zip(qs, asker, strict=True):
                c0, t0 = time.process_time(), time.perf_counter()
                found = await mem.search(TARGET_GUILD, q, channel_id=ch, visible_channels=visible)
                search_ms.append((time.perf_counter() - t0) * 1000)
                search_cpu.append((time.process_time() - c0) * 1000)
                facts_part.append(retriever.last_timings.get("facts_ms", 0.0))
                embed_part.append(retriever.last_timings.get("embed_ms", 0.0))
                hits += len(found)
                t0 = time.perf_counter()
                await mem.build_prompt_slice(TARGET_GUILD, ch, user, q, visible_channels=visible)
                slice_ms.append((time.perf_counter() - t0) * 1000)
                embed_part.append(retriever.last_timings.get("embed_ms", 0.0))
            # The baselines get their own pass: OpenBLAS helper threads keep
            # spinning for a while after a product, and would eat the core the
            # next search needs.
            if base is not None:
                for p, qv in zip(plans, qvecs, strict=True):
                    base.run(qv, p.fact_match)
            await asyncio.sleep(0.5)
    finally:
        if base is not None:
            base.close()
    return {
        "search": _stats(search_ms),
        "slice": _stats(slice_ms),
        "search_process_cpu": _stats(search_cpu),
        "search_facts_stage": _stats(facts_part),
        "loadavg_during": [load_before, loadavg()],
        "query_embed_ms_max": round(max(embed_part), 3),
        "mean_hits_per_search": round(hits / len(search_ms), 2),
        "first_search_cold_ms": round(cold_ms, 1),
        "matrix_warm_ms": round(warm_ms, 1),
        "vector_cache": retriever.index.stats(),
        **(base.result() if base is not None else {}),
    }


async def run(
    args: argparse.Namespace, backend: str = "sqlite", server: PgServer | None = None
) -> dict[str, Any]:
    from memory.clock import iso, system_clock
    from memory.config import EmbeddingConfig, MemoryConfig
    from memory.embed.local import LOCAL_MODEL_ID, LocalMiniLMEmbedder
    from memory.engine import Memory
    from memory.extract.rules.extractor import RuleExtractor
    from memory.retrieval.context import RetrievalTuning

    sizes = sorted(args.sizes)
    corpus = Corpus(args.pool, args.noise)
    emb = LocalMiniLMEmbedder(threads=2, batch_size=64)
    emb.load()
    corpus.embed_pool(emb)
    print(
        f"embedded {len(corpus.preds)} pooled fact sentences in {corpus.embed_seconds:.1f}s",
        flush=True,
    )
    qrng = random.Random(5)
    qs = questions(qrng, args.queries, corpus.names[0])
    asker = [
        (
            channel_id(0, qrng.randrange(CHANNELS_PER_GUILD)),
            user_id(0, qrng.randrange(MEMBERS_PER_GUILD)),
        )
        for _ in qs
    ]
    target_facts = corpus.facts(0, sizes[-1], seed=100)

    data = Path(tempfile.mkdtemp(prefix="guildlore-bench-search-", dir=args.tmp))
    cfg = MemoryConfig.for_data_dir(data)
    cfg = replace(
        cfg,
        embedding=EmbeddingConfig(provider="local"),
        database_url=database_url(backend, server),
    )
    k = cfg.retrieval.knn_candidates + RetrievalTuning().fact_overfetch
    out: dict[str, Any] = {"backend": backend, "sizes": {}, "knn_k": k}
    try:
        mem = await Memory.open(cfg, extractor=RuleExtractor(), embedder=emb)
        model = mem.embeddings.model_for_guild(TARGET_GUILD)
        assert model == LOCAL_MODEL_ID
        now = iso(system_clock())
        b0 = time.perf_counter()
        await mem.db.write(write_members, corpus, now)
        for g in range(GUILDS):
            await mem.db.write(write_facts, model, corpus.lore(g, LORE_PER_GUILD, 200 + g), now)
            if g:
                facts = corpus.facts(g, args.other_guild_facts, seed=100 + g)
                await write_in_chunks(mem, write_facts, model, facts, now)
        if args.messages:
            msgs = corpus.messages(0, args.messages, seed=99)
            await mem.db.write(write_messages, model, msgs, now)
        await mem.close()
        print(
            f"wrote the other 9 guilds and {args.messages} messages in "
            f"{time.perf_counter() - b0:.1f}s",
            flush=True,
        )

        written = 0
        for size in [] if args.no_facts else sizes:
            mem = await Memory.open(cfg, extractor=RuleExtractor(), embedder=emb)
            b0 = time.perf_counter()
            await write_in_chunks(mem, write_facts, model, target_facts[written:size], now)
            build_s = time.perf_counter() - b0
            written = size
            await _quiet(mem)
            try:
                measured = await _measure(mem, qs, asker, args.rounds, k, backend == "sqlite")
            finally:
                await mem.close()
            row = {"facts_in_guild": size, "insert_seconds": round(build_s, 1), **measured}
            if "numpy" in row:
                row["search_p50_over_numpy_p50"] = round(
                    row["search"]["p50_ms"] / row["numpy"]["p50_ms"], 2
                )
            out["sizes"][str(size)] = row
            print(
                f"{backend} {size:>7} facts: search p50 {row['search']['p50_ms']:.1f} ms "
                f"p95 {row['search']['p95_ms']:.1f} | slice p50 {row['slice']['p50_ms']:.1f} "
                f"{_baselines_line(row)}"
                f"| search CPU p50 {row['search_process_cpu']['p50_ms']:.1f} "
                f"| 1-min load {_first(row['loadavg_during'][0])} → "
                f"{_first(row['loadavg_during'][1])}",
                flush=True,
            )
        if args.message_sizes:
            out["messages"] = await run_messages(
                cfg,
                emb,
                corpus.names[1],
                args.message_sizes,
                args.data,
                args.message_pool,
                args.noise,
                args.queries,
                args.rounds,
            )
        out["db_bytes"] = (
            _db_bytes(data)
            if cfg.database_url is None or server is None
            else server.database_bytes(cfg.database_url)
        )
    finally:
        await emb.aclose()
        if args.keep:
            print(f"kept {data}")
        else:
            shutil.rmtree(data, ignore_errors=True)
    out["pool"] = {
        "sentences": len(corpus.preds),
        "embed_seconds": round(corpus.embed_seconds, 2),
        "noise_sigma": args.noise,
    }
    out["queries"] = {"distinct": len(qs), "rounds": args.rounds, "examples": qs[:8]}
    return out


def _baselines_line(row: dict[str, Any]) -> str:
    if "numpy" not in row:
        return ""
    fts = row["fts"]["p50_ms"] if row["fts"] else float("nan")
    lex = row["lexicon"]["p50_ms"] if row.get("lexicon") else float("nan")
    return (
        f"| numpy {row['numpy']['p50_ms']:.2f} | vec0 {row['vec0']['p50_ms']:.1f} | fts {fts:.1f} "
        f"| lexicon {lex:.1f} "
    )


def _first(load: list[float] | None) -> float | None:
    return load[0] if load else None


def _db_bytes(data: Path) -> int:
    return sum(p.stat().st_size for p in data.glob("guildlore.sqlite3*"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[1000, 10000, 100000],
        help="facts in the measured guild, comma-separated",
    )
    parser.add_argument("--other-guild-facts", type=int, default=10000)
    parser.add_argument("--messages", type=int, default=5000, help="in the measured guild")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pool", type=int, default=4000, help="distinct sentences embedded")
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--tmp", type=Path, default=None, help="where the database goes")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument(
        "--out", type=Path, default=None, help=f"default {RESULTS} ({BACKENDS_RESULTS} for both)"
    )
    parser.add_argument(
        "--backends",
        type=parse_backends,
        default=["sqlite"],
        help="comma-separated: sqlite, postgresql (a pgserver PostgreSQL on a temporary dir)",
    )
    parser.add_argument(
        "--no-facts", action="store_true", help="skip the fact sizes (message search only)"
    )
    parser.add_argument(
        "--message-sizes",
        type=lambda s: [int(x) for x in s.split(",") if x],
        default=[10000, 100000],
        help="long messages in the message guild, comma-separated ('' skips the part)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help="a LongMemEval file (.json or .json.gz) whose haystack turns join the messages",
    )
    parser.add_argument("--message-pool", type=int, default=3000, help="message texts embedded")
    args = parser.parse_args(argv)
    if args.queries > 400:
        parser.error("--queries above 400 would overflow the engine's query-vector cache")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    load_before = loadavg()
    started = time.perf_counter()
    if args.backends != ["sqlite"]:
        args.out = args.out or BACKENDS_RESULTS
        results: dict[str, dict[str, Any]] = {}
        with postgres_if(args.backends) as server:
            versions = {"postgresql": server.version()} if server is not None else {}
            for backend in args.backends:
                results[backend] = asyncio.run(run(args, backend, server))
        return compare_backends(args, results, load_before, started, versions)
    args.out = args.out or RESULTS
    result = asyncio.run(run(args))
    largest = result["sizes"].get(str(max(args.sizes)))
    meets: bool | None = None  # the target is set at 100k facts only
    if largest is not None and max(args.sizes) == TARGET_AT:
        meets = (
            largest["search_p50_over_numpy_p50"] <= TARGET_RATIO
            and largest["search"]["p95_ms"] <= TARGET_P95_MS
        )
    msg_largest = result.get("messages", {}).get("sizes", {}).get(str(TARGET_AT))
    meets_messages: bool | None = None  # set at 100k messages only
    if msg_largest is not None:
        meets_messages = msg_largest["search_all"]["p95_ms"] <= TARGET_P95_MS
    payload: dict[str, Any] = {
        "machine": {"loadavg_before": load_before, "loadavg_after": loadavg()},
        "guilds": GUILDS,
        "other_guild_facts": args.other_guild_facts,
        "messages_in_guild": args.messages,
        "target": {
            "at_facts": TARGET_AT,
            "search_p50_over_numpy_p50_max": TARGET_RATIO,
            "search_p95_ms_max": TARGET_P95_MS,
            "at_messages": TARGET_AT,
            "scope_all_p95_ms_max": TARGET_P95_MS,
        },
        "meets_target": meets,
        "meets_message_target": meets_messages,
        "seconds": round(time.perf_counter() - started, 1),
        **result,
    }
    write_json("search", payload, args.out)

    print()
    print(
        f"search benchmark: {GUILDS} guilds ({args.other_guild_facts} facts in each other one), "
        f"{args.messages} messages, {args.queries} "
        f"queries × {args.rounds}; {len(os.sched_getaffinity(0))} CPUs, load {load_before}; "
        "query embedding excluded; ms"
    )
    headers = [
        "facts",
        "search p50",
        "search p95",
        "slice p50",
        "slice p95",
        "numpy p50",
        "numpy p95",
        "vec0 p50",
        "vec0 p95",
        "fts p50",
        "lexicon p50",
        "search/numpy",
        "load",
    ]
    rows = []
    for size, r in result["sizes"].items():
        fts = r["fts"] or {"p50_ms": float("nan")}
        lex = r.get("lexicon") or {"p50_ms": float("nan")}
        rows.append(
            [
                size,
                r["search"]["p50_ms"],
                r["search"]["p95_ms"],
                r["slice"]["p50_ms"],
                r["slice"]["p95_ms"],
                r["numpy"]["p50_ms"],
                r["numpy"]["p95_ms"],
                r["vec0"]["p50_ms"],
                r["vec0"]["p95_ms"],
                fts["p50_ms"],
                lex["p50_ms"],
                f"{r['search_p50_over_numpy_p50']:.2f}×",
                _first(r["loadavg_during"][0]),
            ]
        )
    if rows:
        print_table(headers, rows)
    if "messages" in result:
        _print_messages(result["messages"], meets_messages)
    if largest is None:
        return 0
    verdict = {True: "meets", False: "MISSES", None: "(set at 100k facts) not judged by"}[meets]
    print(
        f"at {max(args.sizes)} facts: search p50 {largest['search']['p50_ms']:.1f} ms = "
        f"{largest['search_p50_over_numpy_p50']:.2f}× numpy (target ≤ {TARGET_RATIO:.0f}×), "
        f"p95 {largest['search']['p95_ms']:.1f} ms (target ≤ {TARGET_P95_MS:.0f} ms) — {verdict} "
        f"the target; results in {args.out}"
    )
    return 0


def _print_messages(res: dict[str, Any], meets: bool | None) -> None:
    print()
    print(
        f"message search: {res['source']}, {res['pool']['texts']} texts (median "
        f"{res['pool']['median_chars']} chars, p90 {res['pool']['p90_chars']}), "
        f"{res['queries']['distinct']} queries × {res['queries']['rounds']}; strict, limit 10; ms"
    )
    headers = [
        "messages",
        "messages p50",
        "messages p95",
        "all p50",
        "all p95",
        "bare fts p50",
        "bare fts p95",
        "lexicon p50",
        "lexicon p95",
        "load",
    ]
    rows = []
    for size, r in res["sizes"].items():
        none = {"p50_ms": float("nan"), "p95_ms": float("nan")}
        fts = r["bare_fts_messages"] or none
        lex = r.get("bare_lexicon_messages") or none
        rows.append(
            [
                size,
                r["search_messages"]["p50_ms"],
                r["search_messages"]["p95_ms"],
                r["search_all"]["p50_ms"],
                r["search_all"]["p95_ms"],
                fts["p50_ms"],
                fts["p95_ms"],
                lex["p50_ms"],
                lex["p95_ms"],
                _first(r["loadavg_during"][0]),
            ]
        )
    print_table(headers, rows)
    verdict = {True: "meets", False: "MISSES", None: "not judged (set at 100k messages)"}[meets]
    print(f"scope=all p95 ≤ {TARGET_P95_MS:.0f} ms at {TARGET_AT} messages: {verdict}")


if __name__ == "__main__":
    sys.exit(main())
