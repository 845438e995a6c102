"""One import at a time into a data dir: a second one is refused in one line
naming the first, and two started together leave no duplicate journal line
and no extra history row (before the lock: 1,167 duplicated lines, 11 extra
history rows)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memory import import_lock
from memory.config import MemoryConfig
from memory.db.sqlite import driver as sqlite
from memory.db.sqlite.migrations import migrate
from tests.cli_runs import IMPORT, assert_like_clean, clean, duplicates, guildlore
from tests.helpers import REAL_EXPORT

ROOT = Path(__file__).resolve().parents[2]
__all__ = ["clean"]  # the fixture: a clean import of the export, the reference


def test_a_second_import_is_refused_in_one_line_naming_the_first(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with import_lock(MemoryConfig.for_data_dir(data)) as lock:
        code, out, err = guildlore("import", REAL_EXPORT, "--data-dir", data, *IMPORT)
        assert lock.read_text(encoding="utf-8").startswith(f'{{"pid": {os.getpid()}')
    assert code == 1, err
    assert out == "" and "Traceback" not in err
    (line,) = [ln for ln in err.splitlines() if ln.strip()]
    assert line.startswith(f"guildlore import: another import is running into {data} ")
    assert f"(pid {os.getpid()}, started " in line
    assert "wait for it to finish" in line
    assert not (data / "guildlore.sqlite3").exists()  # refused before opening anything


def test_two_imports_at_once_leave_no_duplicate(tmp_path: Path, clean: Path) -> None:
    data = tmp_path / "data"
    # An existing memory (its schema made), as an operator's data dir is.
    data.mkdir()
    con = sqlite.connect(data / "guildlore.sqlite3")
    try:
        migrate(con)
    finally:
        con.close()
    args = [sys.executable, "-m", "bot", "import", str(REAL_EXPORT), "--data-dir", str(data)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [*args, *IMPORT], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    results = [(p.wait(timeout=600), p.stderr.read().decode() if p.stderr else "") for p in procs]
    for p in procs:
        for stream in (p.stdout, p.stderr):
            if stream is not None:
                stream.close()
    codes = sorted(code for code, _ in results)
    # Either one was refused (the usual case), or one ran after the other.
    assert codes in ([0, 0], [0, 1]), results
    for code, err in results:
        assert "Traceback" not in err
        if code == 1:
            assert "another import is running into" in err
    assert duplicates(data / "memory_journal") == 0
    assert_like_clean(data, clean)
