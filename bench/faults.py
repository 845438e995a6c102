"""Fault injection: import a real export while the LLM fails, then recover.

    .venv/bin/python bench/faults.py [EXPORT] [--messages N] [--fault-rate 0.3]

Three runs of ``guildlore import`` (the real command, in its own process)
with the LLM extractor, against the fake OpenAI server (tests/fakeopenai.py,
its own process too; it answers one grounded fact per message and embeds
deterministically):

1. healthy — a fresh data dir, a server that never fails: the reference;
2. faulty — another fresh data dir, a server that answers ``--fault-rate`` of
   the chat calls at random with a fault (HTTP 500, 429, a timeout past the
   client's, a body that is not JSON, a reply that is not the JSON asked
   for), through the client's own retry (``llm.max_retries``); the engine's
   retry loop runs with a short back-off, so some messages recover during
   the run and the rest wait for a retry;
3. recovered — the same import again on the faulty run's data dir, with a
   healthy server (and ``guildlore retry`` if any message had given up).

Then: every fact of the healthy run must be in the recovered data dir (facts
compared as (guild, subject, text), active or archived: which ones the
80-per-member limit archives depends on the order they were written), no
message may be left unprocessed, and no active fact without a vector.
EXPORT defaults to tests/data/vesuvius-papyrology.json, else the bundled
sample guild. Writes bench/results/faults.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make the project importable
    sys.path.insert(0, str(ROOT))

from bench._common import loadavg, print_table, write_json  # noqa: E402
from memory.db.sqlite import driver as sqlite  # noqa: E402
from memory.embed.remote import OPENAI_DEFAULT_MODEL  # noqa: E402
from memory.store import ops as store_ops  # noqa: E402
from tests.fakeopenai import server_process  # noqa: E402

DEFAULT_EXPORT = ROOT / "tests" / "data" / "vesuvius-papyrology.json"
SAMPLE = ROOT / "bot" / "data" / "sample_guild.json"
LLM_TIMEOUT_S = 1.0
FAULT_TIMEOUT_S = 2.0  # a timeout fault outlasts the client's timeout
# Shorter than the default (30 s), so the running import retries some
# messages itself; those failing in its last seconds are left to the re-import.
RETRY_BASE_S = 2.0


def guildlore(
    command: str, data: Path, url: str, *args: str, llm_retries: int, retry_base_s: float
) -> tuple[int, dict[str, Any], float]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OPENAI_API_KEY": "bench",
        "OPENAI_BASE_URL": url,
        "GUILDLORE_LLM_TIMEOUT_S": str(LLM_TIMEOUT_S),
        "GUILDLORE_LLM_MAX_RETRIES": str(llm_retries),
        "GUILDLORE_INGEST_RETRY_BASE_S": str(retry_base_s),
    }
    started = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "bot", command, *args, "--data-dir", str(data), "--json"]
        + ["--extractor", "llm", "--embeddings", "openai"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    took = time.perf_counter() - started
    if run.returncode not in (0, 3):
        raise SystemExit(f"guildlore {command} exited {run.returncode}:\n{run.stderr[-3000:]}")
    return run.returncode, json.loads(run.stdout), took


def inspect(data: Path) -> dict[str, Any]:
    con = sqlite.connect(data / "guildlore.sqlite3", read_only=True)
    try:
        facts = {
            (r[0], r[1], r[2])
            for r in con.execute("SELECT guild_id, subject, fact FROM memory_facts")
        }
        active = con.execute("SELECT count(*) FROM memory_facts WHERE is_active = 1").fetchone()[0]
        states = {
            r[0]: int(r[1])
            for r in con.execute("SELECT state, count(*) FROM messages GROUP BY state")
        }
        unembedded = store_ops.facts_without_vector(con, OPENAI_DEFAULT_MODEL)
    finally:
        con.close()
    stuck = sum(n for s, n in states.items() if s not in ("done", "skipped"))
    return {
        "facts": facts,
        "facts_active": int(active),
        "states": states,
        "stuck": stuck,
        "facts_without_vector": unembedded,
    }


def subset(export: Path, n: int, into: Path) -> Path:
    if n <= 0:
        return export
    doc = json.loads(export.read_text(encoding="utf-8"))
    doc["messages"] = doc["messages"][:n]
    path = into / f"subset-{n}.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export", nargs="?", type=Path, default=None)
    parser.add_argument("--messages", type=int, default=0, help="first N messages only (0: all)")
    parser.add_argument("--fault-rate", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--llm-retries", type=int, default=1, help="the client's own retries")
    parser.add_argument(
        "--retry-base", type=float, default=RETRY_BASE_S, help="engine back-off, first wait (s)"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    export = args.export or (DEFAULT_EXPORT if DEFAULT_EXPORT.exists() else SAMPLE)
    work = Path(tempfile.mkdtemp(prefix="guildlore-bench-faults-"))
    source = subset(export, args.messages, work)
    retries = args.llm_retries
    load_before = loadavg()

    with server_process() as url:
        code_h, healthy, took_h = guildlore(
            "import",
            work / "healthy",
            url,
            str(source),
            llm_retries=retries,
            retry_base_s=args.retry_base,
        )
    flags = ["--fault-rate", str(args.fault_rate), "--fault-seed", str(args.seed)]
    flags += ["--fault-timeout", str(FAULT_TIMEOUT_S)]
    with server_process(*flags) as url:
        code_f, faulty, took_f = guildlore(
            "import",
            work / "faulty",
            url,
            str(source),
            llm_retries=retries,
            retry_base_s=args.retry_base,
        )
    after_faults = inspect(work / "faulty")
    retry_run: dict[str, Any] | None = None
    with server_process() as url:
        code_r, recovered, took_r = guildlore(
            "import",
            work / "faulty",
            url,
            str(source),
            llm_retries=retries,
            retry_base_s=args.retry_base,
        )
        if recovered["failed"]:
            code_r, retry_run, took = guildlore(
                "retry", work / "faulty", url, llm_retries=retries, retry_base_s=args.retry_base
            )
            took_r += took

    ref = inspect(work / "healthy")
    end = inspect(work / "faulty")
    missing = ref["facts"] - end["facts"]
    extra = end["facts"] - ref["facts"]
    runs = {"healthy": healthy, "faulty": faulty, "recovered": recovered}
    codes = {"healthy": code_h, "faulty": code_f, "recovered": code_r}
    seconds = {"healthy": took_h, "faulty": took_f, "recovered": took_r}
    states = {"healthy": ref, "faulty": after_faults, "recovered": end}
    rows = [
        ("exit status", *(codes[k] for k in runs)),
        ("seconds", *(round(seconds[k], 1) for k in runs)),
        ("messages read", *(runs[k]["messages"] for k in runs)),
        (
            "new / resumed / already in",
            *(
                f"{runs[k]['new']} / {runs[k]['resumed']} / {runs[k]['already_imported']}"
                for k in runs
            ),
        ),
        ("extraction calls", *(runs[k]["extract_calls"] for k in runs)),
        ("extraction calls failed", *(runs[k]["extract_errors"] for k in runs)),
        ("facts added by the run", *(runs[k]["facts_added"] for k in runs)),
        ("waiting for a retry at the end", *(runs[k]["waiting_retry"] for k in runs)),
        ("failed at the end", *(runs[k]["failed"] for k in runs)),
        ("facts in the data dir", *(len(states[k]["facts"]) for k in runs)),
        ("active facts", *(states[k]["facts_active"] for k in runs)),
        ("messages not done", *(states[k]["stuck"] for k in runs)),
        ("facts without a vector", *(states[k]["facts_without_vector"] for k in runs)),
    ]
    print(
        f"\nFault injection: {export.name}"
        + (f" (first {args.messages} messages)" if args.messages else "")
        + f", {args.fault_rate:.0%} of chat calls fail, client retries {retries}\n"
    )
    print_table(["", "healthy", "faulty", "faulty + re-import"], rows)
    ok = not missing and end["stuck"] == 0 and end["facts_without_vector"] == 0
    print(
        f"\nhealthy facts missing after recovery: {len(missing)}; extra: {len(extra)}; "
        f"messages stuck: {end['stuck']}; facts without a vector: {end['facts_without_vector']}"
        f" → {'OK' if ok else 'FAILED'}"
    )
    payload = {
        "export": export.name,
        "messages_limit": args.messages,
        "fault_rate": args.fault_rate,
        "seed": args.seed,
        "llm_client_retries": retries,
        "llm_timeout_s": LLM_TIMEOUT_S,
        "retry_base_s": args.retry_base,
        "runs": {
            k: {
                "exit_status": codes[k],
                "seconds": round(seconds[k], 2),
                "summary": runs[k],
                "facts_in_data_dir": len(states[k]["facts"]),
                "facts_active": states[k]["facts_active"],
                "message_states": states[k]["states"],
                "facts_without_vector": states[k]["facts_without_vector"],
            }
            for k in runs
        },
        "retry_command": retry_run,
        "healthy_facts_missing_after_recovery": len(missing),
        "facts_not_in_healthy_run": len(extra),
        "ok": ok,
        "machine": {"loadavg_before": load_before, "loadavg_after": loadavg()},
    }
    path = write_json("faults", payload, args.out)
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
