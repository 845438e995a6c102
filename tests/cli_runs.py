"""Running ``guildlore`` commands as real processes, and comparing what an
import leaves with a clean import of the same export (shared by the disk and
import-lock tests).

A clean import's day files hold the same lines in an order that depends on
which batch wrote first (batches run concurrently), so "the same journal" is:
the same day files, each with the same header and the same message lines,
each once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from memory.db.sqlite import driver as sqlite
from tests.helpers import REAL_EXPORT

ROOT = Path(__file__).resolve().parents[1]
IMPORT = ("--extractor", "rules", "--embeddings", "none")
GUILD = "1079907749569237093"
MEMBER = "130752422518718464"  # Konrad, who wrote many of the export's messages
# One command's deadline: generous for a loaded machine, and below the
# test's own (TEST_TIMEOUT_S) so a command that hangs is named, with what it
# printed, instead of the test timing out without a word.
RUN_TIMEOUT_S = 240
TEST_TIMEOUT_S = 1200  # tests that run several commands in turn


def guildlore(*args: object, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    command = [sys.executable, "-m", "bot", *map(str, args)]
    try:
        proc = subprocess.run(
            command,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        said = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
        raise AssertionError(
            f"guildlore {' '.join(map(str, args))} did not end in {RUN_TIMEOUT_S} s; "
            f"its stderr so far:\n{(said or '')[-4000:]}"
        ) from exc
    return proc.returncode, proc.stdout, proc.stderr


def problem_lines(stderr: str) -> list[str]:
    """stderr less the import's own header and progress lines."""
    return [
        line
        for line in stderr.splitlines()
        if line.strip()
        and not line.startswith("importing ")
        and not (line.startswith("guildlore import: ") and " file" in line and " into " in line)
    ]


def journal(folder: Path) -> dict[str, tuple[list[str], Counter[str]]]:
    """day file → (its header lines, its message lines counted)."""
    out = {}
    for path in sorted(folder.glob("*.md")):
        if path.name == "MEMORY.md":
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        out[path.name] = (
            [line for line in lines if not line.startswith("- ")],
            Counter(line for line in lines if line.startswith("- ")),
        )
    return out


def duplicates(folder: Path) -> int:
    return sum(n - 1 for _, lines in journal(folder).values() for n in lines.values() if n > 1)


def scalar(db: Path, sql: str) -> int:
    con = sqlite.connect(db, read_only=True)
    try:
        return int(con.execute(sql).fetchone()[0])
    finally:
        con.close()


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The export imported into a data dir with room: the reference."""
    data = tmp_path_factory.mktemp("clean") / "data"
    code, _, err = guildlore("import", REAL_EXPORT, "--data-dir", data, *IMPORT)
    assert code == 0, err
    return data


def assert_like_clean(data: Path, clean: Path) -> None:
    assert journal(data / "memory_journal") == journal(clean / "memory_journal")
    db, ref = data / "guildlore.sqlite3", clean / "guildlore.sqlite3"
    for sql in (
        "SELECT count(*) FROM messages",
        "SELECT count(*) FROM memory_facts",
        "SELECT count(*) FROM fact_history",
    ):
        assert scalar(db, sql) == scalar(ref, sql), sql
    assert (
        scalar(db, "SELECT count(*) FROM messages WHERE state != 'done' AND state != 'skipped'")
        == 0
    )
    assert scalar(db, "SELECT count(*) FROM messages WHERE state = 'done' AND journaled = 0") == 0
