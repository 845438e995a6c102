"""The journal after an interrupted write: a line is never left cut short, a
killed writer's temp file (which may hold erased text) is gone at the next
start, an unfinished last line is cut and its message's line written again,
and owed lines are written at start. Real files, a real tmpfs for the full
disk, a real SIGKILLed process for the leftover."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memory.db.sqlite import driver as sqlite
from memory.file_writes import remove_leftovers
from memory.journal import Journal, format_line, parse_line
from tests.helpers import CHANNEL, GUILD, msg
from tests.tmpfs import fill, tmpfs

ROOT = Path(__file__).resolve().parents[2]
DAY = "2024-01-01"


def _line(n: int, text: str) -> tuple[str, str, str, str, str, str]:
    return (f"{DAY}T10:{n // 60:02d}:{n % 60:02d}.000Z", "Ana", "1001", "9", "8", text)


def test_a_line_the_full_disk_cuts_short_is_cut_back_and_written_later(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "64k") as disk:
        journal = Journal(disk / "journal")
        journal.append(*_line(0, "hello"))
        filler = fill(disk)
        written = [_line(0, "hello")]
        failed = None
        for n in range(1, 200):
            line = _line(n, "x" * 150 + str(n))
            try:
                journal.append(*line)
            except OSError:
                failed = line
                break
            written.append(line)
        assert failed is not None, "the disk never filled"
        data = (disk / "journal" / f"{DAY}.md").read_text(encoding="utf-8")
        # Whole lines only, exactly those that were reported written.
        assert data.endswith("\n")
        entries = [e for e in map(parse_line, data.splitlines()) if e is not None]
        assert [e.content for e in entries] == [line[5] for line in written]
        assert format_line(*failed) not in data

        filler.unlink()
        result = journal.append_missing([failed, written[-1]])
        assert (result.written, result.present, result.unplaceable) == (1, 1, 0)
        lines = (disk / "journal" / f"{DAY}.md").read_text(encoding="utf-8").splitlines()
        assert lines.count(format_line(*failed)) == 1
        assert lines.count(format_line(*written[-1])) == 1


def test_append_missing_replaces_a_line_an_older_version_cut_short(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal")
    a, b, c = _line(1, "first"), _line(2, "the second line, cut by a full disk"), _line(3, "third")
    full_b = format_line(*b)
    path = tmp_path / "journal" / f"{DAY}.md"
    journal.append(*a)
    # What the old append left: a fragment, then the next line on a new line.
    with open(path, "a", encoding="utf-8") as f:
        f.write(full_b[:60] + "\n" + format_line(*c) + "\n")
    result = journal.append_missing([b, c])
    assert (result.written, result.present) == (1, 1)
    lines = path.read_text(encoding="utf-8").splitlines()
    messages = [line for line in lines if line.startswith("- ")]
    assert messages == [format_line(*a), full_b, format_line(*c)]  # in place, whole


_KILLED_WRITER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from memory import file_writes

    def hang(*args):  # killed between writing the temp file and renaming it
        print("written", flush=True)
        time.sleep(600)

    file_writes.os.replace = hang
    file_writes.atomic_write_bytes(Path(sys.argv[1]), sys.argv[2].encode())
    """
)


def _killed_writer(target: Path, text: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(target), text],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "written"
    return proc


async def test_a_killed_writers_temp_file_is_removed_at_the_next_start(
    tmp_path: Path, make_memory: Callable[..., Any]
) -> None:
    data = tmp_path / "data"
    journal_dir = data / "memory_journal"
    journal_dir.mkdir(parents=True)
    secret = "Ana's deleted message: the door code is 4471"
    proc = _killed_writer(journal_dir / f"{DAY}.md", secret)
    try:
        (left,) = [p for p in journal_dir.iterdir() if p.name.endswith(".tmp")]
        # Its writer lives (it holds the temp file's lock): not touched.
        assert remove_leftovers(journal_dir) == []
        assert left.exists()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # And one left by a run long gone, named as atomic_write_bytes names them.
    (journal_dir / ".MEMORY.md.a1b2c3d4.tmp").write_text(secret, encoding="utf-8")

    await make_memory(embeddings="none", data_dir=data)

    assert not [p.name for p in journal_dir.iterdir() if p.name.endswith(".tmp")]
    for path in journal_dir.iterdir():
        assert "4471" not in path.read_text(encoding="utf-8", errors="replace"), path


def _set(db: Path, sql: str, *args: Any) -> None:
    con = sqlite.connect(db)
    try:
        con.execute(sql, args)
    finally:
        con.close()


def _count(db: Path, sql: str) -> int:
    con = sqlite.connect(db, read_only=True)
    try:
        return int(con.execute(sql).fetchone()[0])
    finally:
        con.close()


@pytest.mark.sqlite_only("the journal files are appended on SQLite only")
async def test_an_unfinished_last_line_is_cut_and_written_again_at_start(
    tmp_path: Path, make_memory: Callable[..., Any], store_backend: str
) -> None:
    data = tmp_path / "data"
    mem = await make_memory(embeddings="none", data_dir=data)
    first = msg("The first message of the day", created_at=f"{DAY}T09:00:00.000Z")
    last = msg("Ana moved to Lisbon in March", created_at=f"{DAY}T10:00:00.000Z")
    for m in (first, last):
        await mem.ingest_message(m)
        assert await mem.settle()
    await mem.close()
    path = data / "memory_journal" / f"{DAY}.md"
    text = path.read_text(encoding="utf-8")
    whole = text.splitlines()[-1]
    assert whole.endswith("Ana moved to Lisbon in March")
    # A power cut in the middle of the last line.
    path.write_text(text[: -len(whole) - 1] + whole[:70], encoding="utf-8")

    mem = await make_memory(embeddings="none", data_dir=data)

    lines = path.read_text(encoding="utf-8").splitlines()
    assert path.read_text(encoding="utf-8").endswith("\n")
    assert lines.count(whole) == 1
    assert not [ln for ln in lines if ln.startswith("- ") and ln != whole and whole.startswith(ln)]
    assert await mem.journal_owed.count() == 0


@pytest.mark.sqlite_only("the journal files are appended on SQLite only")
async def test_owed_lines_are_counted_and_written_at_start(
    tmp_path: Path, make_memory: Callable[..., Any], store_backend: str
) -> None:
    data = tmp_path / "data"
    mem = await make_memory(embeddings="none", data_dir=data)
    texts = [f"Message number {n} about the papyrus scans" for n in range(6)]
    for n, text in enumerate(texts):
        await mem.ingest_message(msg(text, created_at=f"{DAY}T1{n}:00:00.000Z"))
    assert await mem.settle()
    await mem.close()
    path = data / "memory_journal" / f"{DAY}.md"
    before = path.read_text(encoding="utf-8")
    # What a full disk left: the last three lines never written, owed.
    kept = [line for line in before.splitlines(keepends=True) if not line.startswith("- ")]
    kept += [line for line in before.splitlines(keepends=True) if line.startswith("- ")][:3]
    path.write_text("".join(kept), encoding="utf-8")
    db = data / "guildlore.sqlite3"
    _set(db, "UPDATE messages SET journaled = 0 WHERE content IN (?, ?, ?)", *texts[3:])

    from memory import disk_status

    assert disk_status(db, data / "memory_journal").journal_owed == 3

    mem = await make_memory(embeddings="none", data_dir=data)

    assert sorted(path.read_text(encoding="utf-8").splitlines()) == sorted(before.splitlines())
    assert await mem.journal_owed.count() == 0
    assert mem.journal_owed.written == 3
    assert _count(db, "SELECT count(*) FROM messages WHERE journaled = 0") == 0


@pytest.mark.sqlite_only("nothing is owed with the journal rendered from PostgreSQL")
async def test_owed_lines_wait_while_the_disk_is_still_full(
    tmp_path: Path, make_memory: Callable[..., Any], store_backend: str
) -> None:
    """The engine starts all the same; the lines stay owed for the next round."""
    data = tmp_path / "data"
    with tmpfs(data / "memory_journal", "64k") as journal_dir:
        mem = await make_memory(embeddings="none", data_dir=data)
        filler = fill(journal_dir)
        for n in range(40):
            await mem.ingest_message(
                msg(f"Line {n} that the journal cannot take " + "y" * 100, channel=CHANNEL)
            )
        assert await mem.settle()
        owed = await mem.journal_owed.count()
        assert owed > 0
        health = await mem.admin.health()
        assert health["storage"]["journal_owed"] == owed
        assert any("journal lines are owed" in w for w in health["warnings"])
        await mem.close()

        mem = await make_memory(embeddings="none", data_dir=data)
        assert await mem.journal_owed.count() == owed  # still no room

        filler.unlink()
        assert await mem.journal_owed.write() == owed
        assert await mem.journal_owed.count() == 0
        days = await asyncio.to_thread(mem.journal.daily_files)
        lines = [
            e.content
            for d in days
            for e in mem.journal.read_entries(d)
            if e.guild_id == GUILD and e.content.startswith("Line ")
        ]
        assert len(lines) == 40 == len(set(lines))
