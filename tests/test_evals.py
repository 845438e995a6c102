"""The retrieval benchmark harnesses (evals/), end to end through the real engine
on tiny data files written here, and their scoring on hand-made rankings."""

from __future__ import annotations

import asyncio
import gzip
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main as cli_main
from evals import common, locomo, longmemeval
from evals.longmemeval import Item, QuestionResult, newest_first

# -- a tiny LongMemEval file ---------------------------------------------------------------------

Q_DATE = "2023/06/07 (Wed) 04:15"
ABS_DATE = "2023/07/01 (Sat) 09:00"


def _turn(role: str, content: str, evidence: bool = False) -> dict[str, Any]:
    return {"role": role, "content": content, "has_answer": evidence}


def _items() -> list[dict[str, Any]]:
    # The newer session comes first in the file: time, not file order, decides
    # which evidence is the newest.
    new_session = [
        _turn("user", "I keep my old sneakers in the shoe rack in my closet now.", True),
        _turn("assistant", "A shoe rack keeps them tidy and dry."),
        _turn("user", ""),  # empty: skipped, the later turns keep their index
        _turn("user", "Thanks, that helps with the hallway too."),
    ]
    old_session = [
        _turn("user", "I stuffed the sneakers under the bed for a while.", True),
        _turn("assistant", "Under the bed works if the box is ventilated."),
        _turn("user", "Any tips for cleaning suede?"),
    ]
    pet_session = [
        _turn("user", "My dog is called Biscuit and he loves the park.", True),
        _turn("assistant", "Biscuit is a lovely name for a dog."),
        _turn("user", "He is a two year old beagle."),
    ]
    garden_session = [
        _turn("user", "The tomatoes in my garden finally turned red."),
        _turn("assistant", "Great, pick them when they are firm."),
    ]
    return [
        {
            "question_id": "ku1",
            "question_type": "knowledge-update",
            "question": "Where do I keep my old sneakers now?",
            "answer": "in the shoe rack in my closet",
            "question_date": Q_DATE,
            "haystack_session_ids": ["new", "old"],
            "haystack_dates": ["2023/05/26 (Fri) 13:05", "2023/05/20 (Sat) 12:36"],
            "haystack_sessions": [new_session, old_session],
            "answer_session_ids": ["new", "old"],
        },
        {
            "question_id": "ssu1",
            "question_type": "single-session-user",
            "question": "What is my dog called?",
            "answer": "Biscuit",
            "question_date": "2023/06/10 (Sat) 08:00",
            "haystack_session_ids": ["garden", "pet"],
            "haystack_dates": ["2023/06/01 (Thu) 10:00", "2023/06/02 (Fri) 18:30"],
            "haystack_sessions": [garden_session, pet_session],
            "answer_session_ids": ["pet"],
        },
        {
            "question_id": "ssu2_abs",
            "question_type": "single-session-user",
            "question": "Which saxophone brand did I buy last winter?",
            "answer": "You did not mention buying a saxophone.",
            "question_date": ABS_DATE,
            "haystack_session_ids": ["garden"],
            "haystack_dates": ["2023/06/20 (Tue) 07:45"],
            "haystack_sessions": [garden_session],
            "answer_session_ids": [],
        },
    ]


def _write(path: Path, items: list[dict[str, Any]], *, compress: bool = False) -> Path:
    raw = json.dumps(items).encode()
    path.write_bytes(gzip.compress(raw) if compress else raw)
    return path


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# -- loading -------------------------------------------------------------------------------------


def test_load_parses_evidence_times_and_ids(tmp_path: Path) -> None:
    plain = longmemeval.load(_write(tmp_path / "d.json", _items()))
    packed = longmemeval.load(_write(tmp_path / "d.json.gz", _items(), compress=True))
    assert packed == plain
    ku, ssu, abs_ = plain

    assert ku.guild_id == "lme-ku1" and ku.asked_at == _at("2023-06-07T04:15")
    # Oldest session first; the empty turn is gone; ids keep file positions.
    assert [t.message_id for t in ku.turns] == [
        "ku1.s1.t0",
        "ku1.s1.t1",
        "ku1.s1.t2",
        "ku1.s0.t0",
        "ku1.s0.t1",
        "ku1.s0.t3",
    ]
    assert [t.created_at for t in ku.turns] == [
        _at("2023-05-20T12:36:00"),
        _at("2023-05-20T12:36:05"),
        _at("2023-05-20T12:36:10"),
        _at("2023-05-26T13:05:00"),
        _at("2023-05-26T13:05:05"),
        _at("2023-05-26T13:05:15"),
    ]
    assert ku.evidence == ("ku1.s1.t0", "ku1.s0.t0")  # oldest first: the new value is last
    assert ssu.evidence == ("ssu1.s1.t0",)
    assert not ssu.abstention and ssu.question_type == "single-session-user"
    assert abs_.abstention and abs_.evidence == ()

    assert [i.question_id for i in longmemeval.load(tmp_path / "d.json", limit=2)] == [
        "ku1",
        "ssu1",
    ]
    only = longmemeval.load(tmp_path / "d.json.gz", types=["single-session-user"], limit=1)
    assert [i.question_id for i in only] == ["ssu1"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"question_date": "June 7th"}, "unrecognised LongMemEval date"),
        ({"haystack_dates": ["2023/05/26 (Fri) 13:05"]}, "2 sessions but 1 dates"),
        ({"haystack_sessions": [["hello"], []]}, "is not an object"),
    ],
)
def test_load_refuses_malformed_items_clearly(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    items = _items()
    items[0].update(change)
    with pytest.raises(ValueError, match=message):
        longmemeval.load(_write(tmp_path / "d.json", items))


def test_load_refuses_unknown_types_duplicates_and_broken_gzip(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.json", _items())
    with pytest.raises(ValueError, match="no questions of type temporal-reasoning"):
        longmemeval.load(path, types=["temporal-reasoning"])
    with pytest.raises(ValueError, match="occurs twice"):
        longmemeval.load(_write(tmp_path / "dup.json", [*_items(), _items()[0]]))
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(gzip.compress(b"[]")[:12])
    with pytest.raises(ValueError, match="broken gzip"):
        longmemeval.load(broken)


# -- scoring on hand-made rankings ---------------------------------------------------------------


def test_newest_first_on_hand_made_rankings() -> None:
    ev = ["old", "mid", "new"]  # oldest first
    assert newest_first(["new", "x", "mid", "old"], ev)
    assert newest_first(["x", "new", "old"], ev)  # "mid" not ranked at all: below "new"
    assert not newest_first(["old", "new", "mid"], ev)  # a stale value comes first
    assert not newest_first(["mid", "new"], ev)
    assert not newest_first(["old", "mid"], ev)  # the newest is missing
    deep = [f"x{i}" for i in range(10)] + ["new", "old"]
    assert not newest_first(deep, ev)  # above the others, but not in the top 10
    assert newest_first(deep, ev, k=11)
    assert newest_first(["a", "new"], ["new"])  # nothing older to beat
    with pytest.raises(ValueError):
        newest_first(["a"], [])


def _item(qid: str, qtype: str, evidence: tuple[str, ...]) -> Item:
    return Item(qid, qtype, "q?", None, _at("2023-06-07T00:00"), f"lme-{qid}", (), evidence)


def test_summary_counts_recall_newest_first_and_abstention_by_hand() -> None:
    ku_good = _item("a", "knowledge-update", ("a-old", "a-new"))
    ku_bad = _item("b", "knowledge-update", ("b-old", "b-new"))
    ms = _item("c", "multi-session", ("c1", "c2", "c3", "c4"))
    abstain = _item("d_abs", "multi-session", ())
    answered_abs = _item("e_abs", "multi-session", ("e1",))  # has_answer marks: still unscored
    results = [
        QuestionResult(ku_good, ["a-new", "a-old", "z"], 5.0, 3),
        QuestionResult(ku_bad, ["b-old", "x", "b-new"], 1.0, 0),
        QuestionResult(ms, ["c1", "x", "c2", "y", "z", "c3"], 2.0, 1),
        QuestionResult(abstain, ["d1"], 3.0, 0),
        QuestionResult(answered_abs, ["e1"], 4.0, 2),
    ]
    s = longmemeval.summarise(results, [1, 5])
    assert s["by_type"]["knowledge-update"] == {
        "recall@1": 0.5,
        "hit@1": 1.0,
        "recall@5": 1.0,
        "hit@5": 1.0,
        "n": 2,
    }
    assert s["by_type"]["multi-session"]["recall@1"] == 0.25
    assert s["by_type"]["multi-session"]["recall@5"] == 0.5
    assert s["by_type"]["multi-session"]["n"] == 1
    assert s["overall"]["n"] == 3
    assert s["overall"]["recall@1"] == pytest.approx((0.5 + 0.5 + 0.25) / 3)
    assert s["newest_first"] == {
        "k": 10,
        "n": 2,
        "share": 0.5,
        "n_with_older": 2,
        "share_with_older": 0.5,
    }
    assert s["abstention"]["n"] == 2
    assert s["abstention"]["no_strict_hit_share"] == 0.5
    assert s["abstention"]["answerable_no_strict_hit_share"] == pytest.approx(1 / 3)
    assert s["query_ms"] == {"p50": 3.0, "p95": 4.8}
    rec = longmemeval.question_record(results[1], [1, 5])
    assert rec["newest_first"] is False
    assert rec["evidence_ranks"] == {"b-old": 1, "b-new": 3}
    assert rec["recall"] == {"1": 0.5, "5": 1.0} and rec["hit"] == {"1": True, "5": True}
    assert longmemeval.question_record(results[4], [1])["recall"] == {}


def test_common_scoring_helpers() -> None:
    assert common.score_question(["a", "b", "c"], ["c", "d"], 2) == (0.0, 0.0)
    assert common.score_question(["a", "b", "c"], ["c", "d"], 3) == (0.5, 1.0)
    assert common.percentile([], 0.5) == 0.0
    assert common.percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert common.recall_block([], [5]) == {"recall@5": 0.0, "hit@5": 0.0, "n": 0}


# -- end to end through the real engine -----------------------------------------------------------


def test_longmemeval_end_to_end(tmp_path: Path, local_embedder: Any) -> None:
    data = _write(tmp_path / "lme.json.gz", _items(), compress=True)
    out, per_q = tmp_path / "out" / "summary.json", tmp_path / "out" / "pq.jsonl"
    summary = longmemeval.run(
        data,
        [1, 25],
        out,
        per_q,
        data_dir=tmp_path / "db",
        embedder=local_embedder,
    )
    assert json.loads(out.read_text()) == summary
    records = {r["question_id"]: r for r in map(json.loads, per_q.read_text().splitlines())}
    assert list(records) == ["ku1", "ssu1", "ssu2_abs"]
    ku, ssu, abs_ = records["ku1"], records["ssu1"], records["ssu2_abs"]

    # Each guild holds only its question's turns, and ranking mode ranks all of them.
    assert set(ku["ranked"]) == {
        "ku1.s1.t0",
        "ku1.s1.t1",
        "ku1.s1.t2",
        "ku1.s0.t0",
        "ku1.s0.t1",
        "ku1.s0.t3",
    }
    assert set(ssu["ranked"]) == {
        f"ssu1.s{s}.t{t}" for s, t in ((0, 0), (0, 1), (1, 0), (1, 1), (1, 2))
    }
    assert set(abs_["ranked"]) == {"ssu2_abs.s0.t0", "ssu2_abs.s0.t1"}

    assert ku["evidence"] == ["ku1.s1.t0", "ku1.s0.t0"]
    assert ssu["evidence"] == ["ssu1.s1.t0"]
    # The new value says what the question asks, nearly word for word.
    assert ku["ranked"][0] == "ku1.s0.t0"
    assert ku["newest_first"] is True
    assert ssu["newest_first"] is None and abs_["newest_first"] is None
    assert abs_["recall"] == {} and abs_["abstention"] is True

    assert summary["questions"] == 3 and summary["turns"] == 6 + 5 + 2
    assert summary["overall"]["n"] == 2
    assert summary["overall"]["recall@25"] == 1.0  # every turn of a guild is in its top 25
    for k in ("1", "25"):
        for rec in (ku, ssu):
            top = rec["ranked"][: int(k)]
            assert rec["recall"][k] == sum(e in top for e in rec["evidence"]) / len(rec["evidence"])
    assert summary["overall"]["recall@1"] == (ku["recall"]["1"] + ssu["recall"]["1"]) / 2
    assert summary["by_type"]["knowledge-update"]["recall@1"] == 0.5  # only the new value on top
    assert summary["newest_first"]["n"] == 1 and summary["newest_first"]["share"] == 1.0
    table = longmemeval.format_table(summary)
    assert "knowledge-update" in table and "single-session-user" in table
    assert "newest-first (knowledge-update, top 10): 100.0 of 1" in table
    assert summary["abstention"]["n"] == 1
    assert summary["abstention"]["no_strict_hit_share"] == (
        1.0 if abs_["strict_hits"] == 0 else 0.0
    )

    # Turn times and authors as the file implies, and each question's history
    # processed with the engine's clock at that question's date.
    con = sqlite3.connect(tmp_path / "db" / "guildlore.sqlite3")
    rows = con.execute(
        "SELECT id, guild_id, author_id, is_bot, created_at, received_at FROM messages"
        " ORDER BY guild_id, created_at, id"
    ).fetchall()
    con.close()
    by_id = {r[0]: r for r in rows}
    assert len(rows) == 13
    assert by_id["ku1.s1.t0"][1:5] == ("lme-ku1", "user", 0, "2023-05-20T12:36:00.000Z")
    assert by_id["ku1.s0.t1"][1:5] == ("lme-ku1", "assistant", 1, "2023-05-26T13:05:05.000Z")
    assert {r[5] for r in rows if r[1] == "lme-ku1"} == {"2023-06-07T04:15:00.000Z"}
    assert {r[5] for r in rows if r[1] == "lme-ssu2_abs"} == {"2023-07-01T09:00:00.000Z"}


def _message_rows(db: Path) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db / "guildlore.sqlite3")
    try:
        return con.execute("SELECT id, guild_id, received_at FROM messages ORDER BY id").fetchall()
    finally:
        con.close()


def test_longmemeval_reuses_a_kept_database_and_ingests_only_what_is_missing(
    tmp_path: Path, local_embedder: Any
) -> None:
    items = _items()
    db = tmp_path / "db"
    first_data = _write(tmp_path / "first.json", items[:2])
    first, first_results = asyncio.run(
        longmemeval.run_benchmark(
            first_data, ks=[1, 25], data_dir=db, reuse=True, embedder=local_embedder
        )
    )
    assert first["ingest_seconds"] > 0
    rows = _message_rows(db)
    assert len(rows) == 6 + 5

    # The same questions again plus one more: only the new one is ingested, and
    # the stored histories rank exactly as they did.
    both = _write(tmp_path / "both.json", items)
    again, results = asyncio.run(
        longmemeval.run_benchmark(
            both, ks=[1, 25], data_dir=db, reuse=True, embedder=local_embedder
        )
    )
    after = _message_rows(db)
    assert len(after) == 6 + 5 + 2
    assert [r for r in after if not r[1].startswith("lme-ssu2_abs")] == rows
    assert [r.ranked for r in results[:2]] == [r.ranked for r in first_results]
    assert again["overall"] == first["overall"]

    # Nothing missing: nothing ingested.
    third, _ = asyncio.run(
        longmemeval.run_benchmark(both, ks=[1], data_dir=db, reuse=True, embedder=local_embedder)
    )
    assert third["ingest_seconds"] == 0
    assert _message_rows(db) == after

    with pytest.raises(ValueError, match="data directory"):
        asyncio.run(longmemeval.run_benchmark(both, reuse=True, embedder=local_embedder))


def test_cli_db_option_keeps_the_database_and_refuses_data_dir_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _write(tmp_path / "lme.json", _items())
    db = tmp_path / "kept"
    args = ["bench", "longmemeval", "--data", str(data), "--limit", "1", "--db", str(db)]
    assert cli_main(args) == 0
    assert len(_message_rows(db)) == 6
    assert cli_main(args) == 0
    assert len(_message_rows(db)) == 6
    capsys.readouterr()
    assert cli_main([*args, "--data-dir", str(tmp_path / "other")]) == 2
    assert "give one of them" in capsys.readouterr().err
    assert cli_main(["bench", "locomo", "--data", str(data), "--db", str(db)]) == 2
    assert "--db: only for longmemeval" in capsys.readouterr().err


def test_cli_runs_longmemeval_and_refuses_its_options_for_locomo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _write(tmp_path / "lme.json", _items())
    out = tmp_path / "s.json"
    args = ["bench", "longmemeval", "--data", str(data), "--types", "knowledge-update,ssu"]
    assert cli_main(args) == 2  # "ssu" is no type of the file
    assert "no questions of type ssu" in capsys.readouterr().err
    args[-1] = "knowledge-update"
    code = cli_main([*args, "--limit", "1", "--k", "1,5", "--json", str(out)])
    assert code == 0
    summary = json.loads(out.read_text())
    assert summary["questions"] == 1 and list(summary["by_type"]) == ["knowledge-update"]
    assert "knowledge-update" in capsys.readouterr().out

    assert cli_main(["bench", "locomo", "--data", str(data), "--limit", "1"]) == 2
    assert "--limit: only for longmemeval" in capsys.readouterr().err


# -- the LoCoMo layout ----------------------------------------------------------------------------


def _locomo_sample() -> dict[str, Any]:
    # Dialogue ids numbered by day, not by session (session 2 goes on with D1:…),
    # a dropped turn (D1:3), and evidence lists joined by "." or ";".
    return {
        "sample_id": "chat-1",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "10:42 pm on 29 December, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I started learning the cello."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Nice, which teacher?"},
            ],
            "session_2_date_time": "11:50 pm on 29 December, 2023",
            "session_2": [
                {"speaker": "Ana", "dia_id": "D1:4", "text": "My teacher is called Marta."},
                {"speaker": "Ben", "dia_id": "D1:5", "text": "I am baking bread tonight."},
            ],
        },
        "qa": [
            {"question": "Who teaches Ana the cello?", "evidence": ["D1:1. D1:4"], "category": 1},
            {"question": "What is Ben baking?", "evidence": ["D1:5; D1:3"], "category": 4},
        ],
    }


def test_locomo_loader_splits_evidence_on_full_stops_and_counts_unknown_ids(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.json"
    path.write_text(json.dumps([_locomo_sample()]))
    (conv,) = locomo.load(path)
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D1:4", "D1:5"]
    assert [q.evidence for q in conv.questions] == [
        ("chat-1.D1:1", "chat-1.D1:4"),
        ("chat-1.D1:5",),
    ]
    assert conv.unknown_evidence == 1  # D1:3 is not in the conversation


def test_locomo_end_to_end(tmp_path: Path, local_embedder: Any) -> None:
    path = tmp_path / "l.json"
    path.write_text(json.dumps([_locomo_sample()]))
    out = tmp_path / "s.json"
    summary = locomo.run(path, [1, 50], out, embedder=local_embedder)
    assert json.loads(out.read_text()) == summary
    assert summary["questions"] == 2 and summary["unknown_evidence"] == 1
    assert summary["overall_1_4"]["recall@50"] == 1.0  # four turns: all ranked
    assert summary["by_category"]["4"]["n"] == 1 and summary["by_category"]["1"]["n"] == 1
    table = locomo.format_table(summary)
    assert "1 multi-hop" in table and "4 single-hop" in table
    assert "2 temporal" not in table  # no question of that category: no row of zeros
    assert "evidence ids naming no turn (left out): 1" in table


def test_locomo_summary_reports_strict_recall_and_category_5_abstention_by_hand() -> None:
    def q(category: str, evidence: tuple[str, ...]) -> locomo.Question:
        return locomo.Question("c", f"q{category}", category, evidence)

    results = [
        # Answerable: the ranking view finds both turns, strict search one.
        locomo.QuestionResult(q("4", ("t1", "t2")), ["t1", "t2"], 1.0, ["t1"], 1),
        # Answerable, but strict search answers nothing.
        locomo.QuestionResult(q("1", ("t3",)), ["t3"], 1.0, [], 0),
        # Unanswerable (false premise): one answered, one with no strict hit.
        locomo.QuestionResult(q("5", ("t4",)), ["t4"], 1.0, ["t4"], 1),
        locomo.QuestionResult(q("5", ("t5",)), ["t5"], 1.0, [], 0),
    ]
    s = locomo.summarise(results, [1, 5], 0.0)
    assert s["overall_1_4"]["recall@5"] == 1.0
    assert s["strict"]["overall_1_4"]["recall@5"] == pytest.approx((0.5 + 0.0) / 2)
    assert s["strict"]["by_category"]["4"]["recall@1"] == 0.5
    assert s["strict"]["by_category"]["1"]["hit@5"] == 0.0
    assert "5" not in s["strict"]["by_category"]  # unanswerable: not scored for recall
    assert s["abstention"] == {
        "n": 2,
        "no_strict_hit_share": 0.5,
        "answerable_n": 2,
        "answerable_no_strict_hit_share": 0.5,
    }
    table = locomo.format_table(s)
    assert "strict search (gate on):" in table
    assert "abstention (category 5): 50.0 % of 2 get no strict hit" in table


async def test_a_fact_hit_counts_as_every_message_it_was_observed_in(make_memory: Any) -> None:
    """Said twice, a fact is one row with two observations (the write decision's
    noop): the harness credits both messages, the newest first, where it once
    credited only the first source."""
    from tests.helpers import ALICE, GUILD, msg
    from tests.ingest.test_decision import ingest

    mem = await make_memory()
    older = msg("I live in Lisbon.", author=ALICE, created_at="2026-01-05T10:00:00+00:00")
    newer = msg("I live in Lisbon.", author=ALICE, created_at="2026-03-05T10:00:00+00:00")
    await ingest(mem, older, newer)
    hits = await mem.search(GUILD, "Where does Alice live?", scope="facts", gate=False)
    facts = [h for h in hits if h.kind == "fact"]
    assert len(facts) == 1
    ranked = await common.ranked_message_ids(mem, GUILD, facts)
    assert ranked == [newer.id, older.id]
