"""``guildlore import`` end to end: the real export, re-import, broken files, 200 MB, Ctrl-C.

Imports run through the CLI (``bot.cli.main`` in-process, or ``python -m bot``
in a subprocess where signals or peak memory matter) into a real engine on
``tmp_path``. Most use ``--embeddings none`` to keep the suite fast: the
ingest path (inbox, queue, journal, extraction, facts) is the same, and
vectors are covered by bench/import.py and tests/bot/test_cli.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main as cli_main
from memory.clock import normalise_iso
from memory.db.sqlite import driver as sqlite
from tests.helpers import REAL_EXPORT

ROOT = Path(__file__).resolve().parents[2]
REAL = REAL_EXPORT
SAMPLE = ROOT / "bot" / "data" / "sample_guild.json"

INGESTED_TYPES = {"Default", "Reply", "ChatInputCommand", "ContextMenuCommand", "20", "23"}


def _import(
    data_dir: Path, *paths: Path, extra: tuple[str, ...] = ()
) -> tuple[int, dict[str, Any]]:
    """Run ``guildlore import --json`` in-process; (exit code, summary)."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main(
            [
                "import",
                *map(str, paths),
                "--data-dir",
                str(data_dir),
                "--json",
                "--embeddings",
                "none",
                *extra,
            ]
        )
    text = out.getvalue()
    return code, json.loads(text) if text.strip().startswith("{") else {}


def _db(data_dir: Path) -> Any:
    return sqlite.connect(data_dir / "guildlore.sqlite3", read_only=True)


def _journal_lines(data_dir: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in sorted((data_dir / "memory_journal").glob("????-??-??.md")):
        out[path.stem] = [
            ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.startswith("- ")
        ]
    return out


def _expected(path: Path) -> list[dict[str, Any]]:
    """Messages of a DCE file that should be ingested, computed independently."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    return [
        m
        for m in doc["messages"]
        if m.get("type", "Default") in INGESTED_TYPES and (m.get("content") or "").strip()
    ]


# -- the real export ------------------------------------------------------------------------------


@pytest.mark.timeout(600)
def test_real_export_through_the_cli(tmp_path: Path) -> None:
    data = tmp_path / "data"
    code, summary = _import(data, REAL)
    assert code == 0, summary
    doc = json.loads(REAL.read_text(encoding="utf-8"))
    expected = _expected(REAL)
    total = len(doc["messages"])

    # Counts: the file's messages minus the skipped types (and empty posts).
    assert summary["messages"] == len(expected)
    assert summary["new"] == len(expected)
    assert sum(summary["skipped"].values()) == total - len(expected)
    assert summary["skipped"]["system_type:ThreadCreated"] == sum(
        m["type"] == "ThreadCreated" for m in doc["messages"]
    )
    assert summary["settled"] is True and summary["errors"] == []

    con = _db(data)
    rows = {r["id"]: r for r in con.execute("SELECT * FROM messages")}
    assert len(rows) == len(expected)
    assert {r["source"] for r in rows.values()} == {"import"}
    # Every message is processed: none left pending or dropped.
    assert {r["state"] for r in rows.values()} <= {"done", "skipped"}
    guild_id, channel_id = doc["guild"]["id"], doc["channel"]["id"]

    # Authors and reply links, message by message.
    replies = 0
    for m in expected:
        row = rows[m["id"]]
        author = m["author"]
        assert row["guild_id"] == guild_id and row["channel_id"] == channel_id
        assert row["author_id"] == author["id"]
        assert row["author_name"] == (author.get("nickname") or author["name"])
        assert bool(row["is_bot"]) == bool(author.get("isBot"))
        assert row["created_at"] == normalise_iso(m["timestamp"])
        ref = m.get("reference")
        if m["type"] == "Reply" and ref and ref.get("messageId"):
            assert row["reply_to_id"] == ref["messageId"]
            replies += 1
        elif not ref:
            assert row["reply_to_id"] is None
    assert replies > 100

    # Names recorded for the dashboard and the snapshot.
    assert (
        con.execute("SELECT name FROM guilds WHERE guild_id = ?", (guild_id,)).fetchone()[0]
        == doc["guild"]["name"]
    )
    assert (
        con.execute("SELECT name FROM channels WHERE channel_id = ?", (channel_id,)).fetchone()[0]
        == doc["channel"]["name"]
    )
    members = dict(
        con.execute(
            "SELECT user_id, display_name FROM members WHERE guild_id = ?", (guild_id,)
        ).fetchall()
    )
    last_name = {
        m["author"]["id"]: m["author"].get("nickname") or m["author"]["name"] for m in expected
    }
    assert members == last_name

    # Journals land on the days the messages were written, one line each.
    journaled = [r for r in rows.values() if r["journaled"]]
    by_day = Counter(r["created_at"][:10] for r in journaled)
    lines = _journal_lines(data)
    assert {day: len(ls) for day, ls in lines.items()} == dict(by_day)
    first = min(expected, key=lambda m: m["timestamp"])
    day = datetime.fromisoformat(first["timestamp"]).astimezone(UTC).strftime("%Y-%m-%d")
    assert any(f"({first['author']['id']})" in ln for ln in lines[day])
    # Only texts too short to keep (under 2 characters after cleaning) have no line.
    assert {r["id"] for r in journaled} == {r["id"] for r in rows.values() if r["state"] == "done"}
    assert len(journaled) > 0.95 * len(expected)

    facts = con.execute(
        "SELECT count(*) FROM memory_facts WHERE guild_id = ?", (guild_id,)
    ).fetchone()[0]
    # Pinned messages of the export became canon lore beside the extracted facts.
    pinned = sum(1 for m in expected if m.get("isPinned") is True)
    assert summary["pinned"] == pinned > 0
    assert facts == summary["facts_added"] + pinned
    assert summary["facts_added"] > 0
    con.close()


# -- re-import, broken files --------------------------------------------------------------------


def _state(data: Path) -> tuple[Any, ...]:
    con = _db(data)
    try:
        return (
            con.execute("SELECT count(*), sum(state = 'done') FROM messages").fetchone()[:],
            con.execute("SELECT count(*) FROM memory_facts").fetchone()[0],
            con.execute("SELECT count(*) FROM fact_history").fetchone()[0],
            con.execute("SELECT count(*) FROM action_log WHERE kind = 'memory_fact'").fetchone()[0],
        )
    finally:
        con.close()


def test_reimport_is_a_no_op(tmp_path: Path) -> None:
    data = tmp_path / "data"
    code, first = _import(data, SAMPLE)
    assert code == 0 and first["new"] == first["messages"] == len(_expected(SAMPLE))
    before, journal_before = _state(data), _journal_lines(data)

    code, again = _import(data, SAMPLE)
    assert code == 0
    assert again["new"] == 0 and again["resumed"] == 0
    assert again["already_imported"] == first["messages"]
    assert again["facts_added"] == 0 and again["facts_updated"] == 0
    assert _state(data) == before
    assert _journal_lines(data) == journal_before


def test_truncated_file_keeps_what_was_read_and_resumes(tmp_path: Path) -> None:
    raw = SAMPLE.read_bytes()
    cut = int(len(raw) * 0.6)
    broken = tmp_path / "export.json"
    broken.write_bytes(raw[:cut])
    data = tmp_path / "data"

    code, summary = _import(data, broken)
    assert code == 1
    assert len(summary["errors"]) == 1
    error = summary["errors"][0]
    assert str(broken) in error and "at byte" in error
    position = int(error.split("at byte ")[1].split(":")[0])
    assert 0 < position <= cut
    assert 0 < summary["messages"] < len(_expected(SAMPLE))
    assert summary["settled"] is True
    # What was read before the error is imported and fully processed.
    con = _db(data)
    states = Counter(r[0] for r in con.execute("SELECT state FROM messages"))
    con.close()
    assert sum(states.values()) == summary["messages"]
    assert set(states) <= {"done", "skipped"}

    # Fixing the file and importing again finishes the job; nothing twice.
    broken.write_bytes(raw)
    code, rest = _import(data, broken)
    assert code == 0
    assert rest["already_imported"] == summary["messages"]
    assert rest["new"] == len(_expected(SAMPLE)) - summary["messages"]
    lines = sum(len(v) for v in _journal_lines(data).values())
    con = _db(data)
    assert lines == con.execute("SELECT count(*) FROM messages WHERE journaled = 1").fetchone()[0]
    con.close()


def test_truncated_file_message_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = SAMPLE.read_bytes()
    broken = tmp_path / "cut.json"
    broken.write_bytes(raw[: len(raw) // 3])
    code = cli_main(
        ["import", str(broken), "--data-dir", str(tmp_path / "d"), "--embeddings", "none"]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert f"guildlore import: error: {broken} at byte" in err
    assert "run the same import again" in err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"guild": {"id": "1"}, "channel": {"id": "2"}}', "wrong schema"),
        ('{"hello": "world"}', "wrong schema"),
        ('[{"messages": []}]', "wrong schema"),
        ('"just a string"', "not a DiscordChatExporter JSON export"),
        ("<html></html>", "not a DiscordChatExporter JSON export"),
    ],
)
def test_wrong_schema(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "wrong.json"
    path.write_text(text, encoding="utf-8")
    code, summary = _import(tmp_path / "data", path)
    assert code == 1
    assert summary["messages"] == 0
    assert len(summary["errors"]) == 1 and expected in summary["errors"][0]
    assert str(path) in summary["errors"][0]


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "empty.json"
    path.write_text(text, encoding="utf-8")
    code, summary = _import(tmp_path / "data", path)
    assert code == 1
    assert "file is empty" in summary["errors"][0]
    assert summary["messages"] == 0


def test_one_bad_file_does_not_stop_the_others(tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "a-empty.json").write_text("", encoding="utf-8")
    (folder / "b-sample.json").write_bytes(SAMPLE.read_bytes())
    code, summary = _import(tmp_path / "data", folder)
    assert code == 1
    assert summary["files"] == 1 and summary["messages"] == len(_expected(SAMPLE))
    assert len(summary["errors"]) == 1 and "a-empty.json" in summary["errors"][0]


def _bad_kinds_folder(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    """A folder with the sample export plus one file of each bad kind."""
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "a-sample.json").write_bytes(SAMPLE.read_bytes())
    bad = {
        "channel_number": folder / "b-channel-number.json",
        "guild_list": folder / "c-guild-list.json",
        "loop": folder / "d-loop.json",
        "loop_pair": folder / "e-loop-one.json",
        "dangling": folder / "f-dangling.json",
    }
    bad["channel_number"].write_text(
        '{"guild": {"id": "1", "name": "G"}, "channel": 7, "messages": []}', encoding="utf-8"
    )
    bad["guild_list"].write_text(
        '{"guild": [1, 2], "channel": {"id": "2", "name": "c"}, "messages": []}',
        encoding="utf-8",
    )
    bad["loop"].symlink_to(bad["loop"].name)
    bad["loop_pair"].symlink_to("e-loop-two.json")
    (folder / "e-loop-two.json").symlink_to(bad["loop_pair"].name)
    bad["dangling"].symlink_to("nowhere/export.json")
    return folder, bad


def _run_import_subprocess(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``guildlore import``; a run that does not end is sent SIGTERM, then killed,
    and the test fails saying which of the two ended it."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"the import hung and ignored SIGTERM: {err[-2000:]}") from None
        raise AssertionError(f"the import hung (SIGTERM ended it): {err[-2000:]}") from None
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


@pytest.mark.timeout(600)
def test_bad_kinds_of_file_are_one_line_each_and_the_rest_imports(tmp_path: Path) -> None:
    """Wrongly typed header fields, symlink loops, a dangling symlink and a FIFO in
    one folder: each is one line for its file (the FIFO a counted skip, not read),
    the good export imports, and the run ends on its own."""
    folder, bad = _bad_kinds_folder(tmp_path)
    fifo = folder / "g-pipe.json"
    os.mkfifo(fifo)
    data = tmp_path / "data"
    run = _run_import_subprocess(
        _cli("import", str(folder), "--data-dir", str(data), "--embeddings", "none", "--json")
    )
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode == 1, run.stderr
    summary = json.loads(run.stdout)
    assert summary["files"] == 1
    assert summary["messages"] == summary["new"] == len(_expected(SAMPLE))
    assert summary["settled"] is True

    errors = summary["errors"]
    assert len(errors) == len(bad) + 1  # both links of the loop pair
    for name, path in bad.items():
        (line,) = [e for e in errors if str(path) in e]
        assert "\n" not in line, name
    assert "'channel'" in next(e for e in errors if str(bad["channel_number"]) in e)
    assert "'guild'" in next(e for e in errors if str(bad["guild_list"]) in e)
    assert "symbolic link" in next(e for e in errors if str(bad["loop"]) in e)
    assert "symbolic link" in next(e for e in errors if str(bad["dangling"]) in e)
    assert all(str(fifo) not in e for e in errors)
    (skip,) = summary["skipped_files"]
    assert str(fifo) in skip and "FIFO" in skip
    err_lines = [ln for ln in run.stderr.splitlines() if ln.startswith("guildlore import: error:")]
    assert len(err_lines) == len(errors)
    assert f"skipped {fifo}" in run.stderr

    con = _db(data)
    assert con.execute("SELECT count(*) FROM messages").fetchone()[0] == len(_expected(SAMPLE))
    con.close()


@pytest.mark.timeout(600)
def test_a_fifo_alone_with_a_good_export_is_skipped_and_the_run_succeeds(tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "a.json").write_bytes(SAMPLE.read_bytes())
    os.mkfifo(folder / "b.json")
    run = _run_import_subprocess(
        _cli("import", str(folder), "--data-dir", str(tmp_path / "d"), "--embeddings", "none")
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert "1 file not read" in run.stdout


def test_missing_path_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(["import", str(tmp_path / "nope.json"), "--data-dir", str(tmp_path / "d")])
    assert code == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_raw_api_array_needs_guild(tmp_path: Path) -> None:
    msgs = [
        {
            "id": str(1300000000000000000 + i),
            "channel_id": "1300000000000000999",
            "author": {"id": "1300000000000000555", "username": "ada", "global_name": "Ada"},
            "content": f"I love sailing on lake number {i}.",
            "timestamp": f"2024-02-0{i + 1}T10:00:00.000000+00:00",
            "type": 0,
        }
        for i in range(3)
    ]
    path = tmp_path / "api.json"
    path.write_text(json.dumps(msgs), encoding="utf-8")
    code, summary = _import(tmp_path / "d1", path)
    assert code == 0 and summary["messages"] == 0 and summary["skipped"] == {"no_guild": 3}
    code, summary = _import(tmp_path / "d2", path, extra=("--guild", "1300000000000000001"))
    assert code == 0 and summary["new"] == 3
    assert sorted(_journal_lines(tmp_path / "d2")) == ["2024-02-01", "2024-02-02", "2024-02-03"]


def test_progress_and_summary_are_readable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli_main(
        ["import", str(SAMPLE), "--data-dir", str(tmp_path / "d"), "--embeddings", "none"]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert "importing" in captured.err and "100.0%" in captured.err and "msg/s" in captured.err
    assert "\r" not in captured.err  # not a terminal: plain lines
    out = captured.out
    for word in ("Imported:", "messages", "skipped", "facts", "vectors", "rate"):
        assert word in out
    # The sample's system messages are counted by type among the skipped.
    doc = json.loads(SAMPLE.read_text(encoding="utf-8"))
    threads = sum(m["type"] == "ThreadCreated" for m in doc["messages"])
    assert threads and f"system_type:ThreadCreated {threads}" in out


# -- Ctrl-C ---------------------------------------------------------------------------------------


def _script(name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "bot", *args]


def _wait_for_messages(db: Path, at_least: int, proc: subprocess.Popen[Any], timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "import ended before it could be interrupted"
        if db.exists():
            try:
                con = sqlite.connect(db, read_only=True)
                n = con.execute("SELECT count(*) FROM messages").fetchone()[0]
                con.close()
            except sqlite.Error:
                n = 0
            if n >= at_least:
                return int(n)
        time.sleep(0.05)
    raise AssertionError(f"fewer than {at_least} messages after {timeout} s")


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_mid_import_then_resume(tmp_path: Path, presses: int) -> None:
    """One Ctrl-C: finish what was accepted, exit 130. Two: stop at once, leave
    the rest pending. Either way the same command then completes the import,
    with nothing processed twice."""
    big = _script("make_big_export")
    export = tmp_path / "export.json"
    written = big.write_big_export(export, 12 * 1024 * 1024, seed=3)
    data = tmp_path / "data"
    db = data / "guildlore.sqlite3"
    args = _cli("import", str(export), "--data-dir", str(data), "--embeddings", "none", "--json")

    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_messages(db, 1500, proc, timeout=120)
    proc.send_signal(signal.SIGINT)
    if presses == 2:
        time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "run the same command again" in err
    first = json.loads(out)
    assert first["interrupted"] is True
    assert 0 < first["messages"] < written.importable

    con = sqlite.connect(db, read_only=True)
    states = Counter(r[0] for r in con.execute("SELECT state FROM messages"))
    con.close()
    assert sum(states.values()) == first["messages"]
    if presses == 1:
        # Everything accepted was finished before exiting.
        assert first["settled"] is True
        assert set(states) <= {"done", "skipped"}

    done = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    second = json.loads(done.stdout)
    # Already-finished messages are no-ops; unfinished ones are picked up
    # (by the start-up replay or as "resumed"); the rest are new.
    assert second["already_imported"] + second["resumed"] + second["new"] == written.importable
    assert second["new"] == written.importable - first["messages"]
    con = sqlite.connect(db, read_only=True)
    total, finished, journaled = con.execute(
        "SELECT count(*), sum(state IN ('done', 'skipped')), sum(journaled) FROM messages"
    ).fetchone()
    con.close()
    assert total == finished == written.importable
    lines = sum(len(v) for v in _journal_lines(data).values())
    assert lines == journaled, "no journal line written twice"


# -- 200 MB in bounded memory ----------------------------------------------------------------------

# Runs the import as its only child, so RUSAGE_CHILDREN's peak is the import's
# own, and samples the child's RSS while it runs: a leak shows as growth in the
# second half, where a bounded import stays flat.
_RSS_WRAPPER = """
import json, resource, subprocess, sys, time
began = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
samples = []
def sample():
    try:
        with open(f"/proc/{proc.pid}/status") as fh:
            rss = next(int(l.split()[1]) for l in fh if l.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return
    samples.append((time.perf_counter() - began, rss))
while True:
    try:
        out, err = proc.communicate(timeout=0.25)
        break
    except subprocess.TimeoutExpired:
        sample()
took = time.perf_counter() - began
print(json.dumps({"code": proc.returncode, "seconds": took, "stdout": out,
                  "stderr": err[-3000:], "samples": samples,
                  "peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_200mb_export_imported_in_bounded_memory(tmp_path: Path) -> None:
    """The whole ingest path (inbox, queue, journal, rule extraction, facts)
    over a 200 MB export through ``guildlore import``; embeddings off to keep
    the run time sane (bench/import.py covers vectors).

    The generated content has the real export's mix: a few messages in a
    hundred give the extractor a fact and a handful of people write most of
    them (see scripts/make_big_export.py). An older mix made a fact
    candidate of every third message, which doubled the run time without
    showing anything more about memory."""
    big = _script("make_big_export")
    export = tmp_path / "big.json"
    written = big.write_big_export(export, 200 * 1024 * 1024)
    assert written.bytes >= 200 * 1024 * 1024
    data = tmp_path / "data"
    args = _cli("import", str(export), "--data-dir", str(data), "--embeddings", "none", "--json")
    run = subprocess.run(
        [sys.executable, "-c", _RSS_WRAPPER, *args], capture_output=True, text=True, check=True
    )
    result = json.loads(run.stdout)
    assert result["code"] == 0, result["stderr"]
    summary = json.loads(result["stdout"])
    peak_mib = result["peak_kib"] / 1024
    samples = [(t, kib / 1024) for t, kib in result["samples"]]
    assert len(samples) >= 8, "the import ended too fast to watch its memory"
    half = [mib for t, mib in samples if t <= samples[-1][0] / 2]
    growth = max(mib for _, mib in samples) - max(half)
    print(
        f"\n200 MB import through the engine: {written.bytes / 2**20:.0f} MiB, "
        f"{summary['messages']} messages, {summary['facts_added']} facts in "
        f"{result['seconds']:.0f} s ({summary['messages_per_s']:.0f} msg/s); "
        f"peak RSS {peak_mib:.0f} MiB (the command says {summary['peak_rss_mib']:.0f} MiB), "
        f"{max(half):.0f} MiB by half time, +{growth:.0f} MiB in the second half"
    )
    assert summary["messages"] == summary["new"] == written.importable
    assert summary["skipped"] == written.skipped
    assert summary["settled"] is True
    assert summary["facts_added"] > 100
    # The command reports its own peak, and it is the one measured from outside.
    assert 0.9 * peak_mib <= summary["peak_rss_mib"] <= peak_mib + 1
    assert peak_mib < 400, f"peak RSS {peak_mib:.0f} MiB"
    # Bounded means flat: by half time the import holds all it ever will. A leak
    # of a few hundred bytes per message shows here long before the peak limit.
    assert growth < 64, f"RSS grew {growth:.0f} MiB in the second half of the import"
    con = sqlite.connect(data / "guildlore.sqlite3", read_only=True)
    assert (
        con.execute("SELECT count(*) FROM messages WHERE state = 'done'").fetchone()[0]
        > 0.95 * written.importable
    )
    con.close()
    os.remove(export)
