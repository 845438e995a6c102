"""``guildlore bench locomo|longmemeval|extraction --data FILE [--k ...] [--json OUT]``.

Runs a retrieval benchmark (``evals``) with the offline stack: the local
MiniLM embedder and the rule extractor, in a throw-away data directory unless
``--data-dir`` names one. Prints a table; ``--json`` writes the summary.

* ``locomo`` reads LoCoMo's layout (and data sets in it, e.g. REALTALK);
* ``questions`` reads natural questions about a real export with the
  messages that answer them (``tests/data/papyrology-questions.json``) and
  counts those strict search answers well under each scope (``evals.questions``);
* ``longmemeval`` reads LongMemEval's (plain or gzip-compressed JSON) and also
  takes ``--per-question OUT`` (JSON lines), ``--limit N``, ``--types`` and
  ``--db PATH``: the engine's data directory is kept there and reused, so a
  question whose history it already holds is ranked without being ingested
  again (ingest the long haystacks once, then measure ranking changes);
* ``extraction`` imports LoCoMo conversations (or a DCE export) with the
  extractor the settings configure (``--config``, the environment: a chat
  model when one is set, else the offline rules) into a throw-away SQLite
  memory and scores the facts against LoCoMo's gold observations
  (``evals.extraction``).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from bot.commands._common import add_config_argument

BENCHMARKS = ("locomo", "longmemeval", "extraction", "questions")
DEFAULT_K = {
    "locomo": [5, 10, 25, 50],
    "longmemeval": [5, 10, 25],
    "extraction": [],
    "questions": [3],
}
LONGMEMEVAL_ONLY = ("per_question", "limit", "types", "db")


def _ks(text: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"--k wants numbers like 5,10,25,50, not {text!r}"
        ) from exc
    if not ks or ks[0] < 1 or ks[-1] > 50:
        raise argparse.ArgumentTypeError("--k values must be between 1 and 50 (search's limit)")
    return ks


def _limit(text: str) -> int:
    try:
        n = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--limit wants a number, not {text!r}") from exc
    if n < 1:
        raise argparse.ArgumentTypeError("--limit must be at least 1")
    return n


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("benchmark", choices=BENCHMARKS, help="which benchmark to run")
    parser.add_argument("--data", type=Path, required=True, help="the data set's JSON file")
    parser.add_argument(
        "--k",
        type=_ks,
        default=None,
        help="cut-offs, comma-separated (default 5,10,25,50 for locomo, 5,10,25 for longmemeval)",
    )
    parser.add_argument(
        "--json", type=Path, default=None, metavar="OUT", help="write the summary here"
    )
    parser.add_argument(
        "--per-question",
        type=Path,
        default=None,
        metavar="OUT",
        help="longmemeval: write one JSON line per question (evidence, ranking, hits)",
    )
    parser.add_argument(
        "--limit",
        type=_limit,
        default=None,
        metavar="N",
        help="longmemeval: only the first N questions (after --types)",
    )
    parser.add_argument(
        "--types",
        nargs="+",
        default=None,
        metavar="TYPE",
        help="longmemeval: only these question types (space- or comma-separated)",
    )
    parser.add_argument(
        "--db",
        type=Path,
        default=None,
        metavar="PATH",
        help="longmemeval: keep the engine's data directory here and reuse it; questions "
        "already stored there are not ingested again",
    )
    parser.add_argument(
        "--gate",
        action="store_true",
        help="score strict search (only hits that pass the relevance gate) instead of the "
        "ranking (every candidate, best first)",
    )
    parser.add_argument("--threads", type=int, default=2, help="ONNX Runtime threads (default 2)")
    add_config_argument(parser)


def run(args: argparse.Namespace) -> int:
    from evals import locomo, longmemeval, questions

    if not getattr(args, "verbose", False):
        logging.getLogger().setLevel(logging.WARNING)
    data: Path = args.data
    if not data.is_file():
        print(f"no such file: {data}", file=sys.stderr)
        return 2
    name: str = args.benchmark
    misplaced = [
        "--" + opt.replace("_", "-") for opt in LONGMEMEVAL_ONLY if getattr(args, opt) is not None
    ]
    if name != "longmemeval" and misplaced:
        print(f"{', '.join(misplaced)}: only for longmemeval", file=sys.stderr)
        return 2
    db: Path | None = getattr(args, "db", None)
    if db is not None and getattr(args, "data_dir", None) is not None:
        print("--db and --data-dir: give one of them", file=sys.stderr)
        return 2
    if name == "extraction":
        if args.k or args.gate:
            print("--k, --gate: not for extraction", file=sys.stderr)
            return 2
        from bot.commands.bench_extraction import run_extraction

        return run_extraction(args)
    ks: list[int] = args.k or DEFAULT_K[name]
    common: dict[str, Any] = {
        "data_dir": db if db is not None else getattr(args, "data_dir", None),
        "gate": bool(args.gate),
        "threads": max(1, int(args.threads)),
        "progress": lambda line: print(line, file=sys.stderr),
    }
    mode = "strict search (gate on)" if args.gate else "ranking (gate off)"
    try:
        if name == "questions":
            summary = questions.run(
                data, args.json, **{k: common[k] for k in ("data_dir", "threads", "progress")}
            )
            print("Natural questions about a real export, strict search (gate on), by scope")
            print(questions.format_table(summary))
            if args.json is not None:
                print(f"wrote {args.json}")
            return 0
        if name == "locomo":
            summary = locomo.run(data, ks, args.json, **common)
            table = locomo.format_table(summary)
            title = "LoCoMo-layout evidence retrieval"
        else:
            types = [t for item in args.types or () for t in item.split(",") if t.strip()]
            summary = longmemeval.run(
                data,
                ks,
                args.json,
                args.per_question,
                types=types or None,
                limit=args.limit,
                reuse=db is not None,
                **common,
            )
            table = longmemeval.format_table(summary)
            title = "LongMemEval evidence retrieval"
    except (ValueError, KeyError) as exc:
        print(f"cannot read {data} as {name} data: {exc}", file=sys.stderr)
        return 2
    print(f"{title}, {mode}, search(scope='all'), unit = dialogue turns")
    print(table)
    for out in (args.json, args.per_question):
        if out is not None:
            print(f"wrote {out}")
    return 0
