"""Pure ranking functions: the per-fact signals (lexical, semantic, confidence,
recency, channel, BM25), their weighted fusion and the relevance gate.

No I/O and no clocks: callers pass ages, channels and similarities in, and get
numbers (or ``ScoreParts`` in explain mode) out, so the dashboard can show
exactly why a fact ranked where it did.

The lexical signal itself is ``memory.retrieval.lexical``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar, overload

from memory.models import ScoreParts

T = TypeVar("T")

# Float sums such as 0.50·a + 0.28·b land a hair under a threshold they
# mathematically meet; compare with this much slack.
_EPS = 1e-9


@dataclass(frozen=True)
class FusionWeights:
    semantic: float
    lexical: float
    confidence: float
    recency: float
    channel: float
    bm25: float = 0.0  # shown in the score parts; not fused unless set


@dataclass(frozen=True)
class ScoringWeights:
    """Fact fusion weights and relevance-gate thresholds.

    With a semantic score: 0.50·sem + 0.28·lex + 0.10·conf + 0.07·rec + 0.05·chan;
    without one, the lexical overlap carries the semantic share:
    0.75·lex + 0.10·conf + 0.10·rec + 0.05·chan.
    """

    with_semantic: FusionWeights = field(
        default_factory=lambda: FusionWeights(0.50, 0.28, 0.10, 0.07, 0.05)
    )
    without_semantic: FusionWeights = field(
        default_factory=lambda: FusionWeights(0.0, 0.75, 0.10, 0.10, 0.05)
    )
    # Gate with semantic: sem ≥ sem_min or lex ≥ lex_min_with_semantic, or
    # combined ≥ combined_min_with_semantic backed by a weak signal.
    sem_min: float = 0.20
    lex_min_with_semantic: float = 0.22
    combined_min_with_semantic: float = 0.52
    support_sem_min: float = 0.08
    support_lex_min: float = 0.10
    # Gate without semantic.
    lex_min: float = 0.24
    combined_min: float = 0.62
    recency_half_days: float = 45.0
    # Added to a canon fact's combined score (a pinned message's lore) after
    # the gate has judged it: canon outranks chat-extracted facts that are
    # as relevant, but never makes an unrelated fact pass.
    canon_boost: float = 0.10
    channel_same: float = 1.0
    channel_unscoped: float = 0.25


DEFAULT_WEIGHTS = ScoringWeights()


_FUSION_TOTAL = 1.9


@dataclass(frozen=True)
class MessageWeights:
    """Fusion for past messages (facts keep ``ScoringWeights``).

    Tuned on the LoCoMo dev split only (``guildlore bench locomo``; docs/performance.md), in raw units:
    0.7·cosine + 0.3·normalised BM25 is a message's own *base* relevance; it
    borrows 0.3 of its better neighbour's base (a reply takes meaning from the
    message it answers); +0.3 when its author is the member the query names;
    +0.2 when it was written on a date the query mentions; +0.1 for the share
    of its sentences that are statements rather than questions (a message
    that asks remembers less than one that tells — "how was the trip?" echoes
    a query's words without answering it). Divided by their sum (1.9) so
    ``combined`` stays in 0..1 and merges with fact scores. On top, +0.1 (in
    the same units) for how much it speaks of its author in the first person
    (``memory.retrieval.voice``: a member's own story rather than a reply to
    someone else's or an explanation), measured on the LoCoMo, REALTALK and
    LongMemEval dev splits together; it is not counted in the divisor because
    a smaller scale for every message let fact hits outrank them (LongMemEval
    S recall@10 −1.1), and ``combined`` is clamped to 1. Recency, channel
    and lexical overlap are reported, not fused: on the benchmark they only
    added noise, and the prompt slice already puts the same channel first.
    """

    semantic: float = 0.7 / _FUSION_TOTAL
    bm25: float = 0.3 / _FUSION_TOTAL
    neighbour: float = 0.3 / _FUSION_TOTAL
    speaker: float = 0.3 / _FUSION_TOTAL
    date: float = 0.2 / _FUSION_TOTAL
    statement: float = 0.1 / _FUSION_TOTAL
    first_person: float = 0.1 / _FUSION_TOTAL
    lexical: float = 0.0
    recency: float = 0.0
    channel: float = 0.0
    # Subtracted when every fact taken from the message has been superseded:
    # the message tells what used to be true, and ranks below what is.
    superseded: float = 0.2 / _FUSION_TOTAL

    def base(self, semantic: float | None, bm25: float) -> float:
        """A message's own relevance in 0..1 (what its neighbours borrow)."""
        total = self.semantic + self.bm25
        if total <= 0:
            return 0.0
        sem = 0.0 if semantic is None else _unit(semantic)
        return (self.semantic * sem + self.bm25 * _unit(bm25)) / total

    def combined(
        self,
        semantic: float,
        bm25: float,
        neighbour: float,
        speaker: float,
        date: float,
        statement: float,
        lexical: float = 0.0,
        recency: float = 0.0,
        channel: float = 0.0,
        superseded: float = 0.0,
        first_person: float = 0.0,
    ) -> float:
        """The weighted sum of parts already clamped to 0..1 (``superseded``
        counts against), clamped to 0..1."""
        total = (
            self.semantic * semantic
            + self.bm25 * bm25
            + self.neighbour * neighbour
            + self.speaker * speaker
            + self.date * date
            + self.statement * statement
            + self.first_person * first_person
            + self.lexical * lexical
            + self.recency * recency
            + self.channel * channel
            - self.superseded * superseded
        )
        return min(1.0, max(0.0, total))


DEFAULT_MESSAGE_WEIGHTS = MessageWeights()


def recency_score(age_days: float, half: float = 45.0) -> float:
    """``1 / (1 + age/half)``: 1 today, 0.5 at ``half`` days; future ages count as now."""
    if half <= 0:
        raise ValueError(f"recency half-life must be positive, got {half}")
    if not math.isfinite(age_days):
        return 0.0 if age_days > 0 else 1.0
    return 1.0 / (1.0 + max(0.0, age_days) / half)


def channel_score(
    fact_channel: str | None,
    query_channel: str | None,
    *,
    weights: ScoringWeights = DEFAULT_WEIGHTS,
) -> float:
    """1 same channel, 0.25 guild-wide fact, 0 other channel.

    A query without a channel (dashboard search) scores 0 for every fact, so
    the signal cannot favour guild-wide facts where no channel was asked about.
    """
    if query_channel is None:
        return 0.0
    if fact_channel is None:
        return weights.channel_unscoped
    return weights.channel_same if fact_channel == query_channel else 0.0


def bm25_normalise(raw_bm25_values: Sequence[float | None]) -> list[float]:
    """Map SQLite ``bm25()`` values to 0..1 within one candidate set, best = 1.

    ``bm25()`` is negative and lower is better. Each value is divided by the
    best one, so scores stay proportional to match strength (the weakest FTS
    match is not pushed to 0 just for being last). None (a candidate that did
    not come from FTS), non-finite and non-negative values score 0; if the set
    has no usable value, everything scores 0.
    """
    usable = [v for v in raw_bm25_values if v is not None and math.isfinite(v) and v < 0]
    if not usable:
        return [0.0 for _ in raw_bm25_values]
    best = min(usable)
    out: list[float] = []
    for v in raw_bm25_values:
        if v is None or not math.isfinite(v) or v >= 0:
            out.append(0.0)
        else:
            out.append(min(1.0, max(0.0, v / best)))
    return out


def _unit(value: float) -> float:
    # Cosine can be negative and callers can pass junk; the fusion only means
    # something for signals in 0..1, and NaN must not poison a ranking.
    if 0.0 <= value <= 1.0:  # the usual case, at a comparison's cost (NaN fails it)
        return value + 0.0  # a float, as below
    if not math.isfinite(value):
        return 0.0
    return min(1.0, max(0.0, value))


def passes_gate(parts: ScoreParts, *, weights: ScoringWeights = DEFAULT_WEIGHTS) -> bool:
    """The relevance gate, on the lexical, semantic and combined parts.

    With a semantic score a hit passes on a strong signal of its own (``sem_min``,
    ``lex_min_with_semantic``) or on a high combined score backed by a weak one;
    without, on lexical overlap or a higher combined score alone. A canon
    fact is judged without its boost. A hit that says the words of a "who
    has…" question only under a negation never passes
    (``memory.retrieval.negation``).
    """
    if parts.negated:
        return False
    combined = parts.combined - weights.canon_boost * parts.canon
    return _gate(parts.lexical, parts.semantic, combined, weights)


def _gate(lex: float, sem: float | None, combined: float, weights: ScoringWeights) -> bool:
    if sem is None:
        return lex >= weights.lex_min - _EPS or combined >= weights.combined_min - _EPS
    if sem >= weights.sem_min - _EPS or lex >= weights.lex_min_with_semantic - _EPS:
        return True
    return combined >= weights.combined_min_with_semantic - _EPS and (
        sem >= weights.support_sem_min - _EPS or lex >= weights.support_lex_min - _EPS
    )


@overload
def fuse(
    lexical: float,
    semantic: float | None,
    confidence: float,
    recency: float,
    channel: float,
    bm25: float = ...,
    *,
    explain: Literal[False] = ...,
    weights: ScoringWeights = ...,
    canon: bool = ...,
) -> float: ...


@overload
def fuse(
    lexical: float,
    semantic: float | None,
    confidence: float,
    recency: float,
    channel: float,
    bm25: float = ...,
    *,
    explain: Literal[True],
    weights: ScoringWeights = ...,
    canon: bool = ...,
) -> ScoreParts: ...


@overload
def fuse(
    lexical: float,
    semantic: float | None,
    confidence: float,
    recency: float,
    channel: float,
    bm25: float = ...,
    *,
    explain: bool,
    weights: ScoringWeights = ...,
    canon: bool = ...,
) -> float | ScoreParts: ...


def fuse(
    lexical: float,
    semantic: float | None,
    confidence: float,
    recency: float,
    channel: float,
    bm25: float = 0.0,
    *,
    explain: bool = False,
    weights: ScoringWeights = DEFAULT_WEIGHTS,
    canon: bool = False,
) -> float | ScoreParts:
    """Weighted sum of the signals; with ``explain`` the parts, combined and gate result.
    A ``canon`` fact gets ``weights.canon_boost`` on top, after the gate.

    Each signal is clamped to 0..1 first (a negative cosine means "unrelated",
    not "anti-relevant"); the parts report the clamped values that were summed.
    """
    lex, conf, rec = _unit(lexical), _unit(confidence), _unit(recency)
    chan, bm = _unit(channel), _unit(bm25)
    sem = None if semantic is None else _unit(semantic)
    w = weights.without_semantic if sem is None else weights.with_semantic
    combined = (
        w.semantic * (sem or 0.0)
        + w.lexical * lex
        + w.confidence * conf
        + w.recency * rec
        + w.channel * chan
        + w.bm25 * bm
    )
    combined = min(1.0, max(0.0, combined))
    ranked = min(1.0, combined + weights.canon_boost) if canon else combined
    if not explain:
        return ranked
    # Built once with its gate result: ``dataclasses.replace`` afterwards was
    # about a sixth of the time a search spends scoring its ~130 candidates.
    return ScoreParts(
        lexical=lex,
        semantic=sem,
        confidence=conf,
        recency=rec,
        channel=chan,
        bm25=bm,
        combined=ranked,
        passed=_gate(lex, sem, combined, weights),
        canon=1.0 if canon else 0.0,
    )


def fuse_message(
    *,
    semantic: float | None,
    bm25: float,
    lexical: float,
    neighbour: float,
    speaker: float,
    date: float,
    recency: float,
    channel: float,
    statement: float = 1.0,
    superseded: float = 0.0,
    first_person: float = 0.0,
    confidence: float = 0.5,
    weights: MessageWeights = DEFAULT_MESSAGE_WEIGHTS,
    gate: ScoringWeights = DEFAULT_WEIGHTS,
) -> ScoreParts:
    """Score parts of one message; ``neighbour`` is the better adjacent message's
    ``MessageWeights.base``. The relevance gate (``passes_gate``) is
    applied to the result (semantic, lexical and combined), as for facts."""
    sem = None if semantic is None else _unit(semantic)
    lex, bm, nb, spk, dt, rec, chan, st, sup = (
        _unit(x)
        for x in (lexical, bm25, neighbour, speaker, date, recency, channel, statement, superseded)
    )
    fp = _unit(first_person)
    combined = weights.combined(sem or 0.0, bm, nb, spk, dt, st, lex, rec, chan, sup, fp)
    return ScoreParts(
        lexical=lex,
        semantic=sem,
        confidence=_unit(confidence),
        recency=rec,
        channel=chan,
        bm25=bm,
        combined=combined,
        passed=_gate(lex, sem, combined, gate),
        speaker=spk,
        neighbour=nb,
        date=dt,
        statement=st,
        superseded=sup,
        first_person=fp,
    )


def rank(
    candidates: Iterable[tuple[T, ScoreParts]],
    *,
    strict: bool,
    limit: int,
    weights: ScoringWeights = DEFAULT_WEIGHTS,
) -> list[tuple[T, ScoreParts]]:
    """Best first, at most ``limit``.

    Strict (search API, model lookup): only candidates that pass the gate,
    possibly none. Non-strict (prompt slice): the passing ones, or the best
    candidates if none pass. Ties keep the caller's order.
    """
    if limit <= 0:
        return []
    ordered = sorted(candidates, key=lambda c: (-c[1].combined, -c[1].lexical))
    passing = [c for c in ordered if passes_gate(c[1], weights=weights)]
    if passing or strict:
        return passing[:limit]
    return ordered[:limit]
