"""Ingest benchmark: acknowledgement latency during a burst, and sustained
throughput with a slow LLM extractor.

    .venv/bin/python bench/ingest.py            # full run (~7 min, LLM decision included)
    .venv/bin/python bench/ingest.py --quick    # short smoke run
    .venv/bin/python bench/ingest.py --part burst --backends sqlite,postgresql

Part 1 — a burst of 5,000 messages (texts of the real export, ``--export``,
default the one in tests/data), each submitted
as its own task the way discord.py dispatches gateway events, through the
default offline stack (rule extractor, local MiniLM embeddings). Ack = the
time ``ingest_message`` takes to return: the message is durable in SQLite and
queued. Overflow beyond the 400-job queue is expected here (by design the
oldest queued job is dropped, its row stays and is replayed); the run reports
how many, and how long until every message was processed anyway.

Part 2 — sustained load at 30 msg/s with the LLM extractor talking to the
fake OpenAI server (tests/fakeopenai.py, through the real ``openai`` client;
run in its own thread and loop, as a real LLM server would not share ours) at
0 ms, 200 ms and 1 s latency — the 1 s run lasts 2 minutes. Reports the
processed rate over the steady window (after a warm-up of a few seconds, as
the first LLM round trips are still in flight), drops, queue depth, LLM calls
and messages per call, and the time from acknowledgement to processed.

Part 3 (``--part decision``) — the same sustained load with the LLM write
decision on as well (one more call per batch whose authors already have
facts, against the same fake server at 1 s latency, for ``--seconds``,
default 2 minutes): reports ack p99, drops, the backlog (queue depth and jobs
in flight) at the end of the window, the extraction and decision calls, and
how many candidates the offline rules decided because a decision call failed
or answered nothing usable. Parts 1 and 2 run with the LLM decision off, so
they measure extraction alone.

All parts also sample the size of the database's ``-wal`` file every 10 ms
and report its peak beside the database's size at the end: the WAL must stay
bounded under sustained ingest (``memory.db.sqlite.database``).

``--backends sqlite,postgresql`` runs the chosen parts once per backend, each
engine on a new database of a PostgreSQL started for the run (the pgserver
wheel, ``bench/_pg.py``; no WAL file to sample there), prints them side by
side and writes bench/results/ingest-backends.json with the ack p99 of every
part per backend.

Targets: ack p99 ≤ 5 ms; at 1 s LLM latency, 30 msg/s sustained for
2 minutes with zero drops (with the LLM decision on too). Writes bench/results/ingest.json and prints tables.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (
    EXPORT,
    cycle,
    export_message,
    export_texts,
    loadavg,
    percentile,
    print_table,
    write_json,
)
from bench._pg import database_url, parse_backends, postgres_if
from bench._tidy_load import TIDY_BUDGETS, episode_loop, set_budgets, tidy_reply
from memory.config import EmbeddingConfig, IngestConfig, MemoryConfig
from memory.engine import Memory
from memory.extract.llm import LLMExtractor
from memory.extract.rules.extractor import RuleExtractor
from tests.fakeopenai import FakeOpenAI, echo_facts_reply

GUILD = "900000000000000001"
CHANNELS = [str(910000000000000000 + i) for i in range(4)]
WARMUP_S = 5.0


class WalSampler:
    """Samples the size of a database's WAL file on a thread of its own."""

    def __init__(self, db_path: Path, interval_s: float = 0.01) -> None:
        self.db_path = db_path
        self.wal = Path(f"{db_path}-wal")
        self.interval_s = interval_s
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wal-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval_s)
        self._sample()

    def _sample(self) -> None:
        try:
            self.peak_bytes = max(self.peak_bytes, self.wal.stat().st_size)
        except FileNotFoundError:
            pass

    def start(self) -> WalSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def result(self) -> dict[str, float]:
        try:
            db_bytes = self.db_path.stat().st_size
        except FileNotFoundError:
            db_bytes = 0
        return {"wal_peak_mib": self.peak_bytes / 2**20, "db_mib": db_bytes / 2**20}


class FakeServerThread:
    """The fake OpenAI server on its own loop, so it does not compete with the
    engine's loop (as a real LLM server would not)."""

    def __init__(self, latency_s: float, handler: Callable[[dict[str, Any]], str]) -> None:
        self.latency_s = latency_s
        self.loop = asyncio.new_event_loop()
        self.fake = FakeOpenAI()
        self.fake.latency_s = latency_s
        self.fake.chat_handler = handler
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.fake.start(), self.loop).result(10)
        return self.fake

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.fake.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


def _wal_sampler(cfg: MemoryConfig) -> WalSampler | None:
    """A started sampler of the SQLite file's WAL; None on PostgreSQL."""
    return WalSampler(cfg.db_path).start() if cfg.database_url is None else None


def _wal_result(sampler: WalSampler | None) -> dict[str, float | None]:
    if sampler is None:
        return {"wal_peak_mib": None, "db_mib": None}
    return dict(sampler.result())


async def burst(
    n: int, data_dir: Path, export: Path, database_url: str | None = None
) -> dict[str, Any]:
    texts = cycle(export_texts(export))
    cfg = MemoryConfig.for_data_dir(data_dir, database_url=database_url)
    sampler = _wal_sampler(cfg)
    mem = await Memory.open(cfg, extractor=RuleExtractor())
    # Load the embedding model first: a bot loads it at start-up, not mid-burst.
    await mem.embeddings.warm_up(GUILD)
    # And the guild's settings: on a cold cache each of the first few thousand
    # messages of the burst reads them (nothing coalesces concurrent misses)
    # before it is even persisted — a start-up effect, not the steady state.
    await mem.guilds.settings(GUILD)
    acks: list[float] = []

    async def one(i: int) -> None:
        author, text = next(texts)
        started = time.perf_counter()
        await mem.ingest_message(
            export_message(i, author, text, GUILD, CHANNELS[i % len(CHANNELS)])
        )
        acks.append((time.perf_counter() - started) * 1000)

    cpu0 = time.process_time()
    started = time.perf_counter()
    # Like a gateway client, keep only the handlers still running (a finished
    # task's frame is garbage, not 5,000 live objects for the collector to walk).
    running: set[asyncio.Task[None]] = set()
    for i in range(n):
        task = asyncio.create_task(one(i))
        running.add(task)
        task.add_done_callback(running.discard)
        await asyncio.sleep(0)  # one gateway event per loop turn
    while running:
        await asyncio.gather(*running)
    submit_s = time.perf_counter() - started
    counters = mem.admin.counters()
    # Dropped messages are replayed once the burst has passed: wait for all.
    deadline = time.perf_counter() + 900
    # A poll: "all processed" spans the queue and the replay of dropped rows.
    while mem.admin.counters()["ingest_processed"] < n and time.perf_counter() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    queue_ok = await mem.drain(max(0.1, deadline - time.perf_counter()))
    processed_s = time.perf_counter() - started
    embed_ok = await mem.settle(900)
    done_s = time.perf_counter() - started
    counters_end = mem.admin.counters()
    cpu_s = time.process_time() - cpu0
    if sampler is not None:
        sampler.stop()  # before close: its checkpoint truncates the WAL
    await mem.close()
    return {
        "backend": "sqlite" if database_url is None else "postgresql",
        "messages": n,
        "ack_ms": {
            "p50": percentile(acks, 50),
            "p90": percentile(acks, 90),
            "p99": percentile(acks, 99),
            "max": max(acks),
        },
        "submit_seconds": submit_s,
        "dropped_during_burst": counters["ingest_dropped"],
        "dropped_total": counters_end["ingest_dropped"],
        "processed": counters_end["ingest_processed"],
        "all_processed_seconds": processed_s if queue_ok else None,
        "all_embedded_seconds": done_s if embed_ok else None,
        "facts_added": counters_end["facts_added"],
        "process_cpu_seconds": cpu_s,
        **_wal_result(sampler),
    }


async def sustained(
    latency_s: float,
    rate: float,
    seconds: float,
    data_dir: Path,
    export: Path,
    *,
    llm_decision: bool = False,
    tidy: bool = False,
    database_url: str | None = None,
) -> dict[str, Any]:
    texts = cycle(export_texts(export))
    handler = tidy_reply if tidy else echo_facts_reply
    with FakeServerThread(latency_s, handler) as fake:
        client = fake.client(timeout=30.0)
        extractor = LLMExtractor(client, "fake-extractor", timeout_s=30.0)
        cfg = MemoryConfig.for_data_dir(
            data_dir,
            embedding=EmbeddingConfig(provider="local"),
            ingest=IngestConfig(llm_decision=llm_decision),
            database_url=database_url,
        )
        sampler = _wal_sampler(cfg)
        mem = await Memory.open(cfg, extractor=extractor)
        await mem.embeddings.warm_up(GUILD)
        if tidy:
            await set_budgets(mem, GUILD)
        await mem.guilds.settings(GUILD)
        episodes: list[int] = []
        stop_episodes = asyncio.Event()
        episode_job = (
            asyncio.create_task(episode_loop(mem, episodes, stop_episodes)) if tidy else None
        )
        max_depth = 0
        acks: list[float] = []
        latencies: list[float] = []  # ack → processed, seconds

        def finished(t_ack: float) -> Any:
            return lambda _fut: latencies.append(time.perf_counter() - t_ack)

        started = time.perf_counter()
        processed_at_warmup: int | None = None
        i = 0
        while (elapsed := time.perf_counter() - started) < seconds:
            target = int(elapsed * rate)
            while i < target:
                author, text = next(texts)
                t0 = time.perf_counter()
                out = await mem.ingest_message(
                    export_message(i, author, text, GUILD, CHANNELS[i % len(CHANNELS)])
                )
                t1 = time.perf_counter()
                acks.append((t1 - t0) * 1000)
                out.done.add_done_callback(finished(t1))
                i += 1
            if processed_at_warmup is None and elapsed >= WARMUP_S:
                processed_at_warmup = mem.admin.counters()["ingest_processed"]
            max_depth = max(max_depth, mem.queue.depth)
            await asyncio.sleep(0.01)
        sent_s = time.perf_counter() - started
        c_window = mem.admin.counters()
        backlog = mem.queue.depth + mem.queue.in_flight
        stop_episodes.set()
        await mem.drain(120)
        drained_s = time.perf_counter() - started - sent_s
        if episode_job is not None:
            await episode_job
        await mem.settle(300)
        budget_stats = mem.upkeep.budgets.stats
        usage = await mem.upkeep.usage(GUILD)
        c = mem.admin.counters()
        requests = fake.chat_requests()
        decision_calls = sum(
            1
            for r in requests
            if (r.body.get("response_format") or {}).get("json_schema", {}).get("name")
            == "memory_decisions"
        )
        chat_calls = len(requests) - decision_calls
        max_in_flight = fake.max_in_flight
        if sampler is not None:
            sampler.stop()
        await mem.close()
        await client.close()
    steady = c_window["ingest_processed"] - (processed_at_warmup or 0)
    return {
        "backend": "sqlite" if database_url is None else "postgresql",
        "llm_latency_ms": latency_s * 1000,
        "llm_decision": llm_decision,
        "episodes_and_budgets": tidy,
        "budgets": TIDY_BUDGETS if tidy else None,
        "episode_runs": len(episodes),
        "episodes_created": sum(episodes),
        "compactions": budget_stats.compactions,
        "compaction_llm_calls": budget_stats.llm_calls,
        "compaction_llm_applied": budget_stats.llm_applied,
        "compaction_fallbacks": {k: v for k, v in budget_stats.fallbacks.items() if v},
        "archived_by_budgets": budget_stats.archived,
        "over_budget_at_end": [
            f"{s.kind}:{s.key or ''} {s.used}/{s.budget}" for s in usage.scopes if s.used > s.budget
        ],
        "offered_rate": rate,
        "seconds": seconds,
        "sent": i,
        "processed_in_window": c_window["ingest_processed"],
        "processed_rate": steady / (sent_s - WARMUP_S),
        "processed_total": c["ingest_processed"],
        "drain_after_window_s": drained_s,
        "dropped": c["ingest_dropped"],
        "max_queue_depth": max_depth,
        "backlog_at_window_end": backlog,
        "decision_calls": decision_calls,
        "decision_errors": c["decision_llm_errors"],
        "decision_fallbacks": c["decision_llm_fallbacks"],
        "decisions": {k: c[f"decision_{k}"] for k in ("adds", "noops", "updates", "supersedes")},
        "extract_calls": chat_calls,
        "max_concurrent_calls": max_in_flight,
        "messages_per_call": (c["ingest_processed"] / chat_calls) if chat_calls else None,
        "ack_ms": {"p50": percentile(acks, 50), "p99": percentile(acks, 99), "max": max(acks)},
        "ack_to_processed_s": {
            "p50": percentile(latencies, 50),
            "p99": percentile(latencies, 99),
            "max": max(latencies) if latencies else None,
        },
        **_wal_result(sampler),
    }


async def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short run (smoke test)")
    ap.add_argument("--burst", type=int, default=5000)
    ap.add_argument("--rate", type=float, default=30.0)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument(
        "--part", choices=("all", "burst", "sustained", "decision", "tidy"), default="all"
    )
    ap.add_argument("--seconds", type=float, default=120.0, help="length of the LLM-decision run")
    ap.add_argument("--export", type=Path, default=EXPORT, help="a DiscordChatExporter JSON file")
    ap.add_argument(
        "--backends",
        type=parse_backends,
        default=["sqlite"],
        help="comma-separated: sqlite, postgresql (a pgserver PostgreSQL on a temporary dir)",
    )
    args = ap.parse_args()
    # One warning per dropped message would flood the terminal; they are counted.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("memory.ingest.queue").setLevel(logging.ERROR)
    plan = [(0.0, 20.0), (0.2, 20.0), (1.0, 120.0)]
    if args.quick:
        plan = [(0.0, 8.0), (1.0, 12.0)]
        args.burst = min(args.burst, 1000)
    load_before = loadavg()
    decision_seconds = 12.0 if args.quick else args.seconds
    bursts: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    versions: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp, postgres_if(args.backends) as server:
        if server is not None:
            versions["postgresql"] = server.version()
        for backend in args.backends:
            here = Path(tmp) / backend

            def url(backend: str = backend) -> str | None:
                return database_url(backend, server)  # a new database per engine

            if args.part in ("all", "burst"):
                bursts.append(await burst(args.burst, here / "burst", args.export, url()))
            if args.part in ("all", "sustained"):
                for i, (lat, secs) in enumerate(plan):
                    runs.append(
                        await sustained(
                            lat, args.rate, secs, here / f"s{i}", args.export, database_url=url()
                        )
                    )
            if args.part in ("all", "decision", "tidy"):
                runs.append(
                    await sustained(
                        1.0,
                        args.rate,
                        decision_seconds,
                        here / args.part,
                        args.export,
                        llm_decision=True,
                        tidy=args.part == "tidy",
                        database_url=url(),
                    )
                )
    load_after = loadavg()
    if bursts:
        _print_burst(bursts)
    if runs:
        _print_sustained(runs, args.rate)
    if any(r["episodes_and_budgets"] for r in runs):
        _print_tidy([r for r in runs if r["episodes_and_budgets"]])
    print(
        f"\nload average before {load_before}, after {load_after} "
        f"({len(os.sched_getaffinity(0))} cores)"
    )
    payload: dict[str, Any] = {
        "burst": bursts[0] if bursts else None,
        "sustained": runs,
        "load_average": {"before": load_before, "after": load_after},
    }
    name = "ingest"
    if args.backends != ["sqlite"]:
        name = "ingest-backends"
        payload = {
            "backends": args.backends,
            "server_versions": versions,
            "ack_p99_ms": _ack_p99(bursts, runs),
            **payload,
            "burst": bursts,
        }
    path = write_json(name, payload, args.json)
    print(f"\nwrote {path}")
    return 0


def _ack_p99(bursts: list[dict[str, Any]], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per backend: the burst's ack p99 and each sustained run's, side by side."""
    out: dict[str, Any] = {}
    for b in bursts:
        out.setdefault(b["backend"], {})["burst"] = b["ack_ms"]["p99"]
    for r in runs:
        label = f"sustained {r['llm_latency_ms']:g} ms" + (" decision" if r["llm_decision"] else "")
        out.setdefault(r["backend"], {})[label] = r["ack_ms"]["p99"]
    return out


def _print_burst(bursts: list[dict[str, Any]]) -> None:
    print(f"\nBurst of {bursts[0]['messages']} messages (offline stack)")
    print_table(
        [
            "backend",
            "ack p50 ms",
            "ack p99 ms",
            "ack max ms",
            "dropped in burst",
            "all processed after s",
            "all embedded after s",
            "WAL peak MiB",
            "db MiB",
        ],
        [
            [
                b["backend"],
                b["ack_ms"]["p50"],
                b["ack_ms"]["p99"],
                b["ack_ms"]["max"],
                b["dropped_during_burst"],
                b["all_processed_seconds"],
                b["all_embedded_seconds"],
                b["wal_peak_mib"],
                b["db_mib"],
            ]
            for b in bursts
        ],
    )


def _print_tidy(runs: list[dict[str, Any]]) -> None:
    print("\nWith episodes and budgets on")
    print_table(
        [
            "episode runs",
            "episodes",
            "compactions",
            "compaction LLM calls",
            "applied",
            "fallbacks",
            "archived by budgets",
            "over budget at end",
        ],
        [
            [
                r["episode_runs"],
                r["episodes_created"],
                r["compactions"],
                r["compaction_llm_calls"],
                r["compaction_llm_applied"],
                r["compaction_fallbacks"] or "none",
                r["archived_by_budgets"],
                ", ".join(r["over_budget_at_end"]) or "none",
            ]
            for r in runs
        ],
    )


def _print_sustained(runs: list[dict[str, Any]], rate: float) -> None:
    print(f"\nSustained {rate:g} msg/s with the LLM extractor (fake server)")
    print_table(
        [
            "backend",
            "LLM latency ms",
            "LLM decision",
            "seconds",
            "sent",
            "processed/s",
            "dropped",
            "max depth",
            "extract calls",
            "decision calls",
            "rules in its place",
            "backlog at end",
            "msgs/call",
            "max conc.",
            "ack p99 ms",
            "ack→done p99 s",
            "WAL peak MiB",
            "db MiB",
        ],
        [
            [
                r["backend"],
                r["llm_latency_ms"],
                "on" if r["llm_decision"] else "off",
                r["seconds"],
                r["sent"],
                r["processed_rate"],
                r["dropped"],
                r["max_queue_depth"],
                r["extract_calls"],
                r["decision_calls"],
                r["decision_fallbacks"],
                r["backlog_at_window_end"],
                r["messages_per_call"],
                r["max_concurrent_calls"],
                r["ack_ms"]["p99"],
                r["ack_to_processed_s"]["p99"],
                r["wal_peak_mib"],
                r["db_mib"],
            ]
            for r in runs
        ],
    )


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
