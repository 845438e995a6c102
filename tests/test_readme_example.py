"""The docs' "What the model sees" example (docs/operating/model.md) is the
output of the code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_docs_example_request_is_generated_by_the_code() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "model_request_example.py"),
            "--check",
            str(ROOT / "docs" / "operating" / "model.md"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    doc = (ROOT / "docs" / "operating" / "model.md").read_text(encoding="utf-8")
    example = doc.split("<!-- model-request:start -->", 1)[1].split("<!-- model-request:end -->")[0]
    for needle in ("Known facts about this user:", '"name": "memory_query"', "[M1] "):
        assert needle in example
