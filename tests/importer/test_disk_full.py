"""A full or read-only disk on the user paths, with real processes and a real
tmpfs: one line that says what happened and what to do, never a traceback;
and after making room, the same command finishes the work — an import's
journals end up as a clean import's, owed journal lines are written, a
forget erases what it had left.

"Identical to a clean import" is ``tests.cli_runs.assert_like_clean``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from memory.db.sqlite import driver as sqlite
from tests.cli_runs import (
    GUILD,
    IMPORT,
    MEMBER,
    TEST_TIMEOUT_S,
    assert_like_clean,
    clean,
    duplicates,
    guildlore,
    journal,
    problem_lines,
    scalar,
)
from tests.helpers import REAL_EXPORT
from tests.tmpfs import fill, read_only, resize, tmpfs

__all__ = ["clean"]  # the fixture: a clean import of the export, the reference
# Several commands in turn, each with its own deadline (tests.cli_runs).
pytestmark = pytest.mark.timeout(TEST_TIMEOUT_S)


def test_an_import_onto_a_full_disk_fails_in_one_line_and_a_rerun_matches_a_clean_import(
    tmp_path: Path, clean: Path
) -> None:
    with tmpfs(tmp_path / "disk", "2000k") as disk:
        data = disk / "data"
        code, out, err = guildlore("import", REAL_EXPORT, "--data-dir", data, *IMPORT)
        assert code == 1, err
        assert "Traceback" not in err and out == ""
        (line,) = problem_lines(err)
        assert line.startswith(f"guildlore import: the disk holding {data} is full"), line
        assert "free space" in line and "run the same import again" in line

        resize(disk, "40m")  # room again
        code, out, err = guildlore("import", REAL_EXPORT, "--data-dir", data, *IMPORT)
        assert code == 0, err
        assert problem_lines(err) == []
        assert_like_clean(data, clean)


def test_journal_lines_a_full_journal_disk_refused_are_owed_then_written(
    tmp_path: Path, clean: Path
) -> None:
    """The journal on a disk of its own that fills up: the messages are stored,
    the lines owed (summary, doctor), and written by the next start."""
    data = tmp_path / "data"
    with tmpfs(tmp_path / "journal", "160k") as journal_dir:
        env = {"GUILDLORE_JOURNAL_DIR": str(journal_dir)}
        code, out, err = guildlore("import", REAL_EXPORT, "--data-dir", data, *IMPORT, env=env)
        assert code == 3, err  # finished, but something is waiting
        assert "Traceback" not in err
        assert problem_lines(err) == []
        owed = scalar(
            data / "guildlore.sqlite3",
            "SELECT count(*) FROM messages WHERE state = 'done' AND journaled = 0",
        )
        assert owed > 0
        assert f"warning    {owed} journal lines could not be written" in out
        assert duplicates(journal_dir) == 0

        code, out, err = guildlore("doctor", "--offline", "--data-dir", data, env=env)
        assert f"warn  journal: {owed} journal lines are owed" in out, out
        assert f"FAIL  journal dir: {journal_dir} is not writable (No space left on device)" in out
        assert "→ free space there" in out

        resize(journal_dir, "40m")
        code, out, err = guildlore("import", REAL_EXPORT, "--data-dir", data, *IMPORT, env=env)
        assert code == 0, err
        assert journal(journal_dir) == journal(clean / "memory_journal")
        code, out, _ = guildlore("doctor", "--offline", "--data-dir", data, env=env)
        assert "ok    journal: no journal line owed" in out, out


def test_a_forget_on_a_full_disk_says_so_in_one_line_and_finishes_when_run_again(
    tmp_path: Path, clean: Path
) -> None:
    with tmpfs(tmp_path / "disk", "40m") as disk:
        data = disk / "data"
        subprocess.run(["cp", "-a", str(clean), str(data)], check=True)
        filler = fill(disk, leave_bytes=64 * 1024)
        args = ("forget", "--guild", GUILD, "--user", MEMBER, "--yes", "--data-dir", data)
        code, out, err = guildlore(*args)
        assert code == 1, err
        assert "Traceback" not in err
        (line,) = problem_lines(err)
        assert line.startswith(f"guildlore forget: the disk holding {data} is full"), line
        assert "run the same forget again" in line

        filler.unlink()
        code, out, err = guildlore(*args)
        assert code == 0, err
        for path in (data / "memory_journal").iterdir():
            text = path.read_text(encoding="utf-8")
            assert f"({MEMBER})" not in text, path.name
        assert (
            scalar(
                data / "guildlore.sqlite3",
                f"SELECT count(*) FROM messages WHERE author_id = '{MEMBER}'",
            )
            == 0
        )


@pytest.mark.parametrize("wal_files", [False, True], ids=["closed", "wal-files-left"])
def test_a_read_only_data_dir_is_one_line_on_every_command(
    tmp_path: Path, clean: Path, wal_files: bool
) -> None:
    with tmpfs(tmp_path / "disk", "40m") as disk:
        data = disk / "data"
        subprocess.run(["cp", "-a", str(clean), str(data)], check=True)
        if wal_files:
            # Its -wal and -shm files beside it (a process that did not close,
            # or a copy taken while one was open): SQLite then opens the file
            # on a read-only disk without a word and refuses only the first
            # write — ``run`` started and failed every job (seen under load).
            con = sqlite.connect(clean / "guildlore.sqlite3")
            try:
                con.execute("SELECT count(*) FROM messages").fetchone()
                for suffix in ("-wal", "-shm"):
                    name = f"guildlore.sqlite3{suffix}"
                    shutil.copy(clean / name, data / name)
            finally:
                con.close()
        read_only(disk)
        runs = {
            "import": ("import", REAL_EXPORT, "--data-dir", data, *IMPORT),
            "forget": ("forget", "--guild", GUILD, "--user", MEMBER, "--yes", "--data-dir", data),
            "retry": ("retry", "--data-dir", data),
            "run": ("run", "--data-dir", data),
        }
        env = {"GUILDLORE_FAKE_GATEWAY": "1", "GUILDLORE_DASHBOARD_PORT": "0"}
        for name, args in runs.items():
            code, out, err = guildlore(*args, env=env)
            assert code == 1, (name, err)
            assert "Traceback" not in err, (name, err)
            lines = [
                line
                for line in problem_lines(err)
                if " INFO " not in line  # ``run`` logs its start-up at INFO
            ]
            assert len(lines) == 1, (name, err)
            assert lines[0].startswith(
                f"guildlore {name}: the disk holding {data} cannot be written"
            )
            assert "make it writable" in lines[0]
