"""``guildlore import`` during an LLM outage, then ``doctor`` and ``retry``.

The fake OpenAI server runs as its own process (the CLI runs its own event
loop); every chat call fails during the outage, then a fresh server answers
with one fact per message. Imports run through ``bot.cli.main`` in-process.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main as cli_main
from memory.db.sqlite import driver as sqlite
from tests.fakeopenai import server_process

ROOT = Path(__file__).resolve().parents[2]
GUILD = "1300000000000000001"
CHANNEL = "1300000000000000002"
TEXTS = [
    "I restore old sailing boats in Kiel.",
    "I keep bees on the roof of my flat.",
    "I teach Latin at a school in Lyon.",
    "ok",
    "I collect maps of old Naples.",
]


def _export(path: Path) -> Path:
    messages = [
        {
            "id": str(1300000000000001000 + i),
            "type": "Default",
            "timestamp": f"2024-05-01T10:{i:02d}:00.000+00:00",
            "content": text,
            "author": {"id": str(1300000000000000100 + i % 2), "name": f"member{i % 2}"},
        }
        for i, text in enumerate(TEXTS)
    ]
    doc = {
        "guild": {"id": GUILD, "name": "Outage Guild"},
        "channel": {"id": CHANNEL, "name": "general", "type": "GuildTextChat"},
        "messages": messages,
    }
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main(list(args))
    return code, out.getvalue()


def _import(data: Path, export: Path) -> tuple[int, dict[str, Any]]:
    code, text = _cli(
        "import", str(export), "--data-dir", str(data), "--json", "--extractor", "llm",
        "--embeddings", "none",
    )  # fmt: skip
    return code, json.loads(text)


def _states(data: Path) -> dict[str, str]:
    con = sqlite.connect(data / "guildlore.sqlite3", read_only=True)
    try:
        return {r[0]: r[1] for r in con.execute("SELECT content, state FROM messages")}
    finally:
        con.close()


def _facts(data: Path) -> list[str]:
    con = sqlite.connect(data / "guildlore.sqlite3", read_only=True)
    try:
        return sorted(r[0] for r in con.execute("SELECT fact FROM memory_facts"))
    finally:
        con.close()


@pytest.fixture
def llm_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("GUILDLORE_LLM_TIMEOUT_S", "1")
    monkeypatch.setenv("GUILDLORE_LLM_MAX_RETRIES", "0")
    return monkeypatch


def test_an_outage_leaves_the_import_incomplete_and_the_same_import_finishes_it(
    tmp_path: Path, llm_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    export = _export(tmp_path / "export.json")
    data = tmp_path / "data"
    with server_process("--fault-rate", "1", "--fault-timeout", "3") as url:
        llm_env.setenv("OPENAI_BASE_URL", url)
        code, first = _import(data, export)
    assert code == 3, first
    assert first["extract_errors"] >= 1 and first["facts_added"] == 0
    assert first["waiting_retry"] == 4 and first["failed"] == 0
    states = _states(data)
    assert states["ok"] in ("done", "skipped")
    assert {states[t] for t in TEXTS if t != "ok"} == {"retry"}

    # doctor shows them, with the way out.
    capsys.readouterr()
    code, out = _cli("doctor", "--offline", "--data-dir", str(data))
    assert "warn  inbox: 4 messages wait for a retry" in out and "guildlore retry" in out
    code, listing = _cli("retry", "--list", "--data-dir", str(data))
    assert code == 3 and listing.count("reason: extraction failed") == 4

    with server_process() as url:
        llm_env.setenv("OPENAI_BASE_URL", url)
        code, second = _import(data, export)
    assert code == 0, second
    assert second["waiting_retry"] == 0 and second["failed"] == 0
    assert second["facts_added"] == 4
    assert {_states(data)[t] for t in TEXTS if t != "ok"} == {"done"}
    assert _facts(data) == sorted(
        f"member{i % 2} said {' '.join(t.split()[:8]).rstrip('.')}."
        for i, t in enumerate(TEXTS)
        if t != "ok"
    )
    code, out = _cli("doctor", "--offline", "--data-dir", str(data))
    assert "ok    inbox: no message failed" in out


def test_retry_brings_back_messages_that_gave_up(
    tmp_path: Path, llm_env: pytest.MonkeyPatch
) -> None:
    export = _export(tmp_path / "export.json")
    data = tmp_path / "data"
    llm_env.setenv("GUILDLORE_INGEST_RETRY_MAX_ATTEMPTS", "1")
    with server_process("--fault-rate", "1") as url:
        llm_env.setenv("OPENAI_BASE_URL", url)
        code, first = _import(data, export)
        assert code == 3 and first["failed"] == 4 and first["waiting_retry"] == 0
        # Failed messages are not retried by a re-import: they wait for an operator.
        code, again = _import(data, export)
        assert code == 3 and again["already_imported"] == len(TEXTS)
    with server_process() as url:
        llm_env.setenv("OPENAI_BASE_URL", url)
        code, text = _cli(
            "retry", "--data-dir", str(data), "--extractor", "llm", "--embeddings", "none",
            "--json",
        )  # fmt: skip
    result = json.loads(text)
    assert code == 0, result
    assert result["requeued_failed"] == 4 and result["still_failed"] == 0
    assert len(_facts(data)) == 4
