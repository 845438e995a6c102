"""LoCoMo retrieval benchmark: ingest conversations, ask the questions, score evidence.

Each LoCoMo conversation becomes its own guild and goes through the real
ingest pipeline (``Memory.ingest_message(..., backpressure=True)``): the two
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
  the top k.

Questions without evidence turns are skipped (they cannot be scored).
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory import Hit, IncomingMessage, iso

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
CHANNEL = "chat"
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_ID_UNSAFE = re.compile(r"[^0-9A-Za-z_:.\-]+")
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


def safe_id(text: str, limit: int = 64) -> str:
    out = _ID_UNSAFE.sub("-", text.strip()).strip("-") or "x"
    return out[:limit]


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


def _evidence_ids(raw: Iterable[Any]) -> list[str]:
    # A few entries hold several ids ("D8:6; D9:17").
    out: list[str] = []
    for item in raw:
        for part in re.split(r"[;,]", str(item)):
            part = part.strip()
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
                        created_at=iso(start + timedelta(seconds=TURN_SPACING_S * i)),
                        session=number,
                    )
                )
                known.add(dia)
        for q in sample.get("qa", []):
            evidence = _evidence_ids(q.get("evidence") or [])
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


def ranked_turns(hits: Sequence[Hit]) -> list[str]:
    """Message ids in rank order: a fact counts as its source message; duplicates dropped."""
    out: dict[str, None] = {}
    for h in hits:
        mid = h.id if h.kind == "message" else h.source_message_id
        if mid:
            out.setdefault(mid, None)
    return list(out)


def score_question(ranked: Sequence[str], evidence: Sequence[str], k: int) -> tuple[float, float]:
    """(recall@k, hit@k) for one question."""
    top = set(ranked[:k])
    found = sum(1 for e in evidence if e in top)
    return found / len(evidence), 1.0 if found else 0.0


@dataclass
class QuestionResult:
    question: Question
    ranked: list[str]
    ms: float


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarise(
    results: Sequence[QuestionResult], ks: Sequence[int], ingest_seconds: float
) -> dict[str, Any]:
    def block(rs: Sequence[QuestionResult]) -> dict[str, float]:
        out: dict[str, float] = {}
        for k in ks:
            pairs = [score_question(r.ranked, r.question.evidence, k) for r in rs]
            out[f"recall@{k}"] = statistics.fmean(p[0] for p in pairs) if pairs else 0.0
            out[f"hit@{k}"] = statistics.fmean(p[1] for p in pairs) if pairs else 0.0
        out["n"] = len(rs)
        return out

    headline = [r for r in results if r.question.category in HEADLINE_CATEGORIES]
    ms = [r.ms for r in results]
    return {
        "k": list(ks),
        "overall_1_4": block(headline),
        "by_category": {
            c: block([r for r in results if r.question.category == c]) for c in CATEGORIES
        },
        "questions": len(results),
        "ingest_seconds": round(ingest_seconds, 3),
        "query_ms": {"p50": round(percentile(ms, 0.5), 3), "p95": round(percentile(ms, 0.95), 3)},
    }


def format_table(summary: dict[str, Any]) -> str:
    ks = summary["k"]
    cols = [f"R@{k}" for k in ks] + [f"H@{k}" for k in ks]
    head = f"{'category':<16}{'n':>5}" + "".join(f"{c:>8}" for c in cols)
    lines = [head, "-" * len(head)]

    def row(name: str, b: dict[str, float]) -> str:
        vals = [b[f"recall@{k}"] for k in ks] + [b[f"hit@{k}"] for k in ks]
        return f"{name:<16}{int(b['n']):>5}" + "".join(f"{v * 100:>8.1f}" for v in vals)

    for c in CATEGORIES:
        lines.append(row(f"{c} {CATEGORY_NAMES[c]}", summary["by_category"][c]))
    lines.append("-" * len(head))
    lines.append(row("overall 1-4", summary["overall_1_4"]))
    lines.append(
        f"questions {summary['questions']}, ingest {summary['ingest_seconds']:.1f} s, "
        f"query p50 {summary['query_ms']['p50']:.1f} ms, p95 {summary['query_ms']['p95']:.1f} ms"
    )
    return "\n".join(lines)


# -- running ---------------------------------------------------------------------------------------

Searcher = Callable[[str, str, int], Any]  # (guild, question, limit) -> awaitable list[Hit]


async def ingest(
    memory: Any, conversations: Sequence[Conversation], timeout: float = 1800
) -> float:
    """Push every turn through ``Memory.ingest_message``; seconds until all is embedded."""
    started = time.perf_counter()
    for conv in conversations:
        outcomes = []
        for turn in conv.turns:
            outcomes.append(await memory.ingest_message(incoming(conv, turn), backpressure=True))
        bad = [o for o in outcomes if o.status == "rejected"]
        if bad:
            raise RuntimeError(f"{len(bad)} turns rejected, first: {bad[0].reason}")
    if not await memory.settle(timeout):
        raise RuntimeError("ingest did not settle in time")
    return time.perf_counter() - started


async def answer(
    memory: Any,
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
            t0 = time.perf_counter()
            hits = await memory.search(
                conv.guild_id, q.question, limit=limit, scope="all", gate=gate
            )
            ms = (time.perf_counter() - t0) * 1000
            results.append(QuestionResult(q, ranked_turns(hits), ms))
    return results


async def run_benchmark(
    data: Path,
    *,
    ks: Sequence[int] = DEFAULT_K,
    data_dir: Path | None = None,
    gate: bool = False,
    embedder: Any = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], list[QuestionResult]]:
    from memory import Memory, MemoryConfig, RuleExtractor

    conversations = load(data)
    limit = max(ks)
    with tempfile.TemporaryDirectory(prefix="guildlore-locomo-") as tmp:
        root = data_dir or Path(tmp)
        cfg = MemoryConfig.for_data_dir(root)
        memory = await Memory.open(cfg, extractor=RuleExtractor(), embedder=embedder)
        try:
            if progress:
                progress(f"ingesting {sum(len(c.turns) for c in conversations)} turns")
            seconds = await ingest(memory, conversations)
            if progress:
                progress(f"ingested in {seconds:.1f} s; answering")
            # Warm-up: load the vector matrices and the model session, so query
            # latency is the steady state rather than a cold start.
            for conv in conversations:
                await memory.warm_up(conv.guild_id)
                await memory.search(conv.guild_id, "warm up", limit=limit, scope="all")
            results = await answer(memory, conversations, limit, gate=gate)
        finally:
            await memory.close()
    return summarise(results, ks, seconds), results


def run(data: Path, ks: Sequence[int], json_out: Path | None, **kw: Any) -> dict[str, Any]:
    summary, _ = asyncio.run(run_benchmark(data, ks=ks, **kw))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary
