"""PostgreSQL's database layer: what one call costs, and how long the first
write waits after the server comes back.

    .venv/bin/python bench/pg_roundtrips.py                 # ~1 min
    .venv/bin/python bench/pg_roundtrips.py --calls 500 --rounds 1

Part 1 — round trips. On a PostgreSQL of its own (the pgserver wheel,
``bench/_pg.py``), one ``PgDatabase`` runs ``--calls`` small calls of each
kind one after the other, ``--rounds`` times: a write transaction on the
writer (an insert of one row), an urgent write (the acknowledgement path),
a read (a primary-key look-up). Reports p50/p95 per kind, over every round.
This is the cost of taking each transaction's connection from a pool
(``memory.db.postgres.pools``) and of reading the transaction id with the
commit notification; run the same script with PYTHONPATH on an older tree
to compare (it imports only ``PgDatabase``'s public calls).

Part 2 — recovery (``--restart``). The server is killed (SIGKILL) and
started again; the time from the server accepting connections to the next
write returning, and whether it returned at all within ``--wait`` seconds
(a layer that never reconnects fails every write: reported as its error).

Writes bench/results/pg-roundtrips.json (or ``--json``) and prints tables.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import loadavg, percentile, print_table, write_json
from bench._pg import postgres_if


def _insert(con: Any, n: int) -> None:
    con.execute("INSERT INTO bench_rows (n, body) VALUES (?, 'x')", (n,))


def _look_up(con: Any, n: int) -> Any:
    return con.execute("SELECT body FROM bench_rows WHERE n = ?", (n,)).fetchone()


async def _round_trips(url: str, calls: int, rounds: int) -> dict[str, dict[str, float]]:
    from memory.db.postgres.database import PgDatabase

    db = PgDatabase(url)
    await db.open()
    times: dict[str, list[float]] = {"write": [], "urgent write": [], "read": []}
    try:
        await db.write(lambda con: con.execute("CREATE TABLE bench_rows (n bigint, body text)"))
        n = 0
        for _ in range(rounds):
            for kind in times:
                for _ in range(calls):
                    n += 1
                    started = time.perf_counter()
                    if kind == "write":
                        await db.write(_insert, n)
                    elif kind == "urgent write":
                        await db.write(_insert, n, urgent=True)
                    else:
                        await db.read(_look_up, n - 1)
                    times[kind].append((time.perf_counter() - started) * 1000)
    finally:
        await db.close()
    return {
        kind: {
            "p50_ms": round(percentile(ms, 50), 3),
            "p95_ms": round(percentile(ms, 95), 3),
            "calls": len(ms),
        }
        for kind, ms in times.items()
    }


async def _recovery(server: Any, url: str, wait_s: float) -> dict[str, Any]:
    from memory.db.postgres.database import PgDatabase

    db = PgDatabase(url)
    await db.open()
    try:
        await db.write(lambda con: con.execute("CREATE TABLE bench_back (n bigint)"))
        pid = server.server.get_pid()
        os.kill(pid, signal.SIGKILL)
        while True:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 0)
                await asyncio.sleep(0.05)
                continue
            break
        deadline = time.monotonic() + 60
        while True:  # a start fails while the killed server's backends still hold its memory
            try:
                await asyncio.to_thread(server.server.ensure_postgres_running)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        back = time.perf_counter()
        try:
            await asyncio.wait_for(
                db.write(lambda con: con.execute("INSERT INTO bench_back VALUES (1)")), wait_s
            )
        except Exception as exc:
            return {"recovered": False, "error": f"{type(exc).__name__}: {exc}"[:200]}
        return {"recovered": True, "first_write_after_s": round(time.perf_counter() - back, 3)}
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(db.close(), 30)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1000, help="calls of each kind per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--restart", action="store_true", help="also measure recovery")
    ap.add_argument("--wait", type=float, default=60.0, help="recovery: longest wait, seconds")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    with postgres_if(["postgresql"]) as server:
        assert server is not None
        load_before = loadavg()
        trips = asyncio.run(_round_trips(server.new_url(), args.calls, args.rounds))
        recovery = (
            asyncio.run(_recovery(server, server.new_url(), args.wait)) if args.restart else None
        )
        load_after = loadavg()
    print_table(
        ["call", "p50 ms", "p95 ms", "calls"],
        [[k, v["p50_ms"], v["p95_ms"], v["calls"]] for k, v in trips.items()],
    )
    if recovery is not None:
        print(f"recovery: {recovery}")
    out = write_json(
        "pg-roundtrips",
        {
            "machine": {"load_before": load_before, "load_after": load_after},
            "round_trips": trips,
            "recovery": recovery,
        },
        args.json,
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
