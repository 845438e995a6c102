"""Retrieval quality before and after, by category, from the harnesses' JSON.

    .venv/bin/python bench/quality_table.py [--before final] [--after s12-final]

Reads ``bench/results/{locomo-dev,realtalk-dev,longmemeval-oracle,
longmemeval-s}-<run>.json`` (what ``guildlore bench locomo|longmemeval
--json`` writes) for two runs and prints one table: for every data set and
each of its categories (LoCoMo layout) or question types (LongMemEval), the
ranking's recall@5 / 10 / 25 and strict search's recall@10, before → after,
then the share of unanswerable questions strict search answers with no hit.
Writes the rows to ``bench/results/quality-table.json``. It runs nothing:
every figure is one harness run's, as the files hold it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make the project importable
    sys.path.insert(0, str(ROOT))

from bench._common import RESULTS, print_table, write_json  # noqa: E402

SETS: tuple[tuple[str, str], ...] = (
    ("locomo-dev", "LoCoMo dev"),
    ("realtalk-dev", "REALTALK dev"),
    ("longmemeval-oracle", "LongMemEval oracle"),
    ("longmemeval-s", "LongMemEval S"),
)
# LoCoMo's category numbers (REALTALK uses the same layout); 5 is the
# unanswerable set, reported as abstention rather than recall.
LOCOMO_CATEGORIES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}
KS = (5, 10, 25)


@dataclass(frozen=True)
class Row:
    data_set: str
    category: str
    n: int
    before: dict[str, float | None]
    after: dict[str, float | None]


def _groups(summary: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(overall, category → figures) of either harness's summary."""
    if "overall_1_4" in summary:
        by = summary.get("by_category", {})
        cats = {LOCOMO_CATEGORIES[k]: v for k, v in by.items() if k in LOCOMO_CATEGORIES}
        return summary["overall_1_4"], cats
    return summary["overall"], dict(summary.get("by_type", {}))


def _figures(summary: dict[str, Any] | None, category: str | None) -> dict[str, float | None]:
    """recall@k and strict recall@10 (percent) of one category, or overall."""
    out: dict[str, float | None] = {f"R@{k}": None for k in KS}
    out["strict R@10"] = None
    if summary is None:
        return out
    overall, cats = _groups(summary)
    ranked = overall if category is None else cats.get(category)
    if ranked and ranked.get("n", 0):
        for k in KS:
            value = ranked.get(f"recall@{k}")
            out[f"R@{k}"] = None if value is None else 100 * value
    strict = summary.get("strict")
    if strict:
        s_overall, s_cats = _groups(strict)
        s = s_overall if category is None else s_cats.get(category)
        if s and s.get("n", 0) and s.get("recall@10") is not None:
            out["strict R@10"] = 100 * s["recall@10"]
    return out


def _abstention(summary: dict[str, Any] | None) -> tuple[float | None, int]:
    """Share (percent) of unanswerable questions with no strict hit, and how many there are."""
    if summary is None:
        return None, 0
    ab = summary.get("abstention") or {}
    n = int(ab.get("n", 0))
    if not n:
        return None, 0
    return 100 * float(ab["no_strict_hit_share"]), n


def load(results: Path, name: str, run: str) -> dict[str, Any] | None:
    path = results / f"{name}-{run}.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


def build(results: Path, before: str, after: str) -> tuple[list[Row], list[list[str]]]:
    """The rows of the recall table and of the abstention lines."""
    rows: list[Row] = []
    abstention: list[list[str]] = []
    for name, label in SETS:
        b, a = load(results, name, before), load(results, name, after)
        if a is None and b is None:
            continue
        ref = a if a is not None else b
        assert ref is not None
        overall, cats = _groups(ref)
        rows.append(
            Row(label, "all", int(overall.get("n", 0)), _figures(b, None), _figures(a, None))
        )
        for category, figures in cats.items():
            if not figures.get("n", 0):
                continue
            rows.append(
                Row(
                    label, category, int(figures["n"]), _figures(b, category), _figures(a, category)
                )
            )
        (ab_b, n_b), (ab_a, n_a) = _abstention(b), _abstention(a)
        if n_a or n_b:
            abstention.append([label, str(max(n_a, n_b)), f"{_pct(ab_b)} → {_pct(ab_a)}"])
    return rows, abstention


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _change(before: float | None, after: float | None) -> str:
    return f"{_pct(before)} → {_pct(after)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--before", default="final", help="run suffix of the 'before' files")
    parser.add_argument("--after", default="s12-final", help="run suffix of the 'after' files")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows, abstention = build(args.results, args.before, args.after)
    if not rows:
        print(f"no results for runs {args.before!r} or {args.after!r} in {args.results}")
        return 1
    metrics = [f"R@{k}" for k in KS] + ["strict R@10"]
    print_table(
        ["data set", "category", "n", *metrics],
        [
            [r.data_set, r.category, r.n, *(_change(r.before[m], r.after[m]) for m in metrics)]
            for r in rows
        ],
    )
    if abstention:
        print()
        print_table(["data set", "unanswerable", "no strict hit, %"], abstention)
    write_json(
        "quality-table",
        {
            "before": args.before,
            "after": args.after,
            "rows": [asdict(r) for r in rows],
            "abstention": [
                dict(zip(("data_set", "n", "change"), a, strict=True)) for a in abstention
            ],
        },
        args.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
