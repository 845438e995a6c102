"""Sustained ingest throughput on one PostgreSQL database: one engine process
against two engine processes, each owning half of the guilds, with the same
extraction workers per process; and one process with twice the workers.

    .venv/bin/python bench/processes.py [--runs 1x4,2x4,1x8] [--guilds 8] [--channels 2]
                                        [--seconds 60] [--latency 1.0] [--rate 200]
                                        [--embeddings local]

``--runs``: the configurations, each PROCESSESxWORKERS (extraction workers,
``IngestConfig.workers``, in every process).

The extractor is the LLM one, talking to the fake OpenAI server
(tests/fakeopenai.py through the real ``openai`` client) with ``--latency``
seconds per call; the server runs in this (the parent) process on a loop of
its own, shared by every engine as one LLM service would be. Each engine is a
real OS process (``multiprocessing``, spawn), with the same ``MemoryConfig``:
default ``IngestConfig`` (batches of up to 16 messages of one channel, a
400-job queue) but the run's extraction workers, with the LLM write decision
off, so one call per batch is all the LLM work; embeddings as ``--embeddings``
(the bundled MiniLM in each process by default).

Per configuration (1 process, then 2) a new database on a PostgreSQL started
for the run (the pgserver wheel, ``bench/_pg.py``). ``--rounds N`` runs the
configurations N times in turn and reports each one's median: on a shared
machine the load drifts during a run, and taking turns spreads the drift
over every configuration instead of handing it to the last one. The guilds are dealt out:
one process owns all of them, or each of two owns every other one. Every
process offers its own guilds' messages (texts of the real export, round robin
over its guilds' channels) at its share of ``--rate`` msg/s — above what the
configuration can process — for ``--seconds``, through ``Memory.ingest_message``
(the live path), each message as its own task as a gateway client dispatches
events. The offer waits while the queue and the messages being acknowledged
fill the queue's capacity, so no message is dropped: a dropped message is
replayed from the database, and the replay reads every guild's unfinished
rows, not only the process's own.

Processed/s is measured from raw counts over one window: a task of its own
reads the process's ``ingest_processed`` counter and the clock at the end of
the warm-up (``--warmup``, default 5 s) and again at the end of the offer
(``--seconds``), and the rate is the counts' difference over the times'
difference. Both readings are in the JSON. (The offer loop used to read the
warm-up counter itself, and when it was held back waiting for queue room
past the window it read it at the end instead: 0.0 processed/s for a run
that processed 779 messages.)

Checks, per process: it processed only its own messages (its
``ingest_processed`` counter equals the outcomes of its own messages that
completed); and, in the database, every processed message belongs to a guild
of the process that offered it.

Target: two processes ≥ 1.6× the processed/s of one with the same workers.
Writes bench/results/processes.json.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing as mp
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make the project importable
    sys.path.insert(0, str(ROOT))

from bench._common import (  # noqa: E402
    EXPORT,
    export_message,
    export_texts,
    loadavg,
    percentile,
    print_table,
    write_json,
)
from bench._pg import PgServer, postgres_if  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "processes.json"
TARGET_RATIO = 1.6
DEFAULT_RUNS = "1x4,2x4,1x8"
WARMUP_S = 5.0
FIRST_GUILD = 930_000_000_000_000_000
START_TIMEOUT_S = 300.0


def guild_ids(n: int) -> list[str]:
    return [str(FIRST_GUILD + g) for g in range(n)]


def channel_ids(guild: str, n: int) -> list[str]:
    return [str(int(guild) + 10**16 + c) for c in range(n)]


def deal(guilds: list[str], processes: int) -> list[list[str]]:
    """Guilds dealt out in turn: process ``p`` owns every ``processes``-th one."""
    return [guilds[p::processes] for p in range(processes)]


@dataclass(frozen=True)
class Share:
    """What one engine process is given: its guilds, its rate, where to write."""

    index: int
    guilds: list[str]
    channels: int
    rate: float
    workers: int
    seconds: float
    warmup: float
    database_url: str
    data_dir: str
    llm_url: str
    embeddings: str
    export: str


# -- the engine process -----------------------------------------------------------------------


def engine_process(share: Share, ready: Any, go: Any, results: Any) -> None:
    """Entry point of an engine process: report ready, wait for ``go``, offer
    and process for the window, put its result on ``results``."""
    logging.basicConfig(level=logging.WARNING, format=f"[p{share.index}] %(name)s: %(message)s")
    try:
        out = asyncio.run(_engine(share, ready, go))
    except BaseException as exc:  # the parent must hear of it, not wait forever
        ready.put(share.index)
        out = {"index": share.index, "error": f"{type(exc).__name__}: {exc}"}
    results.put(out)


async def _engine(share: Share, ready: Any, go: Any) -> dict[str, Any]:
    import openai

    from memory.config import EmbeddingConfig, IngestConfig, MemoryConfig
    from memory.engine import Memory
    from memory.extract.llm import LLMExtractor
    from memory.models import IncomingMessage

    client = openai.AsyncOpenAI(
        api_key="bench", base_url=share.llm_url, max_retries=0, timeout=30.0
    )
    cfg = MemoryConfig.for_data_dir(
        Path(share.data_dir),
        embedding=EmbeddingConfig(provider=share.embeddings),
        ingest=IngestConfig(llm_decision=False, workers=share.workers),
        database_url=share.database_url,
    )
    mem = await Memory.open(cfg, extractor=LLMExtractor(client, "fake-extractor", 30.0))
    texts = export_texts(Path(share.export))
    slots = [(g, c) for g in share.guilds for c in channel_ids(g, share.channels)]
    try:
        for g in share.guilds:
            await mem.embeddings.warm_up(g)
            await mem.guilds.settings(g)
        ready.put(share.index)
        if not await asyncio.to_thread(go.wait, START_TIMEOUT_S):
            raise RuntimeError("the start signal never came")
        own_done = 0

        def finished(_fut: Any) -> None:
            nonlocal own_done
            own_done += 1

        capacity = cfg.ingest.queue_capacity
        acks: list[float] = []
        # Each message is its own task, as a gateway client dispatches events:
        # a slow acknowledgement delays that message, not the next one.
        acking: set[asyncio.Task[None]] = set()

        async def offer(msg: IncomingMessage) -> None:
            t0 = time.perf_counter()
            out = await mem.ingest_message(msg)
            acks.append((time.perf_counter() - t0) * 1000)
            if out.done is not None:
                out.done.add_done_callback(finished)

        started = time.perf_counter()

        async def reading(at_s: float) -> tuple[float, int]:
            """(seconds since the start, ``ingest_processed``), read at ``at_s``."""
            await asyncio.sleep(max(0.0, started + at_s - time.perf_counter()))
            return time.perf_counter() - started, int(mem.admin.counters()["ingest_processed"])

        at_warmup = asyncio.create_task(reading(share.warmup))
        at_end = asyncio.create_task(reading(share.seconds))
        held_s = 0.0
        i = 0
        while (elapsed := time.perf_counter() - started) < share.seconds:
            while i < int(elapsed * share.rate):
                author, text = texts[i % len(texts)]
                guild, channel = slots[i % len(slots)]
                msg = export_message(share.index * 10**9 + i, author, text, guild, channel)
                # Room for it and for every message still being acknowledged:
                # the queue never overflows, so nothing is dropped (and replayed).
                h0 = time.perf_counter()
                # A poll: the room is the queue's depth plus tasks of our own.
                while mem.queue.depth + len(acking) >= capacity:  # noqa: ASYNC110
                    await asyncio.sleep(0.005)
                held_s += time.perf_counter() - h0
                task = asyncio.create_task(offer(msg))
                acking.add(task)
                task.add_done_callback(acking.discard)
                i += 1
                await asyncio.sleep(0)  # one message per loop turn
                if time.perf_counter() - started >= share.seconds:
                    break
            await asyncio.sleep(0.01)
        (t0, n0), (t1, n1) = await at_warmup, await at_end
        backlog = mem.queue.depth + mem.queue.in_flight
        while acking:
            await asyncio.gather(*acking)
        window_s = time.perf_counter() - started
        drained = await mem.drain(120)
        c = mem.admin.counters()
        return {
            "index": share.index,
            "guilds": share.guilds,
            "offered_rate": share.rate,
            "workers": share.workers,
            "sent": i,
            "window_s": round(window_s, 2),
            "offer_held_s": round(held_s, 2),
            # The raw readings the rate is made of: (seconds since the start, processed).
            "reading_at_warmup": [round(t0, 3), n0],
            "reading_at_end": [round(t1, 3), n1],
            "processed_in_window": n1 - n0,
            "processed_rate": (n1 - n0) / (t1 - t0),
            "ack_ms": {"p50": percentile(acks, 50), "p99": percentile(acks, 99), "max": max(acks)},
            "backlog_at_window_end": backlog,
            "drained": drained,
            "processed_total": c["ingest_processed"],
            "own_messages_completed": own_done,
            "dropped": c["ingest_dropped"],
            "failed": c.get("ingest_failed", 0),
            "facts_added": c["facts_added"],
        }
    finally:
        await mem.close()
        await client.close()


# -- the parent -------------------------------------------------------------------------------


def _by_guild(url: str) -> dict[str, dict[str, int]]:
    """guild → state → messages, read straight from the database."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT guild_id, state, count(*) FROM messages GROUP BY guild_id, state"
        ).fetchall()
    out: dict[str, dict[str, int]] = {}
    for guild, state, n in rows:
        out.setdefault(str(guild), {})[str(state)] = int(n)
    return out


def run_config(
    processes: int,
    workers: int,
    args: argparse.Namespace,
    server: PgServer,
    llm_url: str,
    tmp: Path,
) -> dict[str, Any]:
    """One configuration: ``processes`` engines of ``workers`` extraction
    workers each on a new database, measured together."""
    url = server.new_url()
    guilds = guild_ids(args.guilds)
    ctx = mp.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    shares = [
        Share(
            index=p,
            guilds=mine,
            channels=args.channels,
            rate=args.rate * len(mine) / len(guilds),
            workers=workers,
            seconds=args.seconds,
            warmup=args.warmup,
            database_url=url,
            data_dir=str(tmp / f"p{processes}x{workers}-{p}"),
            llm_url=llm_url,
            embeddings=args.embeddings,
            export=str(args.export),
        )
        for p, mine in enumerate(deal(guilds, processes))
    ]
    procs = [
        ctx.Process(target=engine_process, args=(s, ready, go, results), name=f"engine-{s.index}")
        for s in shares
    ]
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.get(timeout=START_TIMEOUT_S)
    time.sleep(1.0)  # let start-up work (snapshot render) settle in every process
    load_before = loadavg()
    go.set()
    outs = sorted(
        (results.get(timeout=args.seconds + START_TIMEOUT_S) for _ in procs),
        key=lambda r: int(r["index"]),
    )
    load_after = loadavg()
    for proc in procs:
        proc.join(60)
    errors = [r["error"] for r in outs if "error" in r]
    if errors:
        raise RuntimeError(f"{processes} process run failed: {errors}")
    by_guild = _by_guild(url)
    owner = {g: s.index for s in shares for g in s.guilds}
    sent_by_guild = {g: 0 for g in guilds}
    for s, r in zip(shares, outs, strict=True):
        slots = len(s.guilds) * args.channels  # message k went to slot k % slots
        for k in range(int(r["sent"])):
            sent_by_guild[s.guilds[(k % slots) // args.channels]] += 1
    return {
        "processes": processes,
        "workers_per_process": workers,
        "loadavg": {"before": load_before, "after": load_after},
        "processed_rate": sum(float(r["processed_rate"]) for r in outs),
        "per_process": outs,
        "only_own_messages": all(r["processed_total"] == r["own_messages_completed"] for r in outs),
        "messages_by_guild": {
            g: {"owner": owner[g], "sent": sent_by_guild[g], **by_guild.get(g, {})} for g in guilds
        },
        "every_offered_message_stored": all(
            sum(by_guild.get(g, {}).values()) == sent_by_guild[g] for g in guilds
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--guilds", type=int, default=8)
    parser.add_argument("--channels", type=int, default=2, help="per guild")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per LLM call")
    parser.add_argument("--rate", type=float, default=200.0, help="msg/s offered in all")
    parser.add_argument("--embeddings", choices=("local", "none"), default="local")
    parser.add_argument(
        "--runs",
        type=_runs,
        default=_runs(DEFAULT_RUNS),
        help=f"configurations PROCESSESxWORKERS, comma-separated (default {DEFAULT_RUNS})",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every configuration this many times, in turn (the median is reported): "
        "on a shared machine the load drifts, and turns spread it over all of them",
    )
    parser.add_argument("--warmup", type=float, default=WARMUP_S, help="seconds not counted")
    parser.add_argument("--export", type=Path, default=EXPORT)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.guilds < max(p for p, _ in args.runs):
        parser.error("every process needs at least one guild")
    if args.seconds <= args.warmup:
        parser.error("--seconds must be above the --warmup")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # inherited by the engine processes
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("memory.ingest.queue").setLevel(logging.ERROR)

    from bench._tidy_load import tidy_reply
    from bench.ingest import FakeServerThread

    started = time.perf_counter()
    load_before = loadavg()
    rounds: list[dict[str, dict[str, Any]]] = []
    with (
        tempfile.TemporaryDirectory(prefix="guildlore-bench-processes-") as tmp,
        postgres_if(["postgresql"]) as server,
        # One fact per message, and the batch's sensitivity labels (a call
        # of its own per batch) answered "none".
        FakeServerThread(args.latency, tidy_reply) as fake,
    ):
        assert server is not None
        version = server.version()
        for r in range(max(1, args.rounds)):
            done: dict[str, dict[str, Any]] = {}
            for n, w in args.runs:
                key = f"{n}x{w}"
                done[key] = run_config(n, w, args, server, fake.base_url, Path(tmp) / str(r))
                print(
                    f"round {r + 1}: {n} process(es) × {w} workers: "
                    f"{done[key]['processed_rate']:.1f} processed/s "
                    f"(load {done[key]['loadavg']['before']})",
                    flush=True,
                )
            rounds.append(done)
        llm_calls = len(fake.chat_requests())
    runs = {key: _median_run([done[key] for done in rounds]) for key in rounds[0]}
    ratio = _ratio(runs, "2x4", "1x4")
    payload = {
        "machine": {"loadavg_before": load_before, "loadavg_after": loadavg()},
        "postgresql": version,
        "guilds": args.guilds,
        "channels_per_guild": args.channels,
        "llm_latency_s": args.latency,
        "offered_rate": args.rate,
        "seconds": args.seconds,
        "warmup_s": args.warmup,
        "rounds": len(rounds),
        "embeddings": args.embeddings,
        "llm_calls": llm_calls,
        "two_over_one": ratio,
        "one_8_workers_over_one_4": _ratio(runs, "1x8", "1x4"),
        "target_two_over_one_min": TARGET_RATIO,
        "meets_target": None if ratio is None else ratio >= TARGET_RATIO,
        "wall_seconds": round(time.perf_counter() - started, 1),
        "runs": runs,
    }
    path = write_json("processes", payload, args.out)
    _print(runs, args, ratio, path)
    return 0


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median processed/s (the lower middle one of an even
    count), with every round's rate beside it."""
    ordered = sorted(runs, key=lambda r: float(r["processed_rate"]))
    median = dict(ordered[(len(ordered) - 1) // 2])
    median["rates_by_round"] = [round(float(r["processed_rate"]), 2) for r in runs]
    return median


def _runs(text: str) -> list[tuple[int, int]]:
    """ "1x4,2x4,1x8" → [(1, 4), (2, 4), (1, 8)]."""
    out = []
    for part in text.split(","):
        processes, _, workers = part.strip().partition("x")
        try:
            pair = int(processes), int(workers or 4)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r} is not PROCESSESxWORKERS") from None
        if min(pair) < 1:
            raise argparse.ArgumentTypeError(f"{part!r}: at least one process and one worker")
        out.append(pair)
    return out


def _ratio(runs: dict[str, dict[str, Any]], top: str, bottom: str) -> float | None:
    if top not in runs or bottom not in runs or runs[bottom]["processed_rate"] <= 0:
        return None
    return round(runs[top]["processed_rate"] / runs[bottom]["processed_rate"], 2)


def _print(
    runs: dict[str, dict[str, Any]], args: argparse.Namespace, ratio: float | None, path: Path
) -> None:
    print()
    print(
        f"ingest on one PostgreSQL: {args.guilds} guilds × {args.channels} channels, "
        f"{args.rate:g} msg/s offered for {args.seconds:g} s, LLM extractor at "
        f"{args.latency:g} s per call, embeddings {args.embeddings}; "
        f"{len(os.sched_getaffinity(0))} CPUs"
    )
    rows = []
    for run in runs.values():
        for r in run["per_process"]:
            rows.append(
                [
                    run["processes"],
                    r["workers"],
                    r["index"],
                    len(r["guilds"]),
                    r["sent"],
                    round(r["processed_rate"], 1),
                    r["dropped"],
                    r["backlog_at_window_end"],
                    round(r["ack_ms"]["p99"], 1),
                    r["processed_total"] == r["own_messages_completed"],
                    run["loadavg"]["before"][0] if run["loadavg"]["before"] else None,
                ]
            )
        rows.append(
            [
                run["processes"],
                run["workers_per_process"],
                "all",
                args.guilds,
                "",
                round(run["processed_rate"], 1),
                "",
                "",
                "",
                "",
                "",
            ]
        )
    print_table(
        [
            "processes",
            "workers",
            "process",
            "guilds",
            "sent",
            "processed/s",
            "dropped",
            "backlog",
            "ack p99 ms",
            "own only",
            "load",
        ],
        rows,
    )
    if args.rounds > 1:
        for key, run in runs.items():
            rates = ", ".join(f"{r:.1f}" for r in run["rates_by_round"])
            print(f"{key}: processed/s by round {rates} (median {run['processed_rate']:.1f})")
    word = {True: "meets", False: "MISSES", None: "not judged by"}[
        None if ratio is None else ratio >= TARGET_RATIO
    ]
    print(
        f"two processes / one, 4 workers each = {ratio}× (target ≥ {TARGET_RATIO}×) — "
        f"{word} the target; one process with 8 workers / 4 = "
        f"{_ratio(runs, '1x8', '1x4')}×; {path}"
    )


if __name__ == "__main__":
    sys.exit(main())
