"""LoCoMo retrieval benchmark: ingest conversations, ask the questions, score evidence.

Reads LoCoMo's JSON layout (also used by other data sets, e.g. REALTALK).
Each conversation becomes its own guild and goes through the real ingest
pipeline the way an import does (``evals.common.ingest``): the two
speakers are the authors, every turn is one message whose id carries the
turn's ``dia_id``, timestamps come from the session dates, and an image a
speaker shared is appended to the turn as its BLIP caption. Every question is
then answered with ``search(scope="all")``; fact hits count as their source
message, message hits as themselves, and the ranked, de-duplicated turn ids
are compared with the question's evidence turns.

Metrics (per category and over categories 1–4):

* ``recall@k`` — the fraction of a question's evidence turns found in the top
  k turns, averaged over questions (the LoCoMo paper's definition);
* ``hit@k`` — the fraction of questions with at least one evidence turn in
  the top k;
* ``strict`` — the same recall of strict search (the relevance gate on, as
  replies and the API search): what the gate keeps of the evidence;
* ``abstention`` — category 5 (adversarial: the premise is false, e.g. the
  other speaker did it) is the unanswerable set: the share of its questions
  strict search answers with no hit at all.

Questions without evidence turns are skipped (they cannot be scored).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from evals.common import (
    abstention_block,
    format_abstention,
    format_recall_table,
    ingest,
    latency,
    offline_memory,
    rank,
    recall_block,
    safe_id,
    strict_search,
    timestamp,
    warm,
)
from memory import IncomingMessage, Memory

DEFAULT_K: tuple[int, ...] = (5, 10, 25, 50)
CATEGORIES: tuple[str, ...] = ("1", "2", "3", "4", "5")
HEADLINE_CATEGORIES: tuple[str, ...] = ("1", "2", "3", "4")
# LoCoMo's category numbers, as released (the paper's order differs).
CATEGORY_NAMES: dict[str, str] = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}
UNANSWERABLE_CATEGORY = "5"
CHANNEL = "chat"
_SESSION_KEY = re.compile(r"^session_(\d+)$")
# Between evidence ids: commas, semicolons, blanks, and a full stop that ends
# an id ("D8:6; D9:17", "D13:4. D14:4").
_EVIDENCE_SEP = re.compile(r"[;,\s]+")
# Seconds between consecutive turns of a session (LoCoMo gives one date per session).
TURN_SPACING_S = 30


@dataclass(frozen=True)
class Turn:
    message_id: str
    dia_id: str
    speaker: str
    text: str
    created_at: str
    session: int


@dataclass(frozen=True)
class Question:
    conversation: str
    question: str
    category: str
    evidence: tuple[str, ...]  # message ids
    answer: str | None = None


@dataclass
class Conversation:
    sample_id: str
    guild_id: str
    speakers: tuple[str, str]
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    unknown_evidence: int = 0


def message_id(sample_id: str, dia_id: str) -> str:
    """A globally unique message id that still shows the turn: ``conv-26.D1:3``."""
    return safe_id(f"{safe_id(sample_id, 30)}.{safe_id(dia_id, 30)}")


def author_id(sample_id: str, speaker: str) -> str:
    return safe_id(f"{safe_id(sample_id, 30)}.{safe_id(speaker.lower(), 30)}")


def parse_session_date(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` → an aware UTC datetime."""
    cleaned = " ".join(text.replace(",", " ").split())
    for fmt in ("%I:%M %p on %d %B %Y", "%H:%M on %d %B %Y", "%d %B %Y"):
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo session date {text!r}")


def turn_text(turn: dict[str, Any]) -> str:
    """The turn's words plus, when the speaker shared an image, its caption."""
    text = str(turn.get("text") or "").strip()
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [shared an image: {str(caption).strip()}]".strip()
    return text


def evidence_ids(raw: Iterable[Any]) -> list[str]:
    """The evidence ids of a question; one entry may hold several."""
    out: list[str] = []
    for item in raw:
        for part in _EVIDENCE_SEP.split(str(item)):
            part = part.strip().rstrip(".")
            if part:
                out.append(part)
    return out


def load(path: Path) -> list[Conversation]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, dict):
        data = [data]
    out: list[Conversation] = []
    for n, sample in enumerate(data):
        sample_id = str(sample.get("sample_id") or f"conv-{n}")
        conv = sample["conversation"]
        speakers = (str(conv.get("speaker_a", "A")), str(conv.get("speaker_b", "B")))
        c = Conversation(sample_id, safe_id(f"locomo-{sample_id}"), speakers)
        sessions = sorted((int(m.group(1)), key) for key in conv if (m := _SESSION_KEY.match(key)))
        known: set[str] = set()
        for number, key in sessions:
            turns = conv[key]
            if not isinstance(turns, list) or not turns:
                continue
            start = parse_session_date(str(conv[f"{key}_date_time"]))
            for i, t in enumerate(turns):
                dia = str(t["dia_id"])
                text = turn_text(t)
                if not text:
                    continue
                c.turns.append(
                    Turn(
                        message_id=message_id(sample_id, dia),
                        dia_id=dia,
                        speaker=str(t["speaker"]),
                        text=text,
                        created_at=timestamp(start + timedelta(seconds=TURN_SPACING_S * i)),
                        session=number,
                    )
                )
                known.add(dia)
        for q in sample.get("qa", []):
            evidence = evidence_ids(q.get("evidence") or [])
            kept = [message_id(sample_id, e) for e in evidence if e in known]
            c.unknown_evidence += len(evidence) - len(kept)
            answer = q.get("answer", q.get("adversarial_answer"))
            c.questions.append(
                Question(
                    conversation=sample_id,
                    question=str(q["question"]),
                    category=str(q.get("category")),
                    evidence=tuple(dict.fromkeys(kept)),
                    answer=None if answer is None else str(answer),
                )
            )
        out.append(c)
    return out


def incoming(conv: Conversation, turn: Turn) -> IncomingMessage:
    return IncomingMessage(
        id=turn.message_id,
        guild_id=conv.guild_id,
        channel_id=CHANNEL,
        author_id=author_id(conv.sample_id, turn.speaker),
        author_name=turn.speaker,
        content=turn.text,
        created_at=turn.created_at,
        source="text",
    )


@dataclass
class QuestionResult:
    question: Question
    ranked: list[str]
    ms: float
    strict: list[str] = field(default_factory=list)  # strict search's ranked ids
    strict_hits: int = 0


def summarise(
    results: Sequence[QuestionResult],
    ks: Sequence[int],
    ingest_seconds: float,
    unknown_evidence: int = 0,
) -> dict[str, Any]:
    def block(rs: Sequence[QuestionResult]) -> dict[str, float]:
        return recall_block([(r.ranked, r.question.evidence) for r in rs], ks)

    def strict_block(rs: Sequence[QuestionResult]) -> dict[str, float]:
        return recall_block([(r.strict, r.question.evidence) for r in rs], ks)

    headline = [r for r in results if r.question.category in HEADLINE_CATEGORIES]
    unanswerable = [r for r in results if r.question.category == UNANSWERABLE_CATEGORY]
    return {
        "k": list(ks),
        "overall_1_4": block(headline),
        "by_category": {
            c: block([r for r in results if r.question.category == c]) for c in CATEGORIES
        },
        "strict": {
            "overall_1_4": strict_block(headline),
            "by_category": {
                c: strict_block([r for r in results if r.question.category == c])
                for c in HEADLINE_CATEGORIES
            },
        },
        "abstention": abstention_block(
            [r.strict_hits for r in unanswerable], [r.strict_hits for r in headline]
        ),
        "questions": len(results),
        # Evidence ids naming no turn of the conversation (e.g. a turn the
        # data set dropped): left out of the question's evidence.
        "unknown_evidence": unknown_evidence,
        "ingest_seconds": round(ingest_seconds, 3),
        "query_ms": latency([r.ms for r in results]),
    }


def format_table(summary: dict[str, Any]) -> str:
    ks = summary["k"]
    # A data set may use only some categories: the others would be rows of zeros.
    rows = [
        (f"{c} {CATEGORY_NAMES[c]}", summary["by_category"][c])
        for c in CATEGORIES
        if summary["by_category"][c]["n"]
    ]
    lines = format_recall_table("category", rows, ("overall 1-4", summary["overall_1_4"]), ks)
    strict = summary["strict"]
    strict_rows = [
        (f"{c} {CATEGORY_NAMES[c]}", strict["by_category"][c])
        for c in HEADLINE_CATEGORIES
        if strict["by_category"][c]["n"]
    ]
    lines.append("strict search (gate on):")
    lines.extend(
        format_recall_table("category", strict_rows, ("overall 1-4", strict["overall_1_4"]), ks)
    )
    lines.append(format_abstention(summary["abstention"], "category 5"))
    lines.append(
        f"questions {summary['questions']}, ingest {summary['ingest_seconds']:.1f} s, "
        f"query p50 {summary['query_ms']['p50']:.1f} ms, p95 {summary['query_ms']['p95']:.1f} ms"
    )
    if summary.get("unknown_evidence"):
        lines.append(f"evidence ids naming no turn (left out): {summary['unknown_evidence']}")
    return "\n".join(lines)


# -- running ---------------------------------------------------------------------------------------


async def answer(
    memory: Memory,
    conversations: Sequence[Conversation],
    limit: int,
    *,
    gate: bool = False,
) -> list[QuestionResult]:
    results: list[QuestionResult] = []
    for conv in conversations:
        for q in conv.questions:
            if not q.evidence:
                continue
            ranked, ms = await rank(memory, conv.guild_id, q.question, limit, gate=gate)
            strict, n = await strict_search(memory, conv.guild_id, q.question, limit)
            results.append(QuestionResult(q, ranked, ms, strict, n))
    return results


async def run_benchmark(
    data: Path,
    *,
    ks: Sequence[int] = DEFAULT_K,
    data_dir: Path | None = None,
    gate: bool = False,
    threads: int = 2,
    embedder: Any = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], list[QuestionResult]]:
    conversations = await asyncio.to_thread(load, data)
    limit = max(ks)
    async with offline_memory(data_dir=data_dir, threads=threads, embedder=embedder) as memory:
        if progress:
            progress(f"ingesting {sum(len(c.turns) for c in conversations)} turns")
        messages = [incoming(conv, turn) for conv in conversations for turn in conv.turns]
        report = await ingest(memory, messages)
        if progress:
            progress(f"ingested in {report.seconds:.1f} s; answering")
        for conv in conversations:
            await warm(memory, conv.guild_id, limit)
        results = await answer(memory, conversations, limit, gate=gate)
    unknown = sum(c.unknown_evidence for c in conversations)
    return summarise(results, ks, report.seconds, unknown), results


def run(data: Path, ks: Sequence[int], json_out: Path | None, **kw: Any) -> dict[str, Any]:
    summary, _ = asyncio.run(run_benchmark(data, ks=ks, **kw))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary
