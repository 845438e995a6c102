"""``bench/search.py --backends``: the per-backend results side by side, the
PostgreSQL-over-SQLite target judged, and the JSON written."""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from bench._common import loadavg, print_table, write_json

# PostgreSQL's search p95 at the largest size, at most this many times SQLite's.
TARGET_P95_RATIO = 2.0


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b > 0 else None


def comparison(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per fact size (and message size) measured on both backends: PostgreSQL
    over SQLite for search and slice p50/p95; the verdict at the largest size."""
    sq, pg = results.get("sqlite"), results.get("postgresql")
    out: dict[str, Any] = {"target_pg_search_p95_over_sqlite_max": TARGET_P95_RATIO}
    if sq is None or pg is None:
        out["meets_target"] = None
        return out
    sizes: dict[str, Any] = {}
    for size in sq["sizes"]:
        if size not in pg["sizes"]:
            continue
        a, b = sq["sizes"][size], pg["sizes"][size]
        sizes[size] = {
            f"{what}_{p}_over_sqlite": _ratio(b[what][f"{p}_ms"], a[what][f"{p}_ms"])
            for what in ("search", "slice")
            for p in ("p50", "p95")
        }
    out["facts"] = sizes
    messages: dict[str, Any] = {}
    for size, a in sq.get("messages", {}).get("sizes", {}).items():
        b = pg.get("messages", {}).get("sizes", {}).get(size)
        if b is not None:
            messages[size] = {
                f"{what}_p95_over_sqlite": _ratio(b[what]["p95_ms"], a[what]["p95_ms"])
                for what in ("search_messages", "search_all")
            }
    if messages:
        out["messages"] = messages
    largest = max(sizes, key=int) if sizes else None
    ratio = sizes[largest]["search_p95_over_sqlite"] if largest else None
    out["judged_at_facts"] = int(largest) if largest else None
    out["meets_target"] = None if ratio is None else ratio <= TARGET_P95_RATIO
    return out


def compare_backends(
    args: argparse.Namespace,
    results: dict[str, dict[str, Any]],
    load_before: list[float] | None,
    started: float,
    versions: dict[str, str],
) -> int:
    verdict = comparison(results)
    payload: dict[str, Any] = {
        "machine": {"loadavg_before": load_before, "loadavg_after": loadavg()},
        "backends": list(results),
        "server_versions": versions,
        "sizes": args.sizes,
        "other_guild_facts": args.other_guild_facts,
        "messages_in_guild": args.messages,
        "queries": {"distinct": args.queries, "rounds": args.rounds},
        "comparison": verdict,
        "seconds": round(time.perf_counter() - started, 1),
        "results": results,
    }
    path = write_json("search-backends", payload, args.out)
    print()
    print(
        f"search benchmark by backend: {args.other_guild_facts} facts in each other guild, "
        f"{args.messages} messages, {args.queries} queries × {args.rounds}; "
        f"{len(os.sched_getaffinity(0))} CPUs, load {load_before}; query embedding excluded; ms"
    )
    headers = [
        "facts",
        "backend",
        "search p50",
        "search p95",
        "slice p50",
        "slice p95",
        "insert s",
        "load",
    ]
    rows = []
    for size in results[next(iter(results))]["sizes"]:
        for backend, res in results.items():
            r = res["sizes"].get(size)
            if r is None:
                continue
            load = r["loadavg_during"][0]
            rows.append(
                [
                    size,
                    backend,
                    r["search"]["p50_ms"],
                    r["search"]["p95_ms"],
                    r["slice"]["p50_ms"],
                    r["slice"]["p95_ms"],
                    r["insert_seconds"],
                    load[0] if load else None,
                ]
            )
    if rows:
        print_table(headers, rows)
    _print_messages(results)
    ratio = None
    if verdict.get("judged_at_facts"):
        ratio = verdict["facts"][str(verdict["judged_at_facts"])]["search_p95_over_sqlite"]
    word = {True: "meets", False: "MISSES", None: "not judged by"}[verdict["meets_target"]]
    print(
        f"PostgreSQL search p95 = {ratio}× SQLite's at {verdict.get('judged_at_facts')} facts "
        f"(target ≤ {TARGET_P95_RATIO:.0f}×) — {word} the target; results in {path}"
    )
    return 0


def _print_messages(results: dict[str, dict[str, Any]]) -> None:
    rows = []
    first = results[next(iter(results))]
    for size in first.get("messages", {}).get("sizes", {}):
        for backend, res in results.items():
            r = res.get("messages", {}).get("sizes", {}).get(size)
            if r is not None:
                rows.append(
                    [
                        size,
                        backend,
                        r["search_messages"]["p50_ms"],
                        r["search_messages"]["p95_ms"],
                        r["search_all"]["p50_ms"],
                        r["search_all"]["p95_ms"],
                    ]
                )
    if rows:
        print()
        print_table(
            ["messages", "backend", "messages p50", "messages p95", "all p50", "all p95"], rows
        )
