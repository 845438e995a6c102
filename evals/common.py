"""What the retrieval benchmarks share: the offline engine, import-style ingest,
the ranking call, evidence scoring, percentiles and the results table.

Every harness drives the same engine the bot runs (``Memory`` with the rule
extractor and the bundled local MiniLM embedder), feeds it through
``Memory.ingest_message`` the way ``guildlore import`` does, and ranks with
the same ``search(scope="all")`` call, so their figures are comparable.
"""

from __future__ import annotations

import contextlib
import re
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory import EmbeddingConfig, Hit, IncomingMessage, Memory, MemoryConfig, import_messages

_ID_UNSAFE = re.compile(r"[^0-9A-Za-z_:.\-]+")


def safe_id(text: str, limit: int = 64) -> str:
    """``text`` cut down to what the engine accepts as an id."""
    out = _ID_UNSAFE.sub("-", text.strip()).strip("-") or "x"
    return out[:limit]


def timestamp(dt: datetime) -> str:
    """ISO-8601 text for a message time (naive times are UTC)."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).isoformat()


class SettableClock:
    """The engine's "now", moved by the harness (e.g. to each question's date)."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now = now or datetime.now(UTC)

    def set(self, now: datetime) -> None:
        self.now = now if now.tzinfo is not None else now.replace(tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


# -- the engine ----------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def offline_memory(
    *,
    data_dir: Path | None = None,
    threads: int = 2,
    embedder: Any = None,
    clock: SettableClock | None = None,
) -> AsyncIterator[Memory]:
    """A started engine with the offline stack (rule extractor, local MiniLM),
    in ``data_dir`` or a throw-away directory; closed on exit."""
    with tempfile.TemporaryDirectory(prefix="guildlore-bench-") as tmp:
        root = data_dir or Path(tmp)
        cfg = MemoryConfig.for_data_dir(
            root, embedding=EmbeddingConfig(provider="local", threads=max(1, threads))
        )
        kw: dict[str, Any] = {"embedder": embedder}
        if clock is not None:
            kw["clock"] = clock
        memory = await Memory.open(cfg, **kw)
        try:
            yield memory
        finally:
            await memory.close()


@dataclass
class IngestReport:
    messages: int = 0
    seconds: float = 0.0
    message_vectors: int = 0
    rejected: Counter[str] = field(default_factory=Counter)


async def ingest(
    memory: Memory, messages: Sequence[IncomingMessage], *, timeout: float = 1800
) -> IngestReport:
    """Feed ``messages`` through the engine as ``guildlore import`` does (chunks
    with backpressure, facts embedded first, then the messages' vectors in
    bulk). Returns once everything is processed and embedded. A rejected
    message is an error of the harness, not of the data: it raises."""
    # The benchmarks' speakers are fictional: nobody could answer a consent
    # prompt, and recall of everything they said is what is measured.
    for guild_id in sorted({m.guild_id for m in messages if m.guild_id}):
        await memory.guilds.set_setting(guild_id, "sensitive_facts", "store")
    done = await import_messages(memory, messages, settle_timeout=timeout)
    if done.rejected:
        reason = done.rejected.most_common(1)[0][0]
        raise RuntimeError(f"{sum(done.rejected.values())} messages rejected ({reason})")
    if not done.settled or done.message_vectors_pending:
        raise RuntimeError("ingest did not settle in time")
    return IngestReport(
        messages=len(messages),
        seconds=done.seconds,
        message_vectors=done.message_vectors,
        rejected=done.rejected,
    )


async def warm(memory: Memory, guild_id: str, limit: int) -> None:
    """Load the guild's vector matrices and the model session, so the timed
    query measures the steady state rather than a cold start."""
    await memory.warm_up(guild_id)
    await memory.search(guild_id, "warm up", limit=limit, scope="all", gate=False)


async def rank(
    memory: Memory, guild_id: str, query: str, limit: int, *, gate: bool = False
) -> tuple[list[str], float]:
    """The question's ranked message ids and the search's milliseconds.

    ``gate=False`` is the ranking view (every candidate, best first), what a
    retrieval benchmark measures; ``gate=True`` is strict search."""
    t0 = time.perf_counter()
    hits = await memory.search(guild_id, query, limit=limit, scope="all", gate=gate)
    ms = (time.perf_counter() - t0) * 1000
    return await ranked_message_ids(memory, guild_id, hits), ms


async def strict_search(
    memory: Memory, guild_id: str, query: str, limit: int
) -> tuple[list[str], int]:
    """Strict search's ranked message ids and its number of hits (0: the
    engine answers "nothing relevant")."""
    hits = await memory.search(guild_id, query, limit=limit, scope="all", gate=True)
    return await ranked_message_ids(memory, guild_id, hits), len(hits)


async def ranked_message_ids(memory: Memory, guild_id: str, hits: Sequence[Hit]) -> list[str]:
    """Message ids in rank order, duplicates dropped. A fact counts as every
    message it was observed in (its ``fact_sources``; a paraphrase said again
    is one fact with two observations), newest observation first; a fact with
    no recorded observation counts as its source message."""
    out: dict[str, None] = {}
    for h in hits:
        if h.kind == "message":
            out.setdefault(h.id, None)
            continue
        seen = await memory.facts.sources(guild_id, int(h.id))
        mids: list[str | None] = [s.message_id for s in reversed(seen)] or [h.source_message_id]
        for mid in mids:
            if mid:
                out.setdefault(mid, None)
    return list(out)


# -- scoring ---------------------------------------------------------------------------------------


def score_question(ranked: Sequence[str], evidence: Sequence[str], k: int) -> tuple[float, float]:
    """(recall@k, hit@k) for one question: the share of its evidence in the
    top k, and 1 if any of it is there."""
    top = set(ranked[:k])
    found = sum(1 for e in evidence if e in top)
    return found / len(evidence), 1.0 if found else 0.0


def recall_block(
    scored: Sequence[tuple[Sequence[str], Sequence[str]]], ks: Sequence[int]
) -> dict[str, float]:
    """recall@k and hit@k averaged over (ranked, evidence) pairs, and n."""
    out: dict[str, float] = {}
    for k in ks:
        pairs = [score_question(ranked, evidence, k) for ranked, evidence in scored]
        out[f"recall@{k}"] = statistics.fmean(p[0] for p in pairs) if pairs else 0.0
        out[f"hit@{k}"] = statistics.fmean(p[1] for p in pairs) if pairs else 0.0
    out["n"] = len(scored)
    return out


def abstention_block(unanswerable: Sequence[int], answerable: Sequence[int]) -> dict[str, Any]:
    """From strict search's hit counts: the share of unanswerable questions
    given no hit at all, and for contrast the share of answerable ones."""

    def none_share(counts: Sequence[int]) -> float:
        return statistics.fmean(1.0 if n == 0 else 0.0 for n in counts) if counts else 0.0

    return {
        "n": len(unanswerable),
        "no_strict_hit_share": none_share(unanswerable),
        "answerable_n": len(answerable),
        "answerable_no_strict_hit_share": none_share(answerable),
    }


def format_abstention(block: dict[str, Any], label: str) -> str:
    if not block["n"]:
        return (
            f"abstention: no {label} in this data set (answerable questions with no strict hit: "
            f"{block['answerable_no_strict_hit_share'] * 100:.1f} % of {block['answerable_n']})"
        )
    return (
        f"abstention ({label}): {block['no_strict_hit_share'] * 100:.1f} % of {block['n']}"
        f" get no strict hit (answerable questions with no strict hit: "
        f"{block['answerable_no_strict_hit_share'] * 100:.1f} % of {block['answerable_n']})"
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by linear interpolation; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def latency(ms: Sequence[float]) -> dict[str, float]:
    return {"p50": round(percentile(ms, 0.5), 3), "p95": round(percentile(ms, 0.95), 3)}


def format_recall_table(
    label: str,
    rows: Sequence[tuple[str, dict[str, float]]],
    total: tuple[str, dict[str, float]],
    ks: Sequence[int],
) -> list[str]:
    """Lines of a recall table: one row per group, a rule, then the total row."""
    width = max(16, len(label) + 1, *(len(name) + 1 for name, _ in (*rows, total)))
    cols = [f"R@{k}" for k in ks] + [f"H@{k}" for k in ks]
    head = f"{label:<{width}}{'n':>5}" + "".join(f"{c:>8}" for c in cols)

    def row(name: str, b: dict[str, float]) -> str:
        vals = [b[f"recall@{k}"] for k in ks] + [b[f"hit@{k}"] for k in ks]
        return f"{name:<{width}}{int(b['n']):>5}" + "".join(f"{v * 100:>8.1f}" for v in vals)

    lines = [head, "-" * len(head)]
    lines.extend(row(name, b) for name, b in rows)
    lines.append("-" * len(head))
    lines.append(row(*total))
    return lines
