"""Compaction benchmark: what budgets cost per scope, offline and with an LLM.

    .venv/bin/python bench/compaction.py            # 1,000 facts per scope
    .venv/bin/python bench/compaction.py --quick    # 300

For each scope (one member's facts, the guild's lore, the guild's total over
many members) facts are written one transaction each into a fresh engine's
database (SQLite file, migrated, WAL), each write followed by the budget
check the pipeline runs in the same transaction, until ``--facts`` were
written; the budget is the default (member 80, lore 120) or ``--guild-budget``
for the total (its members stay under their own budget). Two modes:

- ``offline``: no LLM; a write past the budget archives the lowest-value
  fact in its own transaction;
- ``llm``: the fake OpenAI server (tests/fakeopenai.py, through the real
  ``openai`` client, ``--llm-latency`` per call) answers every compaction
  with a delete of the lowest-value memory shown; the write only notes the
  scope and compaction runs beside the writes.

Reported per scope and mode: the write's p50/p95 (the ingest hot path),
the wall time until the scope is back at budget, LLM calls and compactions
per 1,000 facts, and that the scope ended exactly at its budget. Writes
bench/results/compaction.json and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import loadavg, percentile, print_table, write_json
from memory.clock import iso, system_clock
from memory.config import EmbeddingConfig, MemoryConfig
from memory.engine import Memory
from memory.ingest.llm_decision import LLMDecider
from memory.models import LORE_SUBJECT
from memory.store import budgets as store_budgets
from memory.store.budgets import Scope
from memory.store.facts import upsert_fact
from tests.fakeopenai import FakeOpenAI, default_chat_reply

GUILD = "900000000000000002"
MEMBERS = 50
_ALIAS = re.compile(r"^\[M(\d+)\]", re.M)


def delete_first(body: dict[str, Any]) -> str:
    """The fake model's compaction answer: delete the first (lowest-value) memory."""
    fmt = body.get("response_format") or {}
    if fmt.get("json_schema", {}).get("name") != "memory_compaction":
        return default_chat_reply(body)
    first = _ALIAS.search(body["messages"][-1]["content"])
    alias = int(first[1]) if first else 1
    return json.dumps(
        {"action": "delete", "targetMemoryId": alias, "newContent": None, "reason": "bench"}
    )


def subject_of(scope: str, i: int) -> str:
    if scope == "lore":
        return LORE_SUBJECT
    if scope == "member":
        return "800000000000000001"
    return f"8000000000000{i % MEMBERS:05d}"


async def run_one(scope: str, mode: str, n: int, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = MemoryConfig.for_data_dir(Path(tmp), embedding=EmbeddingConfig(provider="none"))
        fake = FakeOpenAI(latency_s=args.llm_latency, chat_handler=delete_first)
        await fake.start()
        client = fake.client()
        decider = LLMDecider(client, "bench-model") if mode == "llm" else None
        mem = await Memory.open(cfg, decider=decider, ingest=False)
        try:
            if scope == "guild":
                await mem.guilds.set_setting(GUILD, "budget_guild_total", str(args.guild_budget))
            keeper = mem.upkeep.budgets
            writes: list[float] = []
            started = time.perf_counter()
            for i in range(n):
                subject = subject_of(scope, i)
                now = iso(system_clock())

                def work(con: Any, i: int = i, subject: str = subject, now: str = now) -> None:
                    upsert_fact(
                        con,
                        guild_id=GUILD,
                        channel_id=None,
                        subject=subject,
                        fact=f"Fact number {i} about the bench subject {subject[-4:]}.",
                        fact_type="lore" if subject == LORE_SUBJECT else "other",
                        evidence=None,
                        source_message_id=None,
                        confidence=0.5 + (i % 7) / 20,
                        now=now,
                        actor="bench",
                    )
                    keeper.after_write(con, GUILD, subject, now)

                t0 = time.perf_counter()
                await mem.db.write(work)
                writes.append((time.perf_counter() - t0) * 1000)
            await keeper.settle(600)
            wall = time.perf_counter() - started
            kind = "member" if scope == "member" else scope
            key = subject_of(scope, 0) if scope == "member" else None
            final = await mem.db.read(store_budgets.count, Scope(GUILD, kind, key))  # type: ignore[arg-type]
            budget = {"member": 80, "lore": 120, "guild": args.guild_budget}[scope]
            stats = keeper.stats
            per_k = 1000 / n
            return {
                "scope": scope,
                "mode": mode,
                "facts": n,
                "budget": budget,
                "final": final,
                "at_budget": final == budget,
                "write_p50_ms": round(percentile(writes, 50), 3),
                "write_p95_ms": round(percentile(writes, 95), 3),
                "wall_s": round(wall, 3),
                "llm_calls_per_1000": round(stats.llm_calls * per_k, 1),
                "compactions_per_1000": round(stats.compactions * per_k, 1),
                "archived": stats.archived,
                "fallbacks": dict(stats.fallbacks),
                "ms_per_compaction": round(wall * 1000 / stats.compactions, 2)
                if stats.compactions
                else None,
            }
        finally:
            await mem.close()
            await client.close()
            await fake.close()


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--facts", type=int, default=1000)
    parser.add_argument("--guild-budget", type=int, default=500)
    parser.add_argument("--llm-latency", type=float, default=0.0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    n = 300 if args.quick else args.facts
    if args.quick:
        args.guild_budget = min(args.guild_budget, 150)
    rows = []
    for scope in ("member", "lore", "guild"):
        for mode in ("offline", "llm"):
            rows.append(await run_one(scope, mode, n, args))
    print_table(
        [
            "scope",
            "mode",
            "facts",
            "final/budget",
            "write p50",
            "p95",
            "wall s",
            "LLM/1k",
            "ms/compaction",
        ],
        [
            [
                r["scope"],
                r["mode"],
                r["facts"],
                f"{r['final']}/{r['budget']}",
                r["write_p50_ms"],
                r["write_p95_ms"],
                r["wall_s"],
                r["llm_calls_per_1000"],
                r["ms_per_compaction"],
            ]
            for r in rows
        ],
    )
    path = write_json(
        "compaction",
        {"facts": n, "llm_latency_s": args.llm_latency, "loadavg": loadavg(), "runs": rows},
        args.out,
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    asyncio.run(main())
