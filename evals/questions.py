"""Natural questions about a real export: does search answer them?

    guildlore bench questions --data tests/data/papyrology-questions.json [--json OUT]

The data file names a DiscordChatExporter export (``export``, beside it) and
lists questions a member or an operator would ask of it — "when did we talk
about Plato's grave?", "who here studies Greek?" — each with the messages
that answer it (``answers``, by message id) and, where it matters, messages
that must not be taken for an answer (``not_answers``: a member writing they
are *not* a papyrologist, a fact that only shares a word with the question).

The export is imported as ``guildlore import`` does (offline stack: the rule
extractor, the local MiniLM), then every question is asked of strict search
(the relevance gate on: what ``/memory search``, ``guildlore search``, the
dashboard and the model's lookup get) under several scopes:

* ``default`` — ``DEFAULT_SEARCH_SCOPE``, what those callers ask when the
  person asking names no scope;
* ``facts``, ``messages``, ``all`` — each scope named explicitly.

* ``fallback`` — facts, and past messages after them when fewer than
  ``FALLBACK_BELOW`` facts answer (the other default the issue weighed).

A question is **answered well** under a scope when one of its first
``TOP`` hits is an answer — a message it lists, or a fact observed in one
(the fact's sources) — and none of its first ``TOP`` hits is one it lists
as not an answer. The summary counts questions answered well per scope, and per
kind of question (``when``, ``who``, ``what``); ``--json`` keeps each
question's first hits under each scope.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.common import offline_memory, warm
from memory import DEFAULT_SEARCH_SCOPE, Hit, Memory, import_files, read_header

TOP = 3  # a person reads the first few lines of an answer
LIMIT = 10
SCOPES: tuple[str, ...] = ("default", "facts", "messages", "all", "fallback")
FALLBACK_BELOW = 3


@dataclass(frozen=True)
class Question:
    question: str
    kind: str
    answers: frozenset[str]
    not_answers: frozenset[str]
    good_answer: str


def load(path: Path) -> tuple[Path, list[Question]]:
    """The export the questions are about, and the questions."""
    data = json.loads(path.read_text(encoding="utf-8"))
    export = path.parent / str(data["export"])
    questions = [
        Question(
            str(q["question"]),
            str(q.get("kind", "")),
            frozenset(str(i) for i in q["answers"]),
            frozenset(str(i) for i in q.get("not_answers", ())),
            str(q.get("good_answer", "")),
        )
        for q in data["questions"]
    ]
    if not questions:
        raise ValueError("no questions")
    return export, questions


async def hit_messages(memory: Memory, guild_id: str, hit: Hit) -> set[str]:
    """The messages a hit stands for: itself, or the messages a fact was observed in."""
    if hit.kind == "message":
        return {hit.id}
    seen = await memory.facts.sources(guild_id, int(hit.id))
    return {s.message_id for s in seen if s.message_id} | (
        {hit.source_message_id} if hit.source_message_id else set()
    )


def judge(q: Question, stands_for: Sequence[set[str]]) -> dict[str, Any]:
    """Whether the hits (each as the messages it stands for) answer ``q`` well."""
    first = next((i for i, ms in enumerate(stands_for) if ms & q.answers), None)
    wrong = next((i for i, ms in enumerate(stands_for) if ms & q.not_answers), None)
    well = first is not None and first < TOP and (wrong is None or wrong >= TOP)
    return {
        "well": well,
        "first_answer": None if first is None else first + 1,
        "first_not_answer": None if wrong is None else wrong + 1,
        "hits": len(stands_for),
    }


async def ask(
    memory: Memory, guild_id: str, q: Question, scope: str
) -> tuple[dict[str, Any], list[Hit]]:
    if scope == "default":
        hits = await memory.search(guild_id, q.question, limit=LIMIT, scope=DEFAULT_SEARCH_SCOPE)
    elif scope == "fallback":
        hits = await memory.search(guild_id, q.question, limit=LIMIT, scope="facts")
        if len(hits) < FALLBACK_BELOW:
            more = await memory.search(guild_id, q.question, limit=LIMIT, scope="messages")
            hits = (hits + more)[:LIMIT]
    else:
        hits = await memory.search(guild_id, q.question, limit=LIMIT, scope=scope)  # type: ignore[arg-type]
    stands_for = [await hit_messages(memory, guild_id, h) for h in hits]
    return judge(q, stands_for), hits


def _shown(hit: Hit) -> dict[str, Any]:
    return {
        "kind": hit.fact_type if hit.kind == "fact" else "message",
        "id": hit.id,
        "when": hit.created_at[:10],
        "text": " ".join(hit.text.split())[:160],
        "score": round(hit.score, 3),
    }


async def run_benchmark(
    data: Path,
    *,
    data_dir: Path | None = None,
    threads: int = 2,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    export, questions = await asyncio.to_thread(load, data)
    guild_id = read_header(export).guild_id or ""
    async with offline_memory(data_dir=data_dir, threads=threads) as memory:
        report = await import_files(memory, [export])
        if report.errors:
            raise ValueError(f"cannot import {export}: {report.errors[0]}")
        if progress:
            progress(
                f"imported {report.stats.messages} messages, {report.facts_added} facts; asking"
            )
        await warm(memory, guild_id, LIMIT)
        rows = []
        for q in questions:
            row: dict[str, Any] = {"question": q.question, "kind": q.kind, "scopes": {}}
            for scope in SCOPES:
                verdict, hits = await ask(memory, guild_id, q, scope)
                verdict["top"] = [_shown(h) for h in hits[:TOP]]
                row["scopes"][scope] = verdict
            rows.append(row)
        facts = report.facts_added
    return summarise(rows, facts, report.stats.messages)


def summarise(rows: list[dict[str, Any]], facts: int, messages: int) -> dict[str, Any]:
    kinds = sorted({r["kind"] for r in rows})
    totals = {
        scope: {
            "well": sum(r["scopes"][scope]["well"] for r in rows),
            "no_hit": sum(r["scopes"][scope]["hits"] == 0 for r in rows),
            "by_kind": {
                k: sum(r["scopes"][scope]["well"] for r in rows if r["kind"] == k) for k in kinds
            },
        }
        for scope in SCOPES
    }
    return {
        "questions": len(rows),
        "top": TOP,
        "facts": facts,
        "messages": messages,
        "kinds": {k: sum(r["kind"] == k for r in rows) for k in kinds},
        "answered_well": totals,
        "rows": rows,
    }


def format_table(summary: dict[str, Any]) -> str:
    width = max(len(r["question"]) for r in summary["rows"])
    head = f"{'question':<{width}}  " + "  ".join(f"{s:>8}" for s in SCOPES)
    lines = [head, "-" * len(head)]
    for r in summary["rows"]:
        marks = []
        for scope in SCOPES:
            v = r["scopes"][scope]
            mark = "yes" if v["well"] else ("-" if v["hits"] == 0 else "no")
            marks.append(f"{mark:>8}")
        lines.append(f"{r['question']:<{width}}  " + "  ".join(marks))
    lines.append("-" * len(head))
    n = summary["questions"]
    totals = summary["answered_well"]
    lines.append(
        f"{'answered well (of ' + str(n) + ')':<{width}}  "
        + "  ".join(f"{totals[s]['well']:>8}" for s in SCOPES)
    )
    for kind, count in summary["kinds"].items():
        lines.append(
            f"{'  ' + kind + ' (of ' + str(count) + ')':<{width}}  "
            + "  ".join(f"{totals[s]['by_kind'][kind]:>8}" for s in SCOPES)
        )
    lines.append(
        f"answered well: an answer among the first {summary['top']} hits of strict search "
        "and no listed non-answer among them; '-' no hit at all"
    )
    lines.append(f"memory: {summary['facts']} facts from {summary['messages']} messages")
    return "\n".join(lines)


def run(data: Path, json_out: Path | None, **kw: Any) -> dict[str, Any]:
    summary = asyncio.run(run_benchmark(data, **kw))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(
            json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    return summary
