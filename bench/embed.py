"""Local embedding throughput: load time and sentences/s at batch 1, 32 and 64.

    .venv/bin/python -m bench.embed [--threads 2] [--n 1000] [--messages FILE]

Uses the first ``--n`` non-empty messages of a DiscordChatExporter JSON file
(default: the Vesuvius export in tests/data) or, without such a file,
deterministic synthetic chat lines. Writes bench/results/embed.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import time
from pathlib import Path

import numpy as np

from bench._common import EXPORT
from memory.embed.local import LOCAL_MODEL_ID, LocalMiniLMEmbedder

log = logging.getLogger("bench.embed")

RESULTS = Path(__file__).parent / "results" / "embed.json"
PAIRS = [
    ("How do I reset my password?", "What's the way to change a forgotten password?"),
    ("How do I reset my password?", "The cat is sleeping on the sofa all afternoon."),
    ("going to the beach this weekend", "Saturday at the seaside"),
    ("going to the beach this weekend", "Quarterly revenue grew by four percent."),
]


def load_messages(path: Path | None, n: int) -> tuple[list[str], str]:
    if path is not None and path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        texts = [m["content"] for m in data.get("messages", []) if m.get("content", "").strip()]
        if texts:
            return texts[:n], str(path)
    rng = random.Random(7)
    words = (
        "hey anyone tried the new build yet i think the server cat likes tuna "
        "we should meet saturday at the seaside my laptop broke again lol "
        "who is running the raid tonight does anyone know how to reset passwords"
    ).split()
    return [" ".join(rng.choices(words, k=rng.randint(3, 25))) for _ in range(n)], "synthetic"


def throughput(emb: LocalMiniLMEmbedder, texts: list[str], batch: int) -> float:
    emb.batch_size = batch
    emb.embed_sync(texts[: min(len(texts), batch * 2)])  # warm-up
    started = time.perf_counter()
    if batch == 1:
        for t in texts:
            emb.embed_sync([t])
    else:
        emb.embed_sync(texts)
    return len(texts) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--messages", type=Path, default=EXPORT)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    texts, source = load_messages(args.messages, args.n)
    emb = LocalMiniLMEmbedder(threads=args.threads)
    started = time.perf_counter()
    emb.load()
    load_s = time.perf_counter() - started

    rates = {str(b): round(throughput(emb, texts, b), 1) for b in (1, 32, 64)}
    cosines = []
    for a, b in PAIRS:
        va, vb = emb.embed_sync([a, b])
        cosines.append({"a": a, "b": b, "cosine": round(float(np.dot(va, vb)), 4)})

    result = {
        "model": LOCAL_MODEL_ID,
        "threads": args.threads,
        "texts": len(texts),
        "source": source,
        "mean_chars": round(sum(map(len, texts)) / len(texts), 1),
        "load_seconds": round(load_s, 3),
        "sentences_per_second": rates,
        "pairs": cosines,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    log.info("%s, %d threads, %d texts (%s)", LOCAL_MODEL_ID, args.threads, len(texts), source)
    log.info("load %.2fs", load_s)
    log.info("%8s %14s", "batch", "sentences/s")
    for batch, rate in rates.items():
        log.info("%8s %14.1f", batch, rate)
    for c in cosines:
        log.info("%.3f  %r ~ %r", c["cosine"], c["a"], c["b"])
    log.info("wrote %s", args.out)


if __name__ == "__main__":
    main()
