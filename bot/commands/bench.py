"""``guildlore bench locomo --data FILE [--k 5,10,25,50] [--json OUT]``.

Runs the LoCoMo retrieval benchmark (memory/locomo.py) with the offline stack:
the local MiniLM embedder and the rule extractor, in a throw-away data
directory unless ``--data-dir`` names one. Prints a table; ``--json`` writes
the summary.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

BENCHMARKS = ("locomo",)


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("benchmark", choices=BENCHMARKS, help="which benchmark to run")
    parser.add_argument("--data", type=Path, required=True, help="the LoCoMo JSON file")
    parser.add_argument(
        "--k",
        type=_ks,
        default=[5, 10, 25, 50],
        help="cut-offs, comma-separated (default 5,10,25,50)",
    )
    parser.add_argument(
        "--json", type=Path, default=None, metavar="OUT", help="write the summary here"
    )
    parser.add_argument(
        "--gate",
        action="store_true",
        help="score strict search (only hits that pass the relevance gate) instead of the "
        "ranking (every candidate, best first)",
    )
    parser.add_argument("--threads", type=int, default=2, help="ONNX Runtime threads (default 2)")


def run(args: argparse.Namespace) -> int:
    from evals import locomo
    from memory import LocalMiniLMEmbedder

    if not getattr(args, "verbose", False):
        logging.getLogger().setLevel(logging.WARNING)
    data: Path = args.data
    if not data.is_file():
        print(f"no such file: {data}", file=sys.stderr)
        return 2
    embedder = LocalMiniLMEmbedder(threads=max(1, int(args.threads)))
    try:
        summary = locomo.run(
            data,
            args.k,
            args.json,
            data_dir=getattr(args, "data_dir", None),
            gate=bool(args.gate),
            embedder=embedder,
            progress=lambda line: print(line, file=sys.stderr),
        )
    except (ValueError, KeyError) as exc:
        print(f"cannot read {data} as LoCoMo data: {exc}", file=sys.stderr)
        return 2
    mode = "strict search (gate on)" if args.gate else "ranking (gate off)"
    print(f"LoCoMo evidence retrieval, {mode}, search(scope='all'), unit = dialogue turns")
    print(locomo.format_table(summary))
    if args.json is not None:
        print(f"wrote {args.json}")
    return 0
