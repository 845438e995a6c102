from __future__ import annotations

import re
import subprocess
import sys
import threading
from datetime import date
from pathlib import Path

import pytest

from memory.errors import ConfigError, InvalidInput
from memory.journal import Journal, JournalEntry, parse_line

T = "2024-05-01T12:00:00.000Z"


def entry_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("- ")]


def test_header_written_once_and_exact_line_format(tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal")
    first = j.append(T, "Alice", "111", "g1", "c1", "hello there")
    j.append("2024-05-01T13:30:05.250+00:00", "Bob", "222", "g1", "c2", "second")

    path = tmp_path / "journal" / "2024-05-01.md"
    assert first.path == path and first.day == date(2024, 5, 1)
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0] == "# Daily Memory Log 2024-05-01"
    assert lines[1] and not lines[1].startswith("#")  # one-line description
    assert lines[2:5] == ["", "## Entries", ""]
    assert lines[5:] == [
        "- 2024-05-01T12:00:00.000Z | Alice (111) | [guild:g1 channel:c1] hello there",
        "- 2024-05-01T13:30:05.250Z | Bob (222) | [guild:g1 channel:c2] second",
    ]
    assert text.count("# Daily Memory Log") == 1
    assert text.endswith("\n")


def test_pipes_and_newlines_are_stripped_from_fields(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    line = j.append(T, "Evil | Name\r\nX", "333", "g1", "c1", "a | b\nc\r\nd")
    assert (
        line.text
        == "- 2024-05-01T12:00:00.000Z | Evil / Name  X (333) | [guild:g1 channel:c1] a / b c  d"
    )
    assert len(line.path.read_text(encoding="utf-8").splitlines()) == 6
    (entry,) = j.read_entries(line.path)
    assert entry == JournalEntry(
        time="2024-05-01T12:00:00.000Z",
        author_name="Evil / Name  X",
        author_id="333",
        guild_id="g1",
        channel_id="c1",
        content="a / b c  d",
    )


def test_name_with_parentheses_parses(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    line = j.append(T, "Al (the great) (admin)", "444", "g1", "c1", "uses (parens) too")
    entry = parse_line(line.text)
    assert entry is not None
    assert entry.author_name == "Al (the great) (admin)"
    assert entry.author_id == "444"
    assert entry.content == "uses (parens) too"


def test_day_follows_configured_time_zone(tmp_path: Path) -> None:
    j = Journal(tmp_path, tz="America/New_York")
    # 03:00Z on the 10th is 22:00 on the 9th in New York.
    late = j.append("2024-03-10T03:00:00Z", "A", "1", "g", "c", "late evening message")
    # 05:00Z is just past local midnight (EST, before the DST switch at 07:00Z).
    early = j.append("2024-03-10T05:00:00Z", "A", "1", "g", "c", "just after midnight")
    assert late.path.name == "2024-03-09.md"
    assert early.path.name == "2024-03-10.md"
    # The line itself keeps UTC time.
    assert late.text.startswith("- 2024-03-10T03:00:00.000Z | ")


def test_utc_default_and_imported_history_lands_on_its_day(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.append("2024-05-02T00:00:00Z", "A", "1", "g", "c", "today's message")
    old = j.append("2021-01-31T23:59:59.999Z", "A", "1", "g", "c", "imported old message")
    assert old.path.name == "2021-01-31.md"
    assert [p.name for p in j.daily_files()] == ["2024-05-02.md", "2021-01-31.md"]
    assert [p.name for p in j.daily_files(newest_first=False)] == ["2021-01-31.md", "2024-05-02.md"]


def test_unknown_time_zone_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        Journal(tmp_path, tz="Mars/Olympus_Mons")


def test_append_once_for_replay(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    assert j.append_once(T, "Alice", "111", "g1", "c1", "hello there") is True
    assert j.append_once(T, "Alice", "111", "g1", "c1", "hello there") is False
    # A restarted process (new object) sees it too.
    assert Journal(tmp_path).append_once(T, "Alice", "111", "g1", "c1", "hello there") is False
    # A prefix of an existing line is not the line.
    assert j.append_once(T, "Alice", "111", "g1", "c1", "hello") is True
    # Nor is the same text in another day's file.
    assert j.append_once("2020-01-01T10:00:00Z", "Alice", "111", "g1", "c1", "hello") is True
    lines = [e.content for p in j.daily_files() for e in j.read_entries(p)]
    assert sorted(lines) == ["hello", "hello", "hello there"]


def test_line_survives_sigkill_right_after_append(tmp_path: Path) -> None:
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from memory.journal import Journal\n"
        "j = Journal(Path(sys.argv[1]))\n"
        "j.append('2024-05-01T12:00:00Z', 'A', '1', 'g', 'c', 'written before the kill')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == -9, proc.stderr
    assert [e.content for e in Journal(tmp_path).read_entries(tmp_path / "2024-05-01.md")] == [
        "written before the kill"
    ]


def test_append_after_torn_line_starts_a_new_line(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    line = j.append(T, "A", "1", "g", "c", "complete line")
    with open(line.path, "ab") as f:
        f.write(b"- 2024-05-01T12:00:01.000Z | A (1) | [guild:g chan")  # died mid-write
    j.append("2024-05-01T12:00:02Z", "B", "2", "g", "c", "after the crash")
    assert [e.content for e in j.read_entries(line.path)] == ["complete line", "after the crash"]


def test_redact_user_is_per_guild_and_scrubs_mentions(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.append("2024-05-01T10:00:00Z", "Victim", "555", "g1", "c1", "my secret is tea")
    j.append("2024-05-01T10:01:00Z", "Friend", "666", "g1", "c1", "hey <@555> and <@5555>, hi")
    j.append("2024-05-01T10:02:00Z", "Victim", "555", "g2", "c9", "I stay in guild two")
    j.append("2024-05-01T10:03:00Z", "Friend", "666", "g2", "c9", "<@555> stays here too")
    j.append("2024-05-02T09:00:00Z", "Victim", "555", "g1", "c1", "another day")
    j.append("2024-05-02T09:01:00Z", "Other", "777", "g1", "c1", "unrelated message")

    assert j.redact_user("g1", "555") == 2

    day1 = j.read_entries(tmp_path / "2024-05-01.md")
    day2 = j.read_entries(tmp_path / "2024-05-02.md")
    assert [(e.author_id, e.guild_id, e.content) for e in day1] == [
        ("666", "g1", "hey <@[redacted]> and <@5555>, hi"),
        ("555", "g2", "I stay in guild two"),
        ("666", "g2", "<@555> stays here too"),
    ]
    assert [(e.author_id, e.content) for e in day2] == [("777", "unrelated message")]
    # Header intact, no temp files left behind.
    assert (
        (tmp_path / "2024-05-01.md")
        .read_text(encoding="utf-8")
        .startswith("# Daily Memory Log 2024-05-01\n")
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2024-05-01.md", "2024-05-02.md"]
    # Idempotent; appends still land in the rewritten file.
    assert j.redact_user("g1", "555") == 0
    j.append("2024-05-01T11:00:00Z", "Friend", "666", "g1", "c1", "after forget")
    assert j.read_entries(tmp_path / "2024-05-01.md")[-1].content == "after forget"


def test_redact_requires_ids(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        Journal(tmp_path).redact_user("g1", "  ")


def test_redact_with_concurrent_appends_loses_no_lines(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    for i in range(50):
        j.append(f"2024-05-01T10:00:{i:02d}Z", "Victim", "555", "g1", "c1", f"victim {i}")
    per_thread = 150
    start = threading.Barrier(4)

    def writer(n: int) -> None:
        start.wait()
        for i in range(per_thread):
            j.append(f"2024-05-01T11:00:00.{i:03d}Z", f"W{n}", f"90{n}", "g1", "c1", f"w{n} {i}")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    start.wait()
    removed = sum(j.redact_user("g1", "555") for _ in range(5))
    for t in threads:
        t.join()

    entries = j.read_entries(tmp_path / "2024-05-01.md")
    assert removed == 50
    assert all(e.author_id != "555" for e in entries)
    assert len(entries) == 3 * per_thread


def test_read_day_and_entries(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    assert j.daily_files() == []
    assert j.read_day("2024-05-01") == ""
    j.append(T, "A", "1", "g", "c", "hello there")
    assert j.read_day("2024-05-01") == j.read_day(date(2024, 5, 1))
    assert j.read_day("2024-05-01").startswith("# Daily Memory Log 2024-05-01")
    with pytest.raises(InvalidInput):
        j.read_day("../../etc/passwd")
    (tmp_path / "MEMORY.md").write_text("# not a daily file\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("x\n", encoding="utf-8")
    assert [p.name for p in j.daily_files()] == ["2024-05-01.md"]
    assert j.read_entries(tmp_path / "missing.md") == []


def test_the_docs_describe_the_layout_the_journal_writes(tmp_path: Path) -> None:
    j = Journal(tmp_path / "memory_journal", "Europe/Berlin")
    line = j.append("2024-03-09T23:30:00Z", "Ana", "1", "10", "20", "late in Berlin")
    assert line.path.relative_to(tmp_path).as_posix() == "memory_journal/2024-03-10.md"
    doc = (Path(__file__).resolve().parents[2] / "docs" / "memory.md").read_text(encoding="utf-8")
    step = re.search(r"\*\*Journal\.\*\*(.*?)\n\d+\. ", doc, re.S)
    assert step is not None
    journal_step = step[1]
    assert "`memory_journal/YYYY-MM-DD.md`" in journal_step
    assert "`timezone`" in journal_step and "[guild:" in journal_step
