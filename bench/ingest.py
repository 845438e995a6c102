"""Ingest benchmark: acknowledgement latency during a burst, and sustained
throughput with a slow LLM extractor.

    .venv/bin/python bench/ingest.py            # full run (~3 min)
    .venv/bin/python bench/ingest.py --quick    # short smoke run

Part 1 — a burst of 5,000 messages (texts of the real export), each submitted
as its own task the way discord.py dispatches gateway events, through the
default offline stack (rule extractor, local embeddings). Ack = the time
``ingest_message`` takes to return: the message is durable in SQLite and queued.

Part 2 — sustained load at a fixed rate with the LLM extractor talking to the
local fake OpenAI server (run in its own thread and loop) at 0 ms, 200 ms and
1 s latency; reports processed rate, drops, queue depth and extraction calls.
Writes bench/results/ingest.json and prints tables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import cycle, export_texts, percentile, print_table, write_json
from memory.clock import iso, system_clock
from memory.config import EmbeddingConfig, IngestConfig, MemoryConfig
from memory.extract import LLMExtractor, RuleExtractor
from memory.models import IncomingMessage
from memory.service import Memory
from tests.fakeopenai import FakeOpenAI

GUILD = "900000000000000001"
CHANNELS = [str(910000000000000000 + i) for i in range(4)]


class FakeServerThread:
    """The fake OpenAI server on its own loop, so it does not compete with the
    engine's loop (as a real LLM server would not)."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.loop = asyncio.new_event_loop()
        self.fake = FakeOpenAI()
        self.fake.latency_s = latency_s
        self.fake.chat_handler = _echo_facts
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.fake.start(), self.loop).result(10)
        return self.fake

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.fake.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


def _echo_facts(body: dict[str, Any]) -> str:
    """A batch answer with one grounded fact per message, as a real model might give."""
    user = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")
    results = []
    for i, line in enumerate(user.splitlines()):
        if line[:1].isdigit() and ". " in line:
            idx = int(line.split(".")[0]) if line.split(".")[0].isdigit() else i + 1
            words = line.split(". ", 1)[1].split()[:8]
            if len(words) >= 3:
                fact = "They said " + " ".join(words).rstrip(".!?,") + "."
                results.append(
                    {
                        "index": idx,
                        "facts": [
                            {"fact": fact, "type": "other", "confidence": 0.6, "evidence": None}
                        ],
                    }
                )
    return json.dumps({"results": results, "facts": []})


def _message(i: int, author: str, text: str, channel: str) -> IncomingMessage:
    return IncomingMessage(
        id=str(10**17 + i),
        guild_id=GUILD,
        channel_id=channel,
        author_id=str(920000000000000000 + (hash(author) % 1000)),
        author_name=author,
        content=text,
        created_at=iso(system_clock()),
    )


async def burst(n: int, data_dir: Path) -> dict[str, Any]:
    texts = cycle(export_texts())
    mem = await Memory.open(MemoryConfig.for_data_dir(data_dir), extractor=RuleExtractor())
    acks: list[float] = []

    async def one(i: int) -> None:
        author, text = next(texts)
        started = time.perf_counter()
        await mem.ingest_message(_message(i, author, text, CHANNELS[i % len(CHANNELS)]))
        acks.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(one(i)))
        await asyncio.sleep(0)  # one gateway event per loop turn
    await asyncio.gather(*tasks)
    submit_s = time.perf_counter() - started
    counters = mem.counters()
    await mem.settle(600)
    done_s = time.perf_counter() - started
    counters_end = mem.counters()
    await mem.close()
    return {
        "messages": n,
        "ack_ms": {
            "p50": percentile(acks, 50),
            "p99": percentile(acks, 99),
            "max": max(acks),
        },
        "submit_seconds": submit_s,
        "dropped_during_burst": counters["ingest_dropped"],
        "processed": counters_end["ingest_processed"],
        "all_processed_seconds": done_s,
        "facts_added": counters_end["facts_added"],
    }


async def sustained(
    latency_s: float, rate: float, seconds: float, data_dir: Path
) -> dict[str, Any]:
    texts = cycle(export_texts())
    with FakeServerThread(latency_s) as fake:
        client = fake.client(timeout=30.0)
        extractor = LLMExtractor(client, "fake-extractor", timeout_s=30.0)
        cfg = MemoryConfig.for_data_dir(
            data_dir, embedding=EmbeddingConfig(provider="local"), ingest=IngestConfig()
        )
        mem = await Memory.open(cfg, extractor=extractor)
        max_depth = 0
        acks: list[float] = []
        started = time.perf_counter()
        i = 0
        while (elapsed := time.perf_counter() - started) < seconds:
            target = int(elapsed * rate)
            while i < target:
                author, text = next(texts)
                t0 = time.perf_counter()
                await mem.ingest_message(_message(i, author, text, CHANNELS[i % len(CHANNELS)]))
                acks.append((time.perf_counter() - t0) * 1000)
                i += 1
            max_depth = max(max_depth, mem.queue.depth)
            await asyncio.sleep(0.01)
        sent_s = time.perf_counter() - started
        processed_in_window = mem.counters()["ingest_processed"]
        await mem.settle(120)
        c = mem.counters()
        chat_calls = len(fake.chat_requests())
        await mem.close()
        await client.close()
    return {
        "llm_latency_ms": latency_s * 1000,
        "offered_rate": rate,
        "seconds": seconds,
        "sent": i,
        "processed_in_window": processed_in_window,
        "processed_rate": processed_in_window / sent_s,
        "processed_total": c["ingest_processed"],
        "dropped": c["ingest_dropped"],
        "max_queue_depth": max_depth,
        "extract_calls": chat_calls,
        "messages_per_call": (c["ingest_processed"] / chat_calls) if chat_calls else None,
        "ack_ms": {"p50": percentile(acks, 50), "p99": percentile(acks, 99)},
    }


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short run (smoke test)")
    ap.add_argument("--burst", type=int, default=5000)
    ap.add_argument("--rate", type=float, default=30.0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    plan = [(0.0, 20.0), (0.2, 20.0), (1.0, 120.0)]
    if args.quick:
        plan = [(0.0, 5.0), (1.0, 10.0)]
        args.burst = min(args.burst, 1000)
    with tempfile.TemporaryDirectory() as tmp:
        b = await burst(args.burst, Path(tmp) / "burst")
        runs = [
            await sustained(lat, args.rate, secs, Path(tmp) / f"s{i}")
            for i, (lat, secs) in enumerate(plan)
        ]
    print(f"\nBurst of {b['messages']} messages (offline stack)")
    print_table(
        ["ack p50 ms", "ack p99 ms", "ack max ms", "dropped in burst", "all processed after s"],
        [
            [
                b["ack_ms"]["p50"],
                b["ack_ms"]["p99"],
                b["ack_ms"]["max"],
                b["dropped_during_burst"],
                b["all_processed_seconds"],
            ]
        ],
    )
    print(f"\nSustained {args.rate:g} msg/s with the LLM extractor (fake server)")
    print_table(
        ["LLM latency ms", "seconds", "sent", "processed/s", "dropped", "max depth", "msgs/call"],
        [
            [
                r["llm_latency_ms"],
                r["seconds"],
                r["sent"],
                r["processed_rate"],
                r["dropped"],
                r["max_queue_depth"],
                r["messages_per_call"],
            ]
            for r in runs
        ],
    )
    path = write_json("ingest", {"burst": b, "sustained": runs}, args.json)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
