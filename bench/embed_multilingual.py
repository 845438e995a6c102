"""The bundled embedding models side by side: MiniLM (English) and
multilingual e5, on speed and on cross-language search.

    .venv/bin/python -m bench.embed_multilingual [--threads 2] [--n 512]

Speed: texts per second embedding the first ``--n`` messages of the real
export in tests/data (calls of 64 texts, after a warm-up), and the time of one
query. Quality: the German, Spanish, Russian and Japanese guilds of
tests/data/multilingual_guilds.json; each query, asked in the guild's language
and in English, should rank its message in the top 5 of the guild's 30
(recall@1 and @5, brute-force cosine). Writes
bench/results/embed-multilingual.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import EXPORT, ROOT, export_texts, loadavg, print_table, write_json
from memory.embed.e5 import MultilingualE5Embedder
from memory.embed.local import LocalMiniLMEmbedder

GUILDS = ROOT / "tests" / "data" / "multilingual_guilds.json"
CALL = 64
QUERY_RUNS = 20


def speed(embed: Any, texts: list[str]) -> float:
    embed(texts[:CALL])  # warm-up: loads the model
    started = time.perf_counter()
    for i in range(0, len(texts), CALL):
        embed(texts[i : i + CALL])
    return len(texts) / (time.perf_counter() - started)


def query_ms(embed: Any) -> float:
    times = []
    for i in range(QUERY_RUNS):
        started = time.perf_counter()
        embed([f"what did we say about the meetup on saturday {i}?"])
        times.append(time.perf_counter() - started)
    return 1000 * float(np.median(times))


def ranks(embed_passages: Any, embed_queries: Any, guilds: dict[str, Any]) -> dict[str, Any]:
    """Per language and query form: the rank (1-based) of each query's message."""
    out: dict[str, Any] = {}
    for lang, guild in guilds.items():
        passages = embed_passages(guild["messages"])
        for form in ("native", "english"):
            queries = embed_queries([q[form] for q in guild["queries"]])
            found = []
            for q, vec in zip(guild["queries"], queries, strict=True):
                order = np.argsort(-(passages @ vec))
                found.append(int(np.where(order == q["expect"])[0][0]) + 1)
            out[f"{lang}/{form}"] = found
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    texts = [content for _, content in export_texts(EXPORT)][: args.n]
    guilds = json.loads(GUILDS.read_text(encoding="utf-8"))
    minilm = LocalMiniLMEmbedder(threads=args.threads)
    e5 = MultilingualE5Embedder(threads=args.threads)
    # MiniLM has no query form: the same function embeds both sides.
    models = {
        minilm.model: (minilm.embed_sync, minilm.embed_sync),
        e5.model: (e5.embed_sync, e5.embed_queries_sync),
    }
    results: dict[str, Any] = {}
    for name, (passages, queries) in models.items():
        found = ranks(passages, queries, guilds)
        flat = [r for rs in found.values() for r in rs]
        results[name] = {
            "texts_per_second": round(speed(passages, texts), 1),
            "query_ms": round(query_ms(queries), 2),
            "recall_at_1": round(sum(r <= 1 for r in flat) / len(flat), 3),
            "recall_at_5": round(sum(r <= 5 for r in flat) / len(flat), 3),
            "ranks": found,
        }
    base = results[minilm.model]["texts_per_second"]
    for r in results.values():
        r["speed_vs_minilm"] = round(r["texts_per_second"] / base, 3)
    path = write_json(
        "embed-multilingual",
        {
            "threads": args.threads,
            "texts": len(texts),
            "mean_chars": round(sum(map(len, texts)) / len(texts), 1),
            "queries": sum(2 * len(g["queries"]) for g in guilds.values()),
            "models": results,
            "machine": {"loadavg": loadavg()},
        },
        args.out,
    )
    print(f"{len(texts)} export messages, {args.threads} threads, load {loadavg()}")
    print_table(
        ["model", "texts/s", "× MiniLM", "query ms", "R@1", "R@5"],
        [
            [
                name,
                r["texts_per_second"],
                r["speed_vs_minilm"],
                r["query_ms"],
                r["recall_at_1"],
                r["recall_at_5"],
            ]
            for name, r in results.items()
        ],
    )
    print()
    langs = list(next(iter(results.values()))["ranks"])
    print_table(
        ["model", *langs],
        [
            [name, *(" ".join(map(str, r["ranks"][lang])) for lang in langs)]
            for name, r in results.items()
        ],
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
