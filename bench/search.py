"""Search and prompt-slice latency at 1k, 10k and 100k facts in one guild.

    .venv/bin/python bench/search.py [--sizes 1000,10000,100000] [--other-guild-facts 10000]
                                     [--queries 200] [--rounds 2] [--pool 4000]

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
- ``fts``: the bare FTS5 query that search runs (``store.search_facts_fts``).

The three baselines run on their own connection, in a pass of their own
after each round of searches and slices (not interleaved query by query:
OpenBLAS helper threads spin on after a product and would slow the next
search), so every column sees about the same machine load. On a shared 2-core
machine that load moves a lot: the 1-min load average at the start of each
size is printed, and the JSON also has the process CPU time per search.

Query embedding is excluded: every query is run once untimed first, which
puts its vector in the engine's query-vector cache (``EmbeddingService``), and
the timed runs check that the cache answered (``embed_ms`` ≈ 0). The KNN depth
is the retriever's own (knn_candidates + fact_overfetch).

Target at 100k: search p50 ≤ 3× numpy p50, search p95 ≤ 50 ms.
Writes bench/results/search.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

from bench._common import percentile, print_table  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "search.json"
TARGET_AT = 100_000
TARGET_RATIO = 3.0
TARGET_P95_MS = 50.0
GUILDS = 10
TARGET_GUILD = "900000000000000001"
# 2,000 members keep 100k facts at 50 per member, under the archive limit of
# 80 active facts per subject (IngestConfig.keep_facts_per_subject).
MEMBERS_PER_GUILD = 2000
LORE_PER_GUILD = 100
CHANNELS_PER_GUILD = 8

FIRST = (
    "Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Mallory Niaj Olivia Peggy Rupert "
    "Sybil Trent Victor Walter Yasmin Zoe Amir Bea Chen Dmitri Elena Farid Greta Hugo Ines "
    "Jonas Kira Luca Maya Nils Oskar Priya Quinn Rosa Samir Tomas Uma Vera Wen Xavier Yusuf "
    "Zara Anton Bruno Clara Dana Emil Fiona Gustav Hana Igor Jana Karl Lena Milo"
).split()
LAST = (
    "Smith Jones Garcia Muller Rossi Tanaka Kowalski Silva Novak Dubois Jensen Costa Weber "
    "Ivanova Moreau Santos Nakamura Larsen Petrov Okafor Berg Castro Dahl Eriksen Fischer "
    "Gomez Horvat Ito Kaur Lindqvist Mendes Nagy Ortiz Park Quist Reyes Sato Torres Varga Wolff"
).split()
TEMPLATES = [
    ("preference", "plays {game} on weekends"),
    ("preference", "loves {food} and cooks it every {day}"),
    ("fact", "works as a {job} in {city}"),
    ("fact", "moved to {city} in {year}"),
    ("goal", "is learning {skill} this year"),
    ("goal", "is training for a {race} in {city}"),
    ("fact", "owns a {pet} called {petname}"),
    ("fact", "bought a new {thing} for {purpose}"),
    ("preference", "listens to {music} while {activity}"),
    ("fact", "collects {collect} from {city}"),
    ("preference", "prefers {drink} over {drink2}"),
    ("event", "went to {city} for a {event} in {month}"),
    ("fact", "repairs old {thing}s as a hobby"),
    ("preference", "hates {food} but likes {food2}"),
    ("fact", "has a {relative} who is a {job}"),
    ("goal", "wants to visit {city} to see the {sight}"),
    ("fact", "runs the guild's {game} night on {day}s"),
    ("fact", "is allergic to {allergen}"),
    ("preference", "reads {genre} novels before bed"),
    ("event", "broke their {thing} while {activity} in {month}"),
    ("preference", "plays {game} with their {relative} on {day}s"),
    ("goal", "is learning {skill} in {city}"),
    ("fact", "cooks {food} for their {relative} every {day}"),
    ("event", "saw a {music} {event} in {city} in {month}"),
]
FILL: dict[str, list[str]] = {
    "game": "chess tennis guitar football poker basketball Go Minecraft bridge volleyball "
    "Dota badminton".split(),
    "food": "lasagna curry paella dumplings ramen tacos sushi pierogi falafel risotto".split(),
    "food2": "pizza pho goulash moussaka bibimbap empanadas".split(),
    "day": "Sunday Monday Friday Saturday Wednesday".split(),
    "job": "nurse teacher plumber developer chef pilot architect electrician lawyer "
    "pharmacist carpenter journalist".split(),
    "city": "Berlin Lisbon Osaka Toronto Nairobi Lima Oslo Krakow Naples Austin Hanoi "
    "Porto Seoul Dublin".split(),
    "year": [str(y) for y in range(2012, 2026)],
    "skill": [
        "Portuguese",
        "Rust",
        "the violin",
        "calligraphy",
        "Japanese",
        "sailing",
        "pottery",
        "welding",
        "salsa dancing",
        "3D modelling",
    ],
    "race": ["marathon", "triathlon", "half marathon", "cycling race", "trail run"],
    "pet": "greyhound cat parrot tortoise ferret beagle rabbit hamster".split(),
    "petname": "Biscuit Pixel Mango Luna Ziggy Pepper Otis Noodle Waffles Juno".split(),
    "thing": "laptop bicycle camera synthesizer car keyboard drone telescope watch".split(),
    "purpose": ["work", "travel", "streaming", "photography", "the commute", "music"],
    "music": "jazz techno opera podcasts metal lo-fi bluegrass".split(),
    "activity": "coding running cooking gaming painting studying".split(),
    "collect": ["stamps", "coins", "vinyl records", "comic books", "fossils", "postcards"],
    "drink": "coffee tea mate kombucha cocoa".split(),
    "drink2": "beer wine soda juice".split(),
    "event": ["conference", "wedding", "festival", "hackathon", "concert", "funeral"],
    "month": "January March May July September November".split(),
    "relative": "sister brother cousin uncle aunt".split(),
    "sight": ["museum", "old harbour", "cathedral", "botanical garden", "castle"],
    "allergen": ["peanuts", "cats", "pollen", "shellfish", "gluten", "penicillin"],
    "genre": ["fantasy", "crime", "sci-fi", "historical", "horror"],
}
QUESTIONS = [
    "who plays {game}?",
    "does anyone here cook {food}",
    "which of us works as a {job}",
    "who moved to {city}",
    "anyone learning {skill}?",
    "who is training for a {race}",
    "whose {pet} is called {petname}",
    "who bought a new {thing}",
    "does somebody listen to {music}",
    "what does {name} collect",
    "what is {name} learning",
    "where does {name} work",
    "is {name} allergic to anything",
    "what pet does {name} have",
    "who went to a {event} in {city}",
    "recommend a {genre} book like the ones people here read",
    "who runs the {game} night",
    "who wants to see the {sight} in {city}",
    "tell me about {name}",
    "who prefers {drink}",
]
CHAT = [
    "yeah honestly {p} lol",
    "not gonna lie, {p} these days",
    "fun fact: {p}",
    "I think {p}, right?",
    "{p} — ask me anything about it",
]


# -- the synthetic guild ----------------------------------------------------------------------


def guild_id(i: int) -> str:
    return str(int(TARGET_GUILD) + i)


def member_names(rng: random.Random, n: int) -> list[str]:
    names: set[str] = set()
    while len(names) < n:
        names.add(f"{rng.choice(FIRST)} {rng.choice(LAST)}")
    return sorted(names)


def predicates(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """(fact type, predicate) — ``n`` distinct ones."""
    out: dict[str, str] = {}
    for _ in range(50 * n):
        if len(out) >= n:
            break
        ftype, tpl = rng.choice(TEMPLATES)
        pred = tpl.format(**{k: rng.choice(v) for k, v in FILL.items()})
        out.setdefault(pred, ftype)
    if len(out) < n:
        raise SystemExit(f"the templates give only about {len(out)} distinct predicates")
    return [(t, p) for p, t in out.items()]


def questions(rng: random.Random, n: int, names: list[str]) -> list[str]:
    out: dict[str, None] = {}
    while len(out) < n:
        fill = {k: rng.choice(v) for k, v in FILL.items()}
        fill["name"] = rng.choice(names).split()[0]
        out.setdefault(rng.choice(QUESTIONS).format(**fill), None)
    return list(out)


class Corpus:
    """Deterministic facts, vectors and messages for every guild."""

    def __init__(self, pool: int, noise: float, seed: int = 7) -> None:
        rng = random.Random(seed)
        self.noise = noise
        self.preds = predicates(rng, pool)
        self.names = {
            g: member_names(random.Random(seed + g), MEMBERS_PER_GUILD) for g in range(GUILDS)
        }
        self.pool_vecs: np.ndarray | None = None
        self.embed_seconds = 0.0

    def pooled_texts(self) -> list[str]:
        from memory.embed import fact_embedding_text

        rng = random.Random(11)
        names = self.names[0]
        return [fact_embedding_text(t, f"{rng.choice(names)} {p}.", None) for t, p in self.preds]

    def embed_pool(self, emb: Any) -> None:
        texts = self.pooled_texts()
        started = time.perf_counter()
        self.pool_vecs = emb.embed_sync(texts)
        self.embed_seconds = time.perf_counter() - started

    def _perturbed(self, preds: list[int], seed: int, sigma: float) -> np.ndarray:
        """The pooled vectors of ``preds``, each with Gaussian noise, re-normalised."""
        assert self.pool_vecs is not None
        nrng = np.random.default_rng(seed)
        noise = nrng.normal(0.0, sigma, (len(preds), self.pool_vecs.shape[1]))
        vecs = self.pool_vecs[preds] + noise.astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs.astype(np.float32)

    def facts(self, g: int, n: int, seed: int) -> list[dict[str, Any]]:
        """``n`` distinct (member, predicate) facts of guild ``g``, with vectors."""
        rng = random.Random(seed)
        names = self.names[g]
        total = len(names) * len(self.preds)
        if n > total:
            raise SystemExit(f"--pool too small for {n} distinct facts in a guild")
        out = []
        base = time.time() - 2 * 365 * 86400
        for pick in rng.sample(range(total), n):
            who, pi = divmod(pick, len(self.preds))
            ftype, pred = self.preds[pi]
            out.append(
                {
                    "guild": guild_id(g),
                    "subject": _user_id(g, who),
                    "channel": None if rng.random() < 0.3 else _channel_id(g, rng.randrange(8)),
                    "fact": f"{names[who]} {pred}.",
                    "type": ftype,
                    "evidence": rng.choice(CHAT).format(p=pred) if rng.random() < 0.6 else None,
                    "confidence": round(0.5 + rng.random() * 0.45, 2),
                    "when": _iso(base + rng.random() * 2 * 365 * 86400),
                    "pred": pi,
                }
            )
        vecs = self._perturbed([f["pred"] for f in out], seed, self.noise)
        for f, v in zip(out, vecs, strict=True):
            f["vec"] = v
        return out

    def lore(self, g: int, n: int, seed: int) -> list[dict[str, Any]]:
        """``n`` guild-wide lore facts (subject ``__lore__``), like ``/memory remember``."""
        from memory.models import LORE_SUBJECT

        rng = random.Random(seed)
        preds = rng.sample(range(len(self.preds)), n)
        vecs = self._perturbed(preds, seed, self.noise)
        base = time.time() - 365 * 86400
        return [
            {
                "guild": guild_id(g),
                "subject": LORE_SUBJECT,
                "channel": None,
                "fact": f"The server {self.preds[pi][1]}.",
                "type": self.preds[pi][0],
                "evidence": None,
                "confidence": 0.9,
                "when": _iso(base + rng.random() * 365 * 86400),
                "pred": pi,
                "vec": v,
            }
            for pi, v in zip(preds, vecs, strict=True)
        ]

    def messages(self, g: int, n: int, seed: int) -> list[tuple[Any, np.ndarray]]:
        from memory.models import IncomingMessage

        rng = random.Random(seed)
        gid = guild_id(g)
        names = self.names[g]
        msgs = []
        preds = []
        t = time.time() - 365 * 86400
        for i in range(n):
            who = rng.randrange(len(names))
            pi = rng.randrange(len(self.preds))
            t += rng.random() * 2 * 365 * 86400 / n
            m = IncomingMessage(
                id=str(10**17 + g * 10**7 + i),
                guild_id=gid,
                channel_id=_channel_id(g, rng.randrange(CHANNELS_PER_GUILD)),
                author_id=_user_id(g, who),
                author_name=names[who],
                content=rng.choice(CHAT).format(p=self.preds[pi][1].replace("their", "my")),
                created_at=_iso(t),
                source="import",
            )
            msgs.append(m)
            preds.append(pi)
        vecs = self._perturbed(preds, seed, self.noise * 1.5)
        return list(zip(msgs, vecs, strict=True))


def _user_id(g: int, who: int) -> str:
    return str(3 * 10**17 + g * 10**6 + who)


def _channel_id(g: int, c: int) -> str:
    return str(5 * 10**17 + g * 10**6 + c)


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(ts))


# -- writing ------------------------------------------------------------------------------------


def _write_members(con: Any, corpus: Corpus, now: str) -> None:
    from memory import store

    for g in range(GUILDS):
        gid = guild_id(g)
        store.set_guild_name(con, gid, f"bench guild {g}", now)
        for c in range(CHANNELS_PER_GUILD):
            store.set_channel_name(con, gid, _channel_id(g, c), f"channel-{c}", now)
        for who, name in enumerate(corpus.names[g]):
            store.upsert_member(con, gid, _user_id(g, who), name, now)


def _write_facts(con: Any, model: str, facts: list[dict[str, Any]], now: str) -> None:
    from memory import store, store_vectors
    from memory.embed import vector_to_blob

    payload = []
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
            now=f["when"],
            actor="bench",
        )
        payload.append((up.fact.id, f["guild"], f"bench{up.fact.id}", vector_to_blob(f["vec"])))
    store_vectors.put_fact_vectors(con, model, len(facts[0]["vec"]), payload, now)


def _write_messages(con: Any, model: str, items: list[tuple[Any, np.ndarray]], now: str) -> None:
    from memory import store, store_vectors
    from memory.embed import vector_to_blob

    msgs = [m for m, _ in items]
    store.insert_messages(con, msgs, now)
    store.mark_messages(con, [m.id for m in msgs], "done", now)
    store.mark_journaled(con, [m.id for m in msgs])
    seqs = {
        r["id"]: int(r["seq"])
        for r in con.execute(
            "SELECT id, seq FROM messages WHERE guild_id = ?", (msgs[0].guild_id,)
        ).fetchall()
    }
    rows = [(seqs[m.id], m.guild_id, vector_to_blob(v)) for m, v in items]
    store_vectors.put_message_vectors(con, model, len(items[0][1]), rows, now)


async def _write_in_chunks(mem: Any, fn: Any, model: str, items: list[Any], now: str) -> None:
    for i in range(0, len(items), 5000):
        await mem.db.write(fn, model, items[i : i + 5000], now)


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

    def __init__(self, db_path: Path, model: str, k: int) -> None:
        from memory import sqlite, store_vectors

        self.k = k
        self.con = sqlite.connect(db_path)
        dims = store_vectors.model_dims(self.con, model)
        assert dims is not None
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
        self.overlap: list[float] = []

    def run(self, q: np.ndarray, match: str | None) -> None:
        from memory import store
        from memory.embed import vector_to_blob

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

    def result(self) -> dict[str, Any]:
        return {
            "rows": int(len(self.ids)),
            "matrix_load_ms": round(self.load_ms, 1),
            "numpy": _stats(self.numpy_ms),
            "numpy_einsum_product_only": _stats(self.einsum_ms),
            "vec0": _stats(self.vec0_ms),
            "fts": _stats(self.fts_ms) if self.fts_ms else None,
            "vec0_numpy_topk_overlap": round(float(np.mean(self.overlap)), 4),
        }

    def close(self) -> None:
        self.con.close()


async def _measure(
    mem: Any, qs: list[str], asker: list[tuple[str, str]], rounds: int, k: int
) -> dict[str, Any]:
    retriever = mem.retriever
    visible = {_channel_id(0, c) for c in range(CHANNELS_PER_GUILD)}
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
    qvecs = [mem.embeddings._query_cache[(model, p.content)] for p in plans]
    base = Baselines(mem.config.db_path, model, k)
    search_ms: list[float] = []
    search_cpu: list[float] = []  # CPU of every thread of this process: load-independent
    slice_ms: list[float] = []
    load_before = _load()
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
            for p, qv in zip(plans, qvecs, strict=True):
                base.run(qv, p.fact_match)
            await asyncio.sleep(0.5)
    finally:
        base.close()
    return {
        "search": _stats(search_ms),
        "slice": _stats(slice_ms),
        "search_process_cpu": _stats(search_cpu),
        "search_facts_stage": _stats(facts_part),
        "loadavg_during": [load_before, _load()],
        "query_embed_ms_max": round(max(embed_part), 3),
        "mean_hits_per_search": round(hits / len(search_ms), 2),
        "first_search_cold_ms": round(cold_ms, 1),
        "matrix_warm_ms": round(warm_ms, 1),
        "vector_cache": retriever.index.stats(),
        **base.result(),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from memory.clock import iso, system_clock
    from memory.config import EmbeddingConfig, MemoryConfig
    from memory.embed import LOCAL_MODEL_ID, LocalMiniLMEmbedder
    from memory.extract import RuleExtractor
    from memory.retrieval import RetrievalTuning
    from memory.service import Memory

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
            _channel_id(0, qrng.randrange(CHANNELS_PER_GUILD)),
            _user_id(0, qrng.randrange(MEMBERS_PER_GUILD)),
        )
        for _ in qs
    ]
    target_facts = corpus.facts(0, sizes[-1], seed=100)

    data = Path(tempfile.mkdtemp(prefix="guildlore-bench-search-", dir=args.tmp))
    cfg = MemoryConfig.for_data_dir(data)
    cfg = replace(cfg, embedding=EmbeddingConfig(provider="local"))
    k = cfg.retrieval.knn_candidates + RetrievalTuning().fact_overfetch
    out: dict[str, Any] = {"sizes": {}, "knn_k": k}
    try:
        mem = await Memory.open(cfg, extractor=RuleExtractor(), embedder=emb)
        model = mem.embeddings.model_for_guild(TARGET_GUILD)
        assert model == LOCAL_MODEL_ID
        now = iso(system_clock())
        b0 = time.perf_counter()
        await mem.db.write(_write_members, corpus, now)
        for g in range(GUILDS):
            await mem.db.write(_write_facts, model, corpus.lore(g, LORE_PER_GUILD, 200 + g), now)
            if g:
                facts = corpus.facts(g, args.other_guild_facts, seed=100 + g)
                await _write_in_chunks(mem, _write_facts, model, facts, now)
        if args.messages:
            msgs = corpus.messages(0, args.messages, seed=99)
            await mem.db.write(_write_messages, model, msgs, now)
        await mem.close()
        print(
            f"wrote the other 9 guilds and {args.messages} messages in "
            f"{time.perf_counter() - b0:.1f}s",
            flush=True,
        )

        written = 0
        for size in sizes:
            mem = await Memory.open(cfg, extractor=RuleExtractor(), embedder=emb)
            b0 = time.perf_counter()
            await _write_in_chunks(mem, _write_facts, model, target_facts[written:size], now)
            build_s = time.perf_counter() - b0
            written = size
            await _quiet(mem)
            try:
                measured = await _measure(mem, qs, asker, args.rounds, k)
            finally:
                await mem.close()
            row = {"facts_in_guild": size, "insert_seconds": round(build_s, 1), **measured}
            row["search_p50_over_numpy_p50"] = round(
                row["search"]["p50_ms"] / row["numpy"]["p50_ms"], 2
            )
            out["sizes"][str(size)] = row
            print(
                f"{size:>7} facts: search p50 {row['search']['p50_ms']:.1f} ms "
                f"p95 {row['search']['p95_ms']:.1f} | slice p50 {row['slice']['p50_ms']:.1f} "
                f"| numpy {row['numpy']['p50_ms']:.2f} | vec0 {row['vec0']['p50_ms']:.1f} "
                f"| fts {row['fts']['p50_ms'] if row['fts'] else float('nan'):.1f} "
                f"| search CPU p50 {row['search_process_cpu']['p50_ms']:.1f} "
                f"| 1-min load {_first(row['loadavg_during'][0])} → "
                f"{_first(row['loadavg_during'][1])}",
                flush=True,
            )
        out["db_bytes"] = _db_bytes(data)
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


def _first(load: list[float] | None) -> float | None:
    return load[0] if load else None


def _db_bytes(data: Path) -> int:
    return sum(p.stat().st_size for p in data.glob("guildlore.sqlite3*"))


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


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
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.queries > 400:
        parser.error("--queries above 400 would overflow the engine's query-vector cache")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    load_before = _load()
    started = time.perf_counter()
    result = asyncio.run(run(args))
    largest = result["sizes"][str(max(args.sizes))]
    meets: bool | None = None  # the target is set at 100k facts only
    if max(args.sizes) == TARGET_AT:
        meets = (
            largest["search_p50_over_numpy_p50"] <= TARGET_RATIO
            and largest["search"]["p95_ms"] <= TARGET_P95_MS
        )
    payload: dict[str, Any] = {
        "benchmark": "search",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": len(os.sched_getaffinity(0)),
            "python": sys.version.split()[0],
            "loadavg_before": load_before,
            "loadavg_after": _load(),
        },
        "guilds": GUILDS,
        "other_guild_facts": args.other_guild_facts,
        "messages_in_guild": args.messages,
        "target": {
            "at_facts": TARGET_AT,
            "search_p50_over_numpy_p50_max": TARGET_RATIO,
            "search_p95_ms_max": TARGET_P95_MS,
        },
        "meets_target": meets,
        "seconds": round(time.perf_counter() - started, 1),
        **result,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")

    print()
    print(
        f"search benchmark: {GUILDS} guilds ({args.other_guild_facts} facts in each other one), "
        f"{args.messages} messages, {len(result['queries']['examples']) and args.queries} "
        f"queries × {args.rounds}; {payload['machine']['cpus']} CPUs, load {load_before}; "
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
        "search/numpy",
        "load",
    ]
    rows = []
    for size, r in result["sizes"].items():
        fts = r["fts"] or {"p50_ms": float("nan")}
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
                f"{r['search_p50_over_numpy_p50']:.2f}×",
                _first(r["loadavg_during"][0]),
            ]
        )
    print_table(headers, rows)
    verdict = {True: "meets", False: "MISSES", None: "(set at 100k facts) not judged by"}[meets]
    print(
        f"at {max(args.sizes)} facts: search p50 {largest['search']['p50_ms']:.1f} ms = "
        f"{largest['search_p50_over_numpy_p50']:.2f}× numpy (target ≤ {TARGET_RATIO:.0f}×), "
        f"p95 {largest['search']['p95_ms']:.1f} ms (target ≤ {TARGET_P95_MS:.0f} ms) — {verdict} "
        f"the target; results in {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
