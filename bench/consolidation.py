"""Consolidation cost: one daily run over a guild of N facts, offline and
with an LLM (the fake OpenAI server through the real ``openai`` client).

    .venv/bin/python bench/consolidation.py            # 1,000 and 5,000 facts
    .venv/bin/python bench/consolidation.py --quick    # 500 facts

Facts come from the real export's messages (``--export``, default the one
in tests/data): each author a subject, "<author> said: <message>" facts,
written as an import writes them (the store's upsert, past the write
decision), all changed in the last 72 hours so the whole guild is the
candidate pool. One fact in twenty is an exact duplicate of another (other
case and punctuation) and one in twenty a second value of a single-valued
slot ("<author> lives in …"): the offline run must find those. The LLM run
embeds the facts with the local model and asks the fake server, which
answers "different" for every pair, so both runs change the same facts.

Reported per size and mode: the run's wall time, the candidates, pairs
checked (at most 200 a run), changes, LLM calls and LLM calls per 1,000
facts. Writes bench/results/consolidation.json and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import EXPORT, cycle, export_texts, loadavg, print_table, write_json
from memory.clock import iso
from memory.config import EmbeddingConfig, MemoryConfig
from memory.engine import Memory
from memory.roles.consolidation.llm import PairChecker
from memory.store.facts import upsert_fact
from tests.fakeopenai import FakeOpenAI

GUILD = "900000000000000001"
CITIES = ("Paris", "Lyon", "Berlin", "Oslo", "Porto", "Turin")


def rows(n: int, export: Path) -> list[tuple[str, str]]:
    """(subject, fact) rows: said-facts, 5% duplicates, 5% slot values."""
    texts = cycle(export_texts(export))
    out: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    while len(out) < n:
        author, content = next(texts)
        k = len(out)
        if k % 20 == 7 and out:
            subject, fact = out[k // 2]
            row = (subject, fact.upper().rstrip(".") + "!")
        elif k % 20 == 13:
            row = (author, f"{author} lives in {CITIES[k % len(CITIES)]}.")
        else:
            row = (author, f"{author} said: {content[:180]} (#{k})")
        if row not in seen:
            seen.add(row)
            out.append(row)
    return out


def verdict_all_different(body: dict[str, Any]) -> str:
    pairs = body["messages"][1]["content"].count("Pair ")
    items = [{"pair": n, "verdict": "different", "reason": "x"} for n in range(1, pairs + 1)]
    return json.dumps({"verdicts": items})


async def one(n: int, llm: bool, export: Path, tmp: Path) -> dict[str, Any]:
    data = tmp / f"{n}-{'llm' if llm else 'offline'}"
    shutil.rmtree(data, ignore_errors=True)
    cfg = MemoryConfig.for_data_dir(data)
    if not llm:
        cfg = MemoryConfig.for_data_dir(data, embedding=EmbeddingConfig(provider="none"))
    now = datetime.now(UTC)
    mem = await Memory.open(cfg, clock=lambda: now, ingest=False)
    fake = FakeOpenAI()
    fake.chat_handler = verdict_all_different
    await fake.start()
    client = fake.client()
    try:
        at = iso(now - timedelta(hours=1))

        def write(con: Any, batch: list[tuple[str, str]]) -> None:
            for subject, fact in batch:
                upsert_fact(
                    con,
                    guild_id=GUILD,
                    channel_id=None,
                    subject=subject,
                    fact=fact,
                    fact_type="other",
                    evidence=None,
                    source_message_id=None,
                    confidence=0.6,
                    now=at,
                    actor="import",
                    observed_at=at,
                )

        facts = rows(n, export)
        for start in range(0, len(facts), 500):
            await mem.db.write(write, facts[start : start + 500])
        embed_s = 0.0
        if llm:
            began = time.perf_counter()
            ids = await mem.db.read(
                lambda con: [r[0] for r in con.execute("SELECT id FROM memory_facts")]
            )
            for start in range(0, len(ids), 256):
                await mem.embeddings.embed_facts(GUILD, ids[start : start + 256])
            embed_s = time.perf_counter() - began
        checker = PairChecker(client, "fake-model") if llm else None
        began = time.perf_counter()
        done = await mem.consolidation.run(GUILD, checker=checker)
        took = time.perf_counter() - began
        rep = done.report
        return {
            "facts": n,
            "mode": rep["mode"],
            "run_s": round(took, 3),
            "embed_s": round(embed_s, 1),
            "candidates": rep["candidates"],
            "pairs": rep["pairs"],
            "checked": rep["checked"],
            "changes": len(rep.get("applied", [])),
            "llm_calls": rep["llm_calls"],
            "llm_calls_per_1000_facts": round(rep["llm_calls"] * 1000 / n, 2),
        }
    finally:
        await client.close()
        await fake.close()
        await mem.close()


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--export", type=Path, default=EXPORT)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    sizes = [500] if args.quick else [1000, 5000]
    tmp = Path(tempfile.mkdtemp(prefix="consolidation-bench-"))
    results = []
    try:
        for n in sizes:
            for llm in (False, True):
                results.append(await one(n, llm, args.export, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_table(list(results[0]), [list(r.values()) for r in results])
    path = write_json(
        "consolidation", {"results": results, "machine": {"loadavg": loadavg()}}, args.out
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
