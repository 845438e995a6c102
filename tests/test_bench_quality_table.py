"""The before/after quality table reads both harnesses' JSON as they write it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.quality_table import build, main


def _cat(r5: float, r10: float, r25: float, n: int) -> dict[str, float | int]:
    return {"recall@5": r5, "recall@10": r10, "recall@25": r25, "n": n}


def _write(tmp: Path, name: str, payload: dict[str, object]) -> None:
    (tmp / name).write_text(json.dumps(payload), encoding="utf-8")


def test_rows_by_category_before_and_after(tmp_path: Path) -> None:
    # LoCoMo layout: numbered categories, 5 is the unanswerable set (not a row),
    # an empty category (n 0) is left out; "before" has no strict figures.
    _write(
        tmp_path,
        "locomo-dev-old.json",
        {
            "overall_1_4": _cat(0.5, 0.6, 0.7, 3),
            "by_category": {
                "1": _cat(0.25, 0.5, 0.75, 2),
                "2": _cat(1, 1, 1, 1),
                "4": _cat(0, 0, 0, 0),
            },
        },
    )
    _write(
        tmp_path,
        "locomo-dev-new.json",
        {
            "overall_1_4": _cat(0.6, 0.8, 0.9, 3),
            "by_category": {
                "1": _cat(0.5, 0.75, 1, 2),
                "2": _cat(1, 1, 1, 1),
                "4": _cat(0, 0, 0, 0),
                "5": _cat(0, 0, 0, 4),
            },
            "strict": {
                "overall_1_4": {"recall@10": 0.7, "n": 3},
                "by_category": {"1": {"recall@10": 0.5, "n": 2}},
            },
            "abstention": {"n": 4, "no_strict_hit_share": 0.75},
        },
    )
    # LongMemEval layout: question types; only "after" exists.
    _write(
        tmp_path,
        "longmemeval-s-new.json",
        {
            "overall": _cat(0.9, 0.95, 1, 2),
            "by_type": {"multi-session": _cat(0.8, 0.9, 1, 2)},
            "abstention": {"n": 7, "no_strict_hit_share": 1 / 7},
        },
    )
    rows, abstention = build(tmp_path, "old", "new")
    got = [(r.data_set, r.category, r.n) for r in rows]
    assert got == [
        ("LoCoMo dev", "all", 3),
        ("LoCoMo dev", "multi-hop", 2),
        ("LoCoMo dev", "temporal", 1),
        ("LongMemEval S", "all", 2),
        ("LongMemEval S", "multi-session", 2),
    ]
    multi = rows[1]
    assert multi.before == {"R@5": 25.0, "R@10": 50.0, "R@25": 75.0, "strict R@10": None}
    assert multi.after == {"R@5": 50.0, "R@10": 75.0, "R@25": 100.0, "strict R@10": 50.0}
    assert rows[3].before["R@10"] is None  # no "before" file for S
    assert abstention == [["LoCoMo dev", "4", "– → 75.0"], ["LongMemEval S", "7", "– → 14.3"]]


def test_no_files_is_a_clear_exit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--results", str(tmp_path), "--before", "x", "--after", "y"]) == 1
    assert "no results" in capsys.readouterr().out
