"""The operator subcommands: search, forget, snapshot, reindex, doctor; progress; dispatch."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest

from bot.cli import COMMANDS, _module, build_parser
from bot.cli import main as cli_main
from bot.commands._common import Progress, fmt_duration
from bot.commands.doctor_discord import token_problem
from memory.db.sqlite import driver as sqlite

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "bot" / "data" / "sample_guild.json"
GUILD = "1200000000000000001"
DORIAN = "1210000000000031676"  # "Dorian is a Hellenist." in the sample


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli_main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample guild imported once (keyword search only); tests copy it."""
    data = tmp_path_factory.mktemp("sample") / "data"
    code = cli_main(
        [
            "import",
            str(SAMPLE),
            "--data-dir",
            str(data),
            "--embeddings",
            "none",
            "--extractor",
            "rules",
        ]
    )
    assert code == 0
    return data


@pytest.fixture
def data(imported: Path, tmp_path: Path) -> Path:
    import shutil

    target = tmp_path / "data"
    shutil.copytree(imported, target)
    return target


# -- dispatch ------------------------------------------------------------------------------------


def test_every_command_has_a_module_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert _module("import").__name__ == "bot.commands.import_"
    parser = build_parser()
    help_text = parser.format_help()
    for name in COMMANDS:
        assert name in help_text
    for name in ("demo", "import", "search", "forget", "snapshot", "reindex", "doctor"):
        with pytest.raises(SystemExit) as exc:
            cli_main([name, "--help"])
        assert exc.value.code == 0
        assert "--data-dir" in capsys.readouterr().out


# -- search ----------------------------------------------------------------------------------------


def test_search_table(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        capsys, "search", "Hellenist", "--guild", GUILD, "--data-dir", str(data), "--scope", "facts"
    )
    assert code == 0
    header, rule, first, *_ = out.splitlines()
    assert header.split() == ["score", "kind", "who", "text"]
    assert set(rule.replace(" ", "")) == {"-"}
    assert "profile" in first and "Dorian" in first and "Dorian is a Hellenist." in first


def test_search_json_and_scope(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        capsys,
        "search",
        "greek",
        "--guild",
        GUILD,
        "--data-dir",
        str(data),
        "--scope",
        "all",
        "--limit",
        "20",
        "--json",
    )
    assert code == 0
    doc = json.loads(out)
    # the offline rules read many self-descriptions about Greek: facts fill the
    # first places, messages follow
    assert doc["guildId"] == GUILD and 0 < len(doc["hits"]) <= 20
    kinds = {h["kind"] for h in doc["hits"]}
    assert kinds <= {"fact", "message"} and "message" in kinds
    for hit in doc["hits"]:
        assert hit["guild_id"] == GUILD
        for key in (
            "id",
            "created_at",
            "subject",
            "fact",
            "fact_type",
            "evidence_text",
            "source_message_id",
            "confidence",
            "score",
            "semanticScore",
            "lexicalScore",
        ):
            assert key in hit


def test_search_no_hits_and_unknown_guild(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "search", "zzqxv", "--guild", GUILD, "--data-dir", str(data))
    assert code == 0 and "no hits" in out
    code, _, err = _run(capsys, "search", "greek", "--guild", "999", "--data-dir", str(data))
    assert code == 1 and "no guild 999" in err and GUILD in err


def test_search_refuses_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "search", "x", "--guild", "abc", "--data-dir", str(tmp_path))
    assert code == 2 and "Discord id" in err
    code, _, err = _run(capsys, "search", "x", "--guild", "1", "--data-dir", str(tmp_path))
    assert code == 1 and "no database" in err
    assert not (tmp_path / "guildlore.sqlite3").exists()


def test_search_does_not_process_the_inbox(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A read command on a data dir the bot also uses must not replay its pending messages."""
    con = sqlite.connect(data / "guildlore.sqlite3")
    con.execute("UPDATE messages SET state = 'pending' WHERE id = (SELECT min(id) FROM messages)")
    con.close()
    code, _, _ = _run(capsys, "search", "greek", "--guild", GUILD, "--data-dir", str(data))
    assert code == 0
    con = sqlite.connect(data / "guildlore.sqlite3", read_only=True)
    assert con.execute("SELECT count(*) FROM messages WHERE state = 'pending'").fetchone()[0] == 1
    con.close()


# -- forget, snapshot -----------------------------------------------------------------------------------


def test_forget_erases_the_member(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(
        capsys, "forget", "--guild", GUILD, "--user", DORIAN, "--data-dir", str(data)
    )
    assert code == 2 and "--yes" in err  # stdin is not a terminal: refuse rather than ask

    code, out, _ = _run(
        capsys,
        "forget",
        "--guild",
        GUILD,
        "--user",
        DORIAN,
        "--data-dir",
        str(data),
        "--yes",
        "--json",
    )
    assert code == 0
    report = json.loads(out)
    assert report["facts"] >= 1 and report["messages"] >= 1 and report["journal_lines"] >= 1
    con = sqlite.connect(data / "guildlore.sqlite3", read_only=True)
    for table, column in (("memory_facts", "subject"), ("messages", "author_id")):
        n = con.execute(f"SELECT count(*) FROM {table} WHERE {column} = ?", (DORIAN,)).fetchone()[0]
        assert n == 0
    con.close()
    journal = "".join(p.read_text() for p in (data / "memory_journal").glob("*.md"))
    assert DORIAN not in journal

    code, out, _ = _run(capsys, "search", "Hellenist", "--guild", GUILD, "--data-dir", str(data))
    assert "Dorian" not in out


def test_snapshot_prints_memory_md(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (data / "memory_journal" / "MEMORY.md").unlink()
    code, out, err = _run(capsys, "snapshot", "--data-dir", str(data))
    assert code == 0
    assert out.startswith("# Durable Memory Snapshot")
    # the snapshot keeps each member's newest facts: the offline rules now
    # read more of what Dorian says of herself than "is a paleographer"
    assert "Dorian is a Hellenist." in out
    assert "MEMORY.md" in err
    assert (data / "memory_journal" / "MEMORY.md").read_text(encoding="utf-8") == out


def test_snapshot_without_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "snapshot", "--data-dir", str(tmp_path / "none"))
    assert code == 1 and "no database" in err


def test_data_dir_from_environment(
    data: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GUILDLORE_DATA_DIR", str(data))
    code, out, _ = _run(capsys, "snapshot", "--quiet")
    assert code == 0 and out.strip() == str(data / "memory_journal" / "MEMORY.md")


# -- reindex ------------------------------------------------------------------------------------


def test_reindex_fills_missing_vectors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(SAMPLE.read_text(encoding="utf-8"))
    doc["messages"] = [m for m in doc["messages"] if m["type"] in ("Default", "Reply")][:40]
    small = tmp_path / "small.json"
    small.write_text(json.dumps(doc), encoding="utf-8")
    data = tmp_path / "data"
    assert cli_main(["import", str(small), "--data-dir", str(data), "--embeddings", "none"]) == 0
    capsys.readouterr()

    code, out, _ = _run(capsys, "reindex", "--data-dir", str(data))
    assert code == 0 and "message vectors written" in out
    con = sqlite.connect(data / "guildlore.sqlite3", read_only=True)
    messages = con.execute("SELECT count(*) FROM messages WHERE state = 'done'").fetchone()[0]
    vectors = con.execute("SELECT count(*) FROM message_vectors").fetchone()[0]
    con.close()
    assert vectors == messages > 0

    code, out, _ = _run(capsys, "reindex", "--data-dir", str(data))
    assert code == 0 and "0 fact vectors and 0 message vectors" in out


# -- doctor ----------------------------------------------------------------------------------------


def test_doctor_healthy_offline(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "doctor", "--offline", "--data-dir", str(data))
    assert code == 0, out
    for name in (
        "sqlite:",
        "extension loading:",
        "sqlite-vec:",
        "fts5:",
        "fts5 secure-delete:",
        "embedding tokenizer:",
        "local embedding model:",
        "data dir:",
        "disk space:",
        "database:",
        "llm:",
        "discord token:",
    ):
        assert name in out
    assert "FAIL" not in out
    assert "384 dims" in out
    assert "sha256 verified, 30522 tokens" in out
    assert "Everything required works" in out


def test_doctor_fails_on_a_damaged_tokenizer(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import memory.embed.local as local

    damaged = tmp_path / "tokenizer.json"
    damaged.write_bytes(local.default_tokenizer_path().read_bytes()[:-10])
    monkeypatch.setattr(local, "_TOKENIZER_PATH", damaged)
    code, out, _ = _run(capsys, "doctor", "--offline", "--data-dir", str(data))
    assert code == 1
    assert "FAIL  embedding tokenizer" in out and "expected be50c362" in out
    assert "reinstall guildlore" in out


def test_doctor_explains_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("DISCORD_TOKEN", "definitely-not-a-token")
    code, out, _ = _run(capsys, "doctor", "--offline", "--data-dir", str(blocker / "data"))
    assert code == 1
    assert "FAIL  discord token" in out and "three dot-separated" in out
    assert "FAIL  data dir" in out and "→" in out
    assert "problems to fix" in out


def test_doctor_reports_bad_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GUILDLORE_NOT_A_SETTING", "1")
    code, out, _ = _run(capsys, "doctor", "--offline", "--data-dir", str(tmp_path / "d"))
    assert code == 2
    assert "FAIL  settings" in out and "GUILDLORE_NOT_A_SETTING" in out
    assert "sqlite-vec:" in out  # the other checks still run


def _token(user_id: str) -> str:
    first = base64.urlsafe_b64encode(user_id.encode()).decode().rstrip("=")
    return f"{first}.GhJkLm.{'a' * 38}"


def test_token_format() -> None:
    assert token_problem(_token("123456789012345678")) is None
    assert "Bot " in (token_problem("Bot " + _token("123456789012345678")) or "")
    assert token_problem("abc") is not None
    assert token_problem(_token("hello-not-an-id-xx")) is not None


# -- progress ------------------------------------------------------------------------------------------


def test_progress_plain_lines_when_not_a_terminal() -> None:
    stream = io.StringIO()
    p = Progress(1000, stream=stream, tty=False, line_interval_s=0)
    p.update(250, 10)
    p.update(1000, 40, force=True)
    p.finish()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("importing  25.0% 250 B/1.0 KB  10 msgs")
    assert "ETA" in lines[0] and "msg/s" in lines[0]
    assert "100.0%" in lines[-1] and "done" in lines[-1]
    assert "\r" not in stream.getvalue()


def test_progress_redraws_one_line_on_a_terminal() -> None:
    stream = io.StringIO()
    p = Progress(2_000_000, stream=stream, tty=True)
    p.update(1_000_000, 5, force=True)
    p.message("a warning")
    p.update(2_000_000, 9, force=True)
    p.finish()
    text = stream.getvalue()
    assert text.count("\r") >= 3 and "[############------------]" in text
    assert "a warning\n" in text and text.endswith("\n")


def test_progress_rate_stops_when_everything_is_read() -> None:
    stream = io.StringIO()
    p = Progress(1000, stream=stream, tty=False, line_interval_s=0)
    p.started -= 10  # read for 10 s
    p.update(1000, 500)
    assert "50 msg/s" in p.line()
    p.started -= 90  # a later stage (message vectors) takes another 90 s
    p.update(1000, 500, "embedding messages: 500 done")
    line = p.line()
    assert "50 msg/s" in line and "embedding messages" in line, line


@pytest.mark.parametrize(
    ("seconds", "text"), [(5, "5s"), (75, "1m15s"), (3725, "1h02m"), (float("inf"), "?")]
)
def test_fmt_duration(seconds: float, text: str) -> None:
    assert fmt_duration(seconds) == text


# -- purge-guild -------------------------------------------------------------------------------------


def test_purge_guild_erases_all_of_it(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "purge-guild", GUILD, "--data-dir", str(data))
    assert code == 2 and "--yes" in err  # stdin is not a terminal: refuse rather than ask
    code, _, err = _run(capsys, "purge-guild", "not-an-id", "--yes", "--data-dir", str(data))
    assert code == 2 and "Discord id" in err

    code, out, _ = _run(capsys, "purge-guild", GUILD, "--data-dir", str(data), "--yes", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["rows"]["messages"] >= 1 and report["rows"]["memory_facts"] >= 1
    assert report["journal_lines"] >= 1
    con = sqlite.connect(data / "guildlore.sqlite3", read_only=True)
    for table in ("messages", "memory_facts", "fact_history", "guild_settings", "guilds"):
        n = con.execute(f"SELECT count(*) FROM {table} WHERE guild_id = ?", (GUILD,)).fetchone()[0]
        assert n == 0, table
    [(kind,)] = con.execute("SELECT kind FROM action_log WHERE guild_id = ?", (GUILD,)).fetchall()
    assert kind == "guild_purged"
    con.close()
    for path in data.rglob("*"):
        if path.is_file():
            assert b"Hellenist" not in path.read_bytes(), path
    code, out, _ = _run(capsys, "search", "Hellenist", "--guild", GUILD, "--data-dir", str(data))
    assert "Dorian" not in out


def test_search_answers_when_we_talked_about_something_from_messages_by_default(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No fact holds Plato; the channel's messages do (April-May 2024).
    code, out, _ = _run(
        capsys,
        "search",
        "when did we talk about Plato?",
        "--guild",
        GUILD,
        "--data-dir",
        str(data),
        "--json",
    )
    assert code == 0
    hits = json.loads(out)["hits"]
    assert hits and hits[0]["kind"] == "message" and "plato" in hits[0]["fact"].lower()
    assert hits[0]["created_at"].startswith("2024-0")
    code, out, _ = _run(
        capsys,
        "search",
        "when did we talk about Plato?",
        "--guild",
        GUILD,
        "--data-dir",
        str(data),
        "--scope",
        "facts",
    )
    assert code == 0 and "no hits" in out
