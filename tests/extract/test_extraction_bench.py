"""``guildlore bench extraction``: a LoCoMo-layout conversation (written for
these tests, tests/data/extraction_conversation.json) or a DCE export imported
through ``import_files``, the facts scored against the gold observations;
the offline rules, and the LLM extractor through the fake OpenAI server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main as cli_main
from evals import extraction
from tests.fakeopenai import server_process

CONVERSATION = Path(__file__).resolve().parents[1] / "data" / "extraction_conversation.json"


def _run(tmp_path: Path, data: Path, *extra: str) -> dict[str, Any]:
    out = tmp_path / "summary.json"
    args = ["bench", "extraction", "--data", str(data), "--json", str(out), *extra]
    assert cli_main(args) == 0
    summary: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return summary


def test_rules_against_the_gold_observations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("GUILDLORE_LLM_BASE_URL", "OPENAI_API_KEY", "LLM_API_KEY", "GUILDLORE_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    summary = _run(tmp_path, CONVERSATION)
    assert summary["kind"] == "locomo" and summary["extractor"] == "rules"
    [conv] = summary["conversations"]
    # Ten turns; the rules read five facts: Ben's job, Ana's genealogy, Ana's
    # Greek (a negation), Ana's Latin, and Ben's Japanese, which no
    # observation names. "My grandmother's letters" and "I'm tired" give none.
    facts = sorted(s["fact"] for s in conv["sample"])
    assert facts == [
        "Ana does genealogy on weekends.",
        "Ana does not read Greek.",
        "Ana is learning Latin at night school.",
        "Ben is learning Japanese with an app.",
        "Ben works as a nurse at the children's hospital now.",
    ]
    assert conv["turns"] == 10 and conv["facts"] == 5
    assert conv["facts_per_100"] == 50.0
    assert conv["facts_per_speaker"] == {"Ana": 3, "Ben": 2}
    # Six observations: four are said almost word for word by a fact of their
    # turn; "got into genealogy through her grandmother's letters" and "is
    # tired" have none, whatever the threshold.
    assert conv["observations"] == 6
    assert conv["covered"] == {"0.5": 4, "0.6": 4, "0.7": 4}
    assert summary["overall"]["coverage"]["0.6"] == pytest.approx(4 / 6, abs=1e-4)
    # Four of the five facts come from an observation's evidence turn.
    assert conv["from_evidence"] == 4 and conv["from_evidence_share"] == 0.8
    unmatched = [s for s in conv["sample"] if s["observation"] is None]
    assert [s["fact"] for s in unmatched] == ["Ben is learning Japanese with an app."]
    printed = capsys.readouterr().out
    assert "cov@0.6" in printed and "66.7%" in printed and "(no observation)" in printed


def test_a_dce_export_counts_facts_per_100_messages_and_authors(tmp_path: Path) -> None:
    def message(n: int, author: str, text: str) -> dict[str, Any]:
        return {
            "id": str(1000 + n),
            "type": "Default",
            "timestamp": f"2024-03-01T10:{n:02d}:00+00:00",
            "content": text,
            "author": {"id": {"ana": "11", "ben": "12", "cyra": "13"}[author], "name": author},
        }

    lines = [
        ("ana", "I'm a palaeographer working on Byzantine manuscripts"),
        ("ana", "what do you think of line 3?"),
        ("ana", "I think it's an epsilon"),
        ("ben", "lol"),
        ("ben", "I see what you mean"),
        ("ben", "nice one"),
        ("cyra", "I do genealogy"),
    ]
    export = {
        "guild": {"id": "555", "name": "g"},
        "channel": {"id": "556", "type": "GuildTextChat", "name": "chat"},
        "messages": [message(i, a, t) for i, (a, t) in enumerate(lines)],
    }
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export), encoding="utf-8")
    summary = _run(tmp_path, path)
    assert summary["kind"] == "export"
    [block] = summary["conversations"]
    assert block["facts"] == 2 and block["turns"] == 7
    assert block["facts_per_100"] == pytest.approx(100 * 2 / 7, abs=0.01)
    # ana and ben wrote three messages each; only ana has a fact
    assert block["authors_3plus"] == 2 and block["authors_3plus_with_fact"] == 1
    assert summary["overall"]["authors_3plus_with_fact_share"] == 0.5


def test_the_same_harness_measures_the_llm_extractor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("OPENAI_API_KEY", "LLM_API_KEY", "GUILDLORE_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    with server_process() as base_url:
        monkeypatch.setenv("GUILDLORE_LLM_BASE_URL", base_url)
        monkeypatch.setenv("GUILDLORE_LLM_CHAT_MODEL", "fake-extractor")
        summary = _run(tmp_path, CONVERSATION)
    assert summary["extractor"] == "llm:fake-extractor"
    [conv] = summary["conversations"]
    # The fake model answers every message of three words or more with
    # "<author> said <its first words>.": what the harness scores is its work.
    assert conv["facts"] >= 5
    assert all(" said " in s["fact"] for s in conv["sample"])
    assert all(imp["extract_errors"] == 0 for imp in summary["imports"])


def test_data_that_is_neither_layout_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}', encoding="utf-8")
    assert cli_main(["bench", "extraction", "--data", str(path)]) == 2
    err = capsys.readouterr().err
    assert "neither a LoCoMo-layout data set nor a DiscordChatExporter export" in err
    assert "Traceback" not in err
    assert cli_main(["bench", "extraction", "--data", str(path), "--k", "5"]) == 2


def test_scoring_by_hand() -> None:
    import numpy as np

    from memory import Fact

    def fact(i: int, subject: str, text: str) -> Fact:
        return Fact(
            id=i, guild_id="g", channel_id=None, subject=subject, fact=text, fact_type="other",
            evidence_text=None, source_message_id=None, confidence=0.6, is_active=True,
            created_at="t", updated_at="t",
        )  # fmt: skip

    chat = extraction.Chat(
        name="c",
        guild_id="g",
        export={},
        speakers={"a": "A", "b": "B"},
        turn_of={"m1": "D1:1", "m2": "D1:2"},
        authored=extraction.Counter({"a": 1, "b": 1}),
        observations=[
            extraction.Observation("a", "obs a", frozenset({"m1"})),
            extraction.Observation("b", "obs b", frozenset({"m2"})),
        ],
    )
    vec = {
        "obs a": np.array([1.0, 0.0]),
        "obs b": np.array([0.0, 1.0]),
        "fact a": np.array([0.8, 0.6]),  # cosine 0.8 to "obs a"
        "fact b elsewhere": np.array([0.0, 1.0]),  # B's, but from A's turn
    }
    found = [
        extraction.Found(fact(1, "a", "fact a"), frozenset({"m1"})),
        extraction.Found(fact(2, "b", "fact b elsewhere"), frozenset({"m1"})),
    ]
    block = extraction.score_chat(chat, found, vec, turns=2)
    # B's fact is not sourced from B's observation's turn: it covers nothing
    assert block["covered"] == {"0.5": 1, "0.6": 1, "0.7": 1}
    assert block["from_evidence"] == 2  # both come from an evidence turn (m1)
    vec["fact a"] = np.array([0.6, 0.8])  # cosine 0.6
    block = extraction.score_chat(chat, found, vec, turns=2)
    assert block["covered"] == {"0.5": 1, "0.6": 1, "0.7": 0}
