"""Forget benchmark: how long an erase takes, the rewrite of the database
included, and what the rest of the bot feels meanwhile.

    .venv/bin/python bench/forget.py                  # 20,000 messages, local embeddings
    .venv/bin/python bench/forget.py --messages 2000  # short run

Builds a guild of ``--messages`` messages (texts of the real export in
tests/data) from eight members through the default offline stack (rule
extractor, local MiniLM embeddings unless ``--embeddings none``), then forgets
the member with the most messages while another task keeps ingesting a
message every 10 ms and a third keeps searching. Reports the forget's wall
time and the part of it spent rewriting the file (``memory.store.erase``),
the size of the database and its WAL before and after, the longest acknowledgement of the concurrent ingest and
the longest event-loop stall (a 5 ms ticker's overshoot). Writes
bench/results/forget.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import EXPORT, export_texts, loadavg, print_table, write_json
from memory.clock import iso, system_clock
from memory.config import EmbeddingConfig, MemoryConfig
from memory.engine import Memory
from memory.extract.rules.extractor import RuleExtractor
from memory.models import IncomingMessage

GUILD = "900000000000000001"
CHANNEL = "900000000000000002"
AUTHORS = 8


def _message(i: int, author: int, text: str) -> IncomingMessage:
    return IncomingMessage(
        id=str(10**17 + i),
        guild_id=GUILD,
        channel_id=CHANNEL,
        author_id=str(910000000000000000 + author),
        author_name=f"member{author}",
        content=text,
        created_at=iso(system_clock()),
    )


def _longest(spans: list[tuple[float, float]], after: float = 0.0) -> float:
    """The longest span (ms) of those that end after ``after``."""
    return round(max((e - s for s, e in spans if e > after), default=0.0) * 1000, 1)


def _files_mib(db_path: Path) -> float:
    """The database file and its WAL."""
    return sum(p.stat().st_size for p in db_path.parent.glob(db_path.name + "*")) / 2**20


async def run(n: int, embeddings: str, data_dir: Path) -> dict[str, Any]:
    texts = [t for _, t in export_texts(EXPORT)]
    cfg = MemoryConfig.for_data_dir(data_dir, embedding=EmbeddingConfig(provider=embeddings))
    mem = await Memory.open(cfg, extractor=RuleExtractor())
    try:
        started = time.perf_counter()
        for i in range(n):
            # Member 0 writes a third of the messages: the one forgotten.
            author = 0 if i % 3 == 0 else 1 + i % (AUTHORS - 1)
            await mem.ingest_message(_message(i, author, texts[i % len(texts)]), backpressure=True)
        await mem.settle(timeout=3600)
        build_s = time.perf_counter() - started
        db_mib = _files_mib(cfg.db_path)

        stop = asyncio.Event()
        acks: list[tuple[float, float]] = []  # (start, end)
        stalls: list[tuple[float, float]] = []
        searches = 0

        async def ingest() -> None:
            i = n
            while not stop.is_set():
                t = time.perf_counter()
                await mem.ingest_message(_message(i, 1, texts[i % len(texts)]), backpressure=True)
                acks.append((t, time.perf_counter()))
                i += 1
                await asyncio.sleep(0.01)

        async def search() -> None:
            nonlocal searches
            while not stop.is_set():
                await mem.search(GUILD, "papyrus scroll ink", scope="all")
                searches += 1

        async def tick() -> None:
            while not stop.is_set():
                t = time.perf_counter()
                await asyncio.sleep(0.005)
                stalls.append((t, time.perf_counter() - 0.005))

        tasks = [asyncio.create_task(f()) for f in (ingest, search, tick)]
        await asyncio.sleep(0.5)
        started = time.perf_counter()
        report = await mem.forget(GUILD, str(910000000000000000))
        ended = time.perf_counter()
        forget_s = ended - started
        stop.set()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return {
            "messages": n,
            "embeddings": embeddings,
            "build_s": round(build_s, 1),
            "db_mib_before": round(db_mib, 1),
            "db_mib_after": round(_files_mib(cfg.db_path), 1),
            "erased_messages": report.messages,
            "erased_facts": report.facts,
            "forget_s": round(forget_s, 2),
            "compaction_s": round(report.compaction_s, 2),
            "max_ack_ms": _longest(acks),
            # The rewrite is the last step of the forget; before it, the erase
            # transaction itself (acknowledgements wait for it too).
            "max_ack_in_compaction_ms": _longest(acks, ended - report.compaction_s),
            "acks_during_run": len(acks),
            "max_loop_stall_ms": _longest(stalls),
            "max_loop_stall_in_compaction_ms": _longest(stalls, ended - report.compaction_s),
            "searches_during_run": searches,
        }
    finally:
        await mem.close()


async def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--embeddings", choices=("local", "none"), default="local")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="guildlore-bench-forget-") as tmp:
        result = await run(args.messages, args.embeddings, Path(tmp))
    result["machine"] = {"loadavg": loadavg()}
    print_table(list(result)[:-1], [[v for k, v in result.items() if k != "machine"]])
    print("wrote", write_json("forget", result, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
