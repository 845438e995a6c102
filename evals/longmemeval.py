"""LongMemEval retrieval benchmark: one user's chat history with an assistant
per question, the question asked at its own date, evidence turns scored.

Reads LongMemEval's JSON (a list of items; gzip-compressed files are read
too): ``question_id``, ``question_type``, ``question``, ``answer``,
``question_date``, ``haystack_dates`` (``2023/05/20 (Sat) 02:21``),
``haystack_sessions`` (each a list of turns ``{role, content, has_answer?}``).
Evidence turns are those with ``has_answer: true``.

Each question becomes its own guild and its sessions go through the real
ingest path as an import does (``evals.common.ingest``), oldest session first:
every turn is one message in one channel, its time the session's date plus a
few seconds per turn; user turns are written by the member ``user``, the
other turns by a bot named after their role (bots' messages are stored and
searched, but not mined for facts). The engine's clock is set to the
question's date for its ingest and its search, so "now" is when the question
is asked; questions run one after another, which makes that sound.

Every question is ranked with ``search(scope="all")`` like the LoCoMo harness:
a fact hit counts as its source message. Reported:

* ``recall@k`` / ``hit@k`` of evidence turns by question type and overall
  (as in ``evals.locomo``);
* ``newest_first`` for knowledge-update questions: the share whose newest
  evidence turn (latest message time) is in the top 10 and ranks above every
  older evidence turn — the user's current value is found before a stale one;
* abstention questions (``question_id`` ending in ``_abs``: the premise is
  false, nothing in the history answers them) are not scored for recall; the
  share that strict search answers with no hit at all is reported instead;
* ``strict``: recall@k of strict search (the relevance gate on, as replies
  and the API search) by question type: what the gate keeps of the evidence;
* query latency p50/p95 of the ranking search.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from evals.common import (
    SettableClock,
    abstention_block,
    format_abstention,
    format_recall_table,
    ingest,
    latency,
    offline_memory,
    rank,
    recall_block,
    safe_id,
    score_question,
    strict_search,
    timestamp,
    warm,
)
from memory import IncomingMessage, Memory

DEFAULT_K: tuple[int, ...] = (5, 10, 25)
# Ranked message ids kept per question (search's largest limit).
RANK_DEPTH = 50
NEWEST_FIRST_K = 10
KNOWLEDGE_UPDATE = "knowledge-update"
# The official types, in the paper's order; others found in a file follow.
TYPES: tuple[str, ...] = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    KNOWLEDGE_UPDATE,
)
ABSTENTION_SUFFIX = "_abs"
CHANNEL = "chat"
USER_ROLE = "user"
# Seconds between consecutive turns of a session (a session has one date).
TURN_SPACING_S = 5
_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([^)]*\))?\s*(\d{1,2}):(\d{2})\s*$")
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class Turn:
    message_id: str
    role: str
    text: str
    created_at: datetime
    session: int  # index in the file's haystack
    evidence: bool


@dataclass(frozen=True)
class Item:
    question_id: str
    question_type: str
    question: str
    answer: str | None
    asked_at: datetime
    guild_id: str
    turns: tuple[Turn, ...]  # in time order (the order they are ingested)
    evidence: tuple[str, ...]  # message ids, oldest first

    @property
    def abstention(self) -> bool:
        return self.question_id.endswith(ABSTENTION_SUFFIX)


def parse_date(text: str) -> datetime:
    """``"2023/05/20 (Sat) 02:21"`` → an aware UTC datetime."""
    m = _DATE.match(str(text))
    if not m:
        raise ValueError(f"unrecognised LongMemEval date {text!r}")
    year, month, day, hour, minute = (int(g) for g in m.groups())
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def message_id(question_id: str, session: int, turn: int) -> str:
    """A globally unique, stable message id: ``07741c45.s1.t3``."""
    return safe_id(f"{safe_id(question_id, 40)}.s{session}.t{turn}")


def author(role: str) -> tuple[str, str, bool]:
    """(author id, author name, is_bot) for a turn's role."""
    name = safe_id(role.lower(), 30) if role else "assistant"
    return name, name, name != USER_ROLE


def read_items(path: Path) -> list[dict[str, Any]]:
    """The file's list of items; gzip-compressed or plain JSON."""
    raw = Path(path).read_bytes()
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise ValueError(f"broken gzip data: {exc}") from exc
    data = json.loads(raw.decode("utf-8"))
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise ValueError("expected a JSON list of questions")
    return data


def parse_item(raw: dict[str, Any]) -> Item:
    qid = str(raw["question_id"])
    sessions = raw["haystack_sessions"]
    dates = raw["haystack_dates"]
    if not isinstance(sessions, list) or not isinstance(dates, list):
        raise ValueError(f"{qid}: haystack_sessions and haystack_dates must be lists")
    if len(sessions) != len(dates):
        raise ValueError(f"{qid}: {len(sessions)} sessions but {len(dates)} dates")
    starts = [parse_date(d) for d in dates]
    turns: list[Turn] = []
    # Oldest session first; sessions of the same minute keep the file's order.
    for s in sorted(range(len(sessions)), key=lambda i: (starts[i], i)):
        session = sessions[s]
        if not isinstance(session, list):
            raise ValueError(f"{qid}: session {s} is not a list of turns")
        for t, turn in enumerate(session):
            if not isinstance(turn, dict):
                raise ValueError(f"{qid}: turn {t} of session {s} is not an object")
            text = str(turn.get("content") or "").strip()
            if not text:
                continue
            turns.append(
                Turn(
                    message_id=message_id(qid, s, t),
                    role=str(turn.get("role") or ""),
                    text=text,
                    created_at=starts[s] + timedelta(seconds=TURN_SPACING_S * t),
                    session=s,
                    evidence=turn.get("has_answer") is True,
                )
            )
    # Ingest order breaks ties of time (two sessions of the same minute).
    order = {turn.message_id: n for n, turn in enumerate(turns)}
    evidence = sorted(
        (turn for turn in turns if turn.evidence),
        key=lambda turn: (turn.created_at, order[turn.message_id]),
    )
    answer = raw.get("answer")
    return Item(
        question_id=qid,
        question_type=str(raw.get("question_type") or "unknown"),
        question=str(raw["question"]),
        answer=None if answer is None else str(answer),
        asked_at=parse_date(str(raw["question_date"])),
        guild_id=safe_id(f"lme-{qid}"),
        turns=tuple(turns),
        evidence=tuple(turn.message_id for turn in evidence),
    )


def load(path: Path, *, types: Sequence[str] | None = None, limit: int | None = None) -> list[Item]:
    """The file's questions, in file order; ``types`` keeps only those types
    (each must occur in the file), ``limit`` the first N after that."""
    items: list[Item] = []
    seen: set[str] = set()
    for n, raw in enumerate(read_items(path)):
        if not isinstance(raw, dict):
            raise ValueError(f"item {n} is not an object")
        try:
            item = parse_item(raw)
        except KeyError as exc:
            raise ValueError(f"item {n} has no {exc.args[0]!r}") from exc
        if item.guild_id in seen:
            raise ValueError(f"question id {item.question_id!r} occurs twice")
        seen.add(item.guild_id)
        items.append(item)
    if types:
        found = sorted({i.question_type for i in items})
        unknown = [t for t in types if t not in found]
        if unknown:
            raise ValueError(f"no questions of type {', '.join(unknown)}; found {', '.join(found)}")
        items = [i for i in items if i.question_type in types]
    if limit is not None:
        items = items[: max(0, limit)]
    return items


def incoming(item: Item, turn: Turn) -> IncomingMessage:
    author_id, name, is_bot = author(turn.role)
    return IncomingMessage(
        id=turn.message_id,
        guild_id=item.guild_id,
        channel_id=CHANNEL,
        author_id=author_id,
        author_name=name,
        content=turn.text,
        created_at=timestamp(turn.created_at),
        source="import",
        is_bot=is_bot,
    )


# -- scoring ---------------------------------------------------------------------------------------


def newest_first(ranked: Sequence[str], evidence: Sequence[str], k: int = NEWEST_FIRST_K) -> bool:
    """Whether the newest evidence turn (the last of ``evidence``, oldest
    first) is in the top ``k`` and ranks above every older evidence turn (one
    not ranked at all counts as below it)."""
    if not evidence:
        raise ValueError("newest_first needs at least one evidence turn")
    position = {mid: n for n, mid in enumerate(ranked)}
    newest = position.get(evidence[-1])
    if newest is None or newest >= k:
        return False
    return all(position.get(mid, len(ranked)) > newest for mid in evidence[:-1])


@dataclass
class QuestionResult:
    item: Item
    ranked: list[str]
    ms: float
    strict_hits: int
    strict: list[str] = field(default_factory=list)  # strict search's ranked ids


def question_record(r: QuestionResult, ks: Sequence[int]) -> dict[str, Any]:
    """One line of the per-question output."""
    item = r.item
    scored = bool(item.evidence) and not item.abstention
    position = {mid: n + 1 for n, mid in enumerate(r.ranked)}
    record: dict[str, Any] = {
        "question_id": item.question_id,
        "type": item.question_type,
        "abstention": item.abstention,
        "evidence": list(item.evidence),
        "evidence_ranks": {mid: position.get(mid) for mid in item.evidence},
        "ranked": r.ranked[:RANK_DEPTH],
        "recall": {},
        "hit": {},
        "newest_first": None,
        "strict_hits": r.strict_hits,
        "strict_evidence_ranks": {
            mid: n + 1 for n, mid in enumerate(r.strict) if mid in set(item.evidence)
        },
        "ms": round(r.ms, 3),
    }
    if scored:
        for k in ks:
            recall, hit = score_question(r.ranked, item.evidence, k)
            record["recall"][str(k)] = recall
            record["hit"][str(k)] = bool(hit)
        if item.question_type == KNOWLEDGE_UPDATE:
            record["newest_first"] = newest_first(r.ranked, item.evidence)
    return record


def summarise(
    results: Sequence[QuestionResult],
    ks: Sequence[int],
    *,
    ingest_seconds: float = 0.0,
    seconds: float = 0.0,
    turns: int = 0,
) -> dict[str, Any]:
    scored = [r for r in results if r.item.evidence and not r.item.abstention]
    abstain = [r for r in results if r.item.abstention]
    found_types = {r.item.question_type for r in scored}
    types = [t for t in TYPES if t in found_types] + sorted(found_types - set(TYPES))

    def block(rs: Sequence[QuestionResult]) -> dict[str, float]:
        return recall_block([(r.ranked, r.item.evidence) for r in rs], ks)

    def strict_block(rs: Sequence[QuestionResult]) -> dict[str, float]:
        return recall_block([(r.strict, r.item.evidence) for r in rs], ks)

    updates = [r for r in scored if r.item.question_type == KNOWLEDGE_UPDATE]
    with_older = [r for r in updates if len(r.item.evidence) > 1]

    def share(rs: Sequence[QuestionResult], test: Callable[[QuestionResult], bool]) -> float:
        return statistics.fmean(1.0 if test(r) else 0.0 for r in rs) if rs else 0.0

    def is_newest_first(r: QuestionResult) -> bool:
        return newest_first(r.ranked, r.item.evidence)

    return {
        "k": list(ks),
        "overall": block(scored),
        "by_type": {t: block([r for r in scored if r.item.question_type == t]) for t in types},
        "newest_first": {
            "k": NEWEST_FIRST_K,
            "n": len(updates),
            "share": share(updates, is_newest_first),
            # Questions with an older evidence turn the newest must beat.
            "n_with_older": len(with_older),
            "share_with_older": share(with_older, is_newest_first),
        },
        "strict": {
            "overall": strict_block(scored),
            "by_type": {
                t: strict_block([r for r in scored if r.item.question_type == t]) for t in types
            },
        },
        "abstention": abstention_block(
            [r.strict_hits for r in abstain], [r.strict_hits for r in scored]
        ),
        "questions": len(results),
        "unscored_no_evidence": sum(
            1 for r in results if not r.item.evidence and not r.item.abstention
        ),
        "turns": turns,
        "seconds": round(seconds, 3),
        "ingest_seconds": round(ingest_seconds, 3),
        "seconds_per_question": round(seconds / len(results), 3) if results else 0.0,
        "query_ms": latency([r.ms for r in results]),
    }


def format_table(summary: dict[str, Any]) -> str:
    ks = summary["k"]
    rows = list(summary["by_type"].items())
    lines = format_recall_table("question type", rows, ("overall", summary["overall"]), ks)
    nf = summary["newest_first"]
    ab = summary["abstention"]
    lines.append(
        f"newest-first (knowledge-update, top {nf['k']}): {nf['share'] * 100:.1f} of {nf['n']}"
        f" ({nf['share_with_older'] * 100:.1f} of the {nf['n_with_older']} with an older"
        " evidence turn)"
    )
    strict = summary["strict"]
    lines.append("strict search (gate on):")
    lines.extend(
        format_recall_table(
            "question type",
            list(strict["by_type"].items()),
            ("overall", strict["overall"]),
            ks,
        )
    )
    lines.append(format_abstention(ab, "_abs questions"))
    lines.append(
        f"questions {summary['questions']}, turns {summary['turns']}, "
        f"run {summary['seconds']:.1f} s ({summary['seconds_per_question']:.2f} s/question, "
        f"ingest {summary['ingest_seconds']:.1f} s), query p50 {summary['query_ms']['p50']:.1f} ms,"
        f" p95 {summary['query_ms']['p95']:.1f} ms"
    )
    return "\n".join(lines)


# -- running ---------------------------------------------------------------------------------------


async def stored(memory: Memory, item: Item) -> bool:
    """Whether every turn of ``item`` is already a message of its guild (a
    database kept from an earlier run holds its whole history)."""
    for turn in item.turns:
        if await memory.get_message(item.guild_id, turn.message_id) is None:
            return False
    return bool(item.turns)


async def answer(
    memory: Memory, clock: SettableClock, item: Item, *, gate: bool = False, reuse: bool = False
) -> tuple[QuestionResult, float]:
    """Ingest one question's history at its date and rank it; (result, ingest
    seconds). With ``reuse`` a history already stored is ranked as it is."""
    clock.set(item.asked_at)
    seconds = 0.0
    if not (reuse and await stored(memory, item)):
        report = await ingest(memory, [incoming(item, turn) for turn in item.turns])
        seconds = report.seconds
    await warm(memory, item.guild_id, RANK_DEPTH)
    ranked, ms = await rank(memory, item.guild_id, item.question, RANK_DEPTH, gate=gate)
    strict, hits = await strict_search(memory, item.guild_id, item.question, RANK_DEPTH)
    return QuestionResult(item, ranked, ms, hits, strict), seconds


async def run_benchmark(
    data: Path,
    *,
    ks: Sequence[int] = DEFAULT_K,
    types: Sequence[str] | None = None,
    limit: int | None = None,
    data_dir: Path | None = None,
    reuse: bool = False,
    gate: bool = False,
    threads: int = 2,
    embedder: Any = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], list[QuestionResult]]:
    """Every question ingested and ranked. ``reuse`` (with ``data_dir``): a
    question whose history that directory's database already holds is not
    ingested again, so ranking changes are measured without re-embedding."""
    if reuse and data_dir is None:
        raise ValueError("reusing a database needs its data directory")
    started = time.perf_counter()
    items = await asyncio.to_thread(load, data, types=types, limit=limit)
    clock = SettableClock()
    results: list[QuestionResult] = []
    ingest_seconds = 0.0
    async with offline_memory(
        data_dir=data_dir, threads=threads, embedder=embedder, clock=clock
    ) as memory:
        for n, item in enumerate(items, 1):
            t0 = time.perf_counter()
            result, seconds = await answer(memory, clock, item, gate=gate, reuse=reuse)
            results.append(result)
            ingest_seconds += seconds
            if progress:
                progress(
                    f"[{n}/{len(items)}] {item.question_id} {item.question_type}: "
                    f"{len(item.turns)} turns, {time.perf_counter() - t0:.1f} s"
                )
    summary = summarise(
        results,
        ks,
        ingest_seconds=ingest_seconds,
        seconds=time.perf_counter() - started,
        turns=sum(len(i.turns) for i in items),
    )
    summary["mode"] = "strict" if gate else "ranking"
    return summary, results


def run(
    data: Path,
    ks: Sequence[int],
    json_out: Path | None,
    per_question_out: Path | None = None,
    **kw: Any,
) -> dict[str, Any]:
    summary, results = asyncio.run(run_benchmark(data, ks=ks, **kw))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if per_question_out is not None:
        per_question_out.parent.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(question_record(r, ks)) for r in results]
        per_question_out.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return summary
