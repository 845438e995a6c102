"""memory.retrieval.scoring: signals, fusion, the relevance gate and ranking (pure functions)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.models import ScoreParts
from memory.retrieval.lexical import compact_tokens, lexical_score, query_terms, word_forms
from memory.retrieval.scoring import (
    DEFAULT_WEIGHTS,
    ScoringWeights,
    bm25_normalise,
    channel_score,
    fuse,
    passes_gate,
    rank,
    recency_score,
)
from memory.text import compact

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def parts(lex: float, sem: float | None, combined: float) -> ScoreParts:
    return ScoreParts(
        lexical=lex, semantic=sem, confidence=0.0, recency=0.0, channel=0.0, combined=combined
    )


# -- gate cases at and around each threshold ----------------------------------------


@pytest.mark.parametrize(
    ("lex", "sem", "combined", "expected"),
    [
        (0.0, 0.0, 0.35, False),  # nothing matches
        (0.26, 0.02, 0.30, True),  # lexical alone is enough
        (0.10, 0.09, 0.56, True),  # strong combined backed by weak signals
        (0.0, 0.20, 0.0, True),  # semantic minimum
        (0.22, 0.0, 0.0, True),  # lexical minimum with semantic
        (0.09, 0.07, 0.60, False),  # strong combined but no supporting signal
        (0.10, 0.0, 0.51, False),  # supporting signal but combined too weak
    ],
)
def test_gate_with_semantic(lex: float, sem: float, combined: float, expected: bool) -> None:
    assert passes_gate(parts(lex, sem, combined)) is expected


@pytest.mark.parametrize(
    ("lex", "combined", "expected"),
    [(0.24, 0.0, True), (0.23, 0.61, False), (0.0, 0.62, True), (0.0, 0.35, False)],
)
def test_gate_without_semantic(lex: float, combined: float, expected: bool) -> None:
    assert passes_gate(parts(lex, None, combined)) is expected


def test_gate_tolerates_float_sums() -> None:
    # 0.50·0.69 + 0.28·0.35 + 0.10·0.42 + 0.07·0.5 is exactly 0.52 on paper and
    # 0.5199999… in binary floating point.
    combined = fuse(0.35, 0.69, 0.42, 0.5, 0.0)
    assert combined < 0.52
    assert passes_gate(parts(0.1, 0.09, combined))


# -- fusion ---------------------------------------------------------------------


def test_fuse_weights_match_spec() -> None:
    assert fuse(1.0, 0.0, 0.0, 0.0, 0.0) == pytest.approx(0.28)
    assert fuse(0.0, 1.0, 0.0, 0.0, 0.0) == pytest.approx(0.50)
    assert fuse(0.0, 0.0, 1.0, 0.0, 0.0) == pytest.approx(0.10)
    assert fuse(0.0, 0.0, 0.0, 1.0, 0.0) == pytest.approx(0.07)
    assert fuse(0.0, 0.0, 0.0, 0.0, 1.0) == pytest.approx(0.05)
    assert fuse(1.0, None, 0.0, 0.0, 0.0) == pytest.approx(0.75)
    assert fuse(0.0, None, 1.0, 0.0, 0.0) == pytest.approx(0.10)
    assert fuse(0.0, None, 0.0, 1.0, 0.0) == pytest.approx(0.10)
    assert fuse(0.0, None, 0.0, 0.0, 1.0) == pytest.approx(0.05)
    assert fuse(1.0, 1.0, 1.0, 1.0, 1.0, 1.0) == pytest.approx(1.0)
    # BM25 is reported, not fused, unless a scope's weights say otherwise.
    assert fuse(0.0, None, 0.0, 0.0, 0.0, bm25=1.0) == 0.0


def test_fuse_explain_fills_parts() -> None:
    p = fuse(0.5, 0.4, 0.8, 0.5, 1.0, 0.7, explain=True)
    assert isinstance(p, ScoreParts)
    assert (p.lexical, p.semantic, p.confidence, p.recency, p.channel, p.bm25) == (
        0.5,
        0.4,
        0.8,
        0.5,
        1.0,
        0.7,
    )
    assert p.combined == pytest.approx(0.50 * 0.4 + 0.28 * 0.5 + 0.08 + 0.035 + 0.05)
    assert p.passed is True
    assert p.combined == fuse(0.5, 0.4, 0.8, 0.5, 1.0, 0.7)
    miss = fuse(0.0, 0.01, 0.5, 0.5, 0.0, explain=True)
    assert miss.passed is False


def test_fuse_clamps_negative_cosine_and_nan() -> None:
    p = fuse(0.0, -0.3, 0.5, 0.5, 0.0, explain=True)
    assert p.semantic == 0.0
    assert p.combined == pytest.approx(0.10 * 0.5 + 0.07 * 0.5)
    assert fuse(math.nan, None, 0.5, 0.5, 0.0) == pytest.approx(0.10)


def test_custom_weights_are_used() -> None:
    w = replace(DEFAULT_WEIGHTS, lex_min=0.5)
    assert passes_gate(parts(0.3, None, 0.0)) is True
    assert passes_gate(parts(0.3, None, 0.0), weights=w) is False
    assert isinstance(DEFAULT_WEIGHTS, ScoringWeights)
    with pytest.raises(AttributeError):
        DEFAULT_WEIGHTS.lex_min = 0.9  # type: ignore[misc]


@given(lex=unit, sem=unit | st.none(), conf=unit, rec=unit, chan=unit, bm=unit)
def test_fuse_stays_in_unit_interval(
    lex: float, sem: float | None, conf: float, rec: float, chan: float, bm: float
) -> None:
    assert 0.0 <= fuse(lex, sem, conf, rec, chan, bm) <= 1.0


@given(
    values=st.lists(unit, min_size=5, max_size=5),
    sem=unit | st.none(),
    which=st.integers(min_value=0, max_value=4),
    bump=unit,
)
def test_fuse_is_monotone_in_each_signal(
    values: list[float], sem: float | None, which: int, bump: float
) -> None:
    lex, conf, rec, chan, bm = values
    base = fuse(lex, sem, conf, rec, chan, bm)
    raised = [lex, conf, rec, chan, bm]
    raised[which] = min(1.0, raised[which] + bump)
    assert fuse(raised[0], sem, raised[1], raised[2], raised[3], raised[4]) >= base - 1e-12
    if sem is not None:
        assert fuse(lex, min(1.0, sem + bump), conf, rec, chan, bm) >= base - 1e-12


@given(lex=unit, sem=unit, conf=unit, rec=unit, chan=unit, bump=unit)
def test_gate_is_monotone(
    lex: float, sem: float, conf: float, rec: float, chan: float, bump: float
) -> None:
    # More evidence of relevance never turns a pass into a fail.
    if fuse(lex, sem, conf, rec, chan, explain=True).passed:
        stronger = fuse(min(1, lex + bump), min(1, sem + bump), conf, rec, chan, explain=True)
        assert stronger.passed


# -- signals ---------------------------------------------------------------------


def test_lexical_whole_query_contained() -> None:
    assert lexical_score("Sailing Boat", "Bob is building a sailing boat!") == 1.0
    assert lexical_score("东京", "我住在东京") == 1.0
    # Word boundaries: "art" is not in "party"; overlap decides instead.
    assert lexical_score("art", "we had a party") == 0.0


def test_lexical_overlap_ignores_stop_words() -> None:
    assert query_terms("what does she like?") == frozenset({"like"})
    assert lexical_score("what does she like?", "Alice likes sushi") == 1.0
    assert lexical_score("what does alice like", "Alice likes sushi") == 1.0
    assert lexical_score("what does alice like", "Alice lives in Oslo") == 0.5
    # Function words shared with unrelated text count for nothing.
    assert lexical_score("what does she like", "she does what she wants") == 0.0


def test_lexical_stop_word_only_query_keeps_its_words() -> None:
    assert query_terms("who is she") == frozenset({"who", "is", "she"})
    assert lexical_score("who is she", "she is the admin") == pytest.approx(2 / 3)


def test_lexical_edge_cases() -> None:
    assert lexical_score("", "anything") == 0.0
    assert lexical_score("?!", "anything") == 0.0
    assert lexical_score("tea", "") == 0.0
    assert lexical_score("this", "thing") == 0.0  # stop words are not folded into "thi"


def _overlap_by_word_sets(query: str, text: str) -> float:
    """The share of query terms with a form among the text's words, by sets."""
    terms = query_terms(compact(query))
    words = set(compact_tokens(compact(text)))
    said = [t for t in terms if not word_forms(t).isdisjoint(words)]
    return len(said) / len(terms) if terms else 0.0


_WORDS = st.sampled_from(
    "bus buses gas glass glasses news new cat cats likes like liked liking this thing ss s "
    "walk walks walked walking stop stopped stopping car caring care cared even evening "
    "Straße café 東京 タワー lens lenses".split()
)


@given(st.lists(_WORDS, min_size=1, max_size=5), st.lists(_WORDS, max_size=12))
def test_lexical_overlap_equals_the_word_set_definition(q: list[str], t: list[str]) -> None:
    # The ASCII path finds forms in the text without splitting it into words.
    query, text = " ".join(q), " ".join(t)
    got = lexical_score(query, text)
    if got < 1.0:  # 1.0 also when the text holds the whole query as a phrase
        assert got == _overlap_by_word_sets(query, text)


def test_a_query_word_is_said_in_its_regular_inflections() -> None:
    # A member asking about their walk means the message where they were walking.
    assert lexical_score("neighborhood walk", "I was out walking in my neighborhood") == 1.0
    assert word_forms("walk") == {"walk", "walks", "walked", "walking"}
    assert {"stopped", "stopping"} <= word_forms("stop")
    assert {"baked", "baking"} <= word_forms("bake")
    assert "glasses" in word_forms("glass")
    # Forwards only, and not for short words: no guessed stems.
    assert lexical_score("car", "caring for the kids") == 0.0
    assert lexical_score("evening", "even so") == 0.0
    assert lexical_score("walking", "a long walk") == 0.0
    assert word_forms("東京") == {"東京"}


@given(st.text(max_size=40), st.text(max_size=80))
def test_lexical_in_unit_interval(query: str, text: str) -> None:
    assert 0.0 <= lexical_score(query, text) <= 1.0


def test_recency() -> None:
    assert recency_score(0) == 1.0
    assert recency_score(45) == pytest.approx(0.5)
    assert recency_score(90, half=90) == pytest.approx(0.5)
    assert recency_score(-3) == 1.0  # clock skew: a fact from "the future" is fresh
    assert recency_score(math.inf) == 0.0
    with pytest.raises(ValueError):
        recency_score(1, half=0)


@given(a=st.floats(0, 1e6), b=st.floats(0, 1e6))
def test_recency_decreases_with_age(a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    assert 0.0 < recency_score(hi) <= recency_score(lo) <= 1.0


def test_channel_scores() -> None:
    assert channel_score("c1", "c1") == 1.0
    assert channel_score(None, "c1") == 0.25
    assert channel_score("c2", "c1") == 0.0
    assert channel_score("c1", None) == 0.0
    assert channel_score(None, None) == 0.0


def test_bm25_normalisation_direction() -> None:
    # SQLite's bm25() is negative; the most negative is the best match.
    out = bm25_normalise([-8.0, -2.0, -4.0])
    assert out == pytest.approx([1.0, 0.25, 0.5])
    assert out.index(max(out)) == 0


def test_bm25_normalisation_edge_cases() -> None:
    assert bm25_normalise([]) == []
    assert bm25_normalise([-3.2]) == [1.0]
    assert bm25_normalise([-1.5, -1.5]) == [1.0, 1.0]
    assert bm25_normalise([None, -2.0, math.nan]) == [0.0, 1.0, 0.0]
    assert bm25_normalise([0.0, None]) == [0.0, 0.0]


@given(st.lists(st.floats(max_value=0.0, allow_nan=False) | st.none(), max_size=20))
def test_bm25_normalised_in_unit_interval(values: list[float | None]) -> None:
    out = bm25_normalise(values)
    assert len(out) == len(values)
    assert all(0.0 <= v <= 1.0 for v in out)


# -- ranking ----------------------------------------------------------------------


def _cands() -> list[tuple[str, ScoreParts]]:
    return [
        ("weak", fuse(0.0, 0.05, 0.9, 1.0, 1.0, explain=True)),
        ("good", fuse(0.5, 0.6, 0.8, 0.5, 0.0, explain=True)),
        ("ok", fuse(0.3, 0.1, 0.5, 0.5, 0.0, explain=True)),
        ("weaker", fuse(0.0, 0.01, 0.2, 0.1, 0.0, explain=True)),
    ]


def test_rank_strict_returns_only_passing() -> None:
    assert [c for c, _ in rank(_cands(), strict=True, limit=10)] == ["good", "ok"]
    assert [c for c, _ in rank(_cands(), strict=True, limit=1)] == ["good"]
    failing = [c for c in _cands() if not c[1].passed]
    assert rank(failing, strict=True, limit=10) == []


def test_rank_non_strict_falls_back_to_best() -> None:
    assert [c for c, _ in rank(_cands(), strict=False, limit=10)] == ["good", "ok"]
    failing = [c for c in _cands() if not c[1].passed]
    assert [c for c, _ in rank(failing, strict=False, limit=1)] == ["weak"]
    assert rank(_cands(), strict=False, limit=0) == []


def test_rank_ties_keep_input_order() -> None:
    p = fuse(0.5, None, 0.5, 0.5, 0.0, explain=True)
    assert [c for c, _ in rank([("a", p), ("b", p), ("c", p)], strict=True, limit=3)] == [
        "a",
        "b",
        "c",
    ]


_ASCII_BITS = st.sampled_from(
    " a Z 9 _ - ' < > : @ ! & # <a: <A: <: :123456> <A:Wave:123456> <a:wave:123456> "
    "<:ok:1234567> <@123456> <#1234567> http:// HTTPS:// www. WWW. x.y/z ~ .".split()
    + [" ", "\t", "\n"]
)


@given(st.lists(_ASCII_BITS, max_size=30))
def test_compact_of_ascii_text_equals_the_general_path(bits: list[str]) -> None:
    """ASCII text takes a shortcut; a non-ASCII word after it sends the same
    text down the general path, which must give the same words."""
    text = "".join(bits)
    assert compact(text + " é") == " ".join(w for w in (compact(text), "é") if w)


@given(st.one_of(st.floats(), st.integers(min_value=-3, max_value=3)))
def test_fuse_reports_each_signal_clamped_to_a_unit_float(x: float) -> None:
    """Every part is a float in 0..1: the value itself when it is one, its
    nearest bound when finite, 0 for NaN and infinities."""
    parts = fuse(x, x, x, x, x, x, explain=True)
    want = 0.0 if not math.isfinite(x) else min(1.0, max(0.0, float(x)))
    for got in (parts.lexical, parts.semantic, parts.confidence, parts.recency, parts.bm25):
        assert type(got) is float and got == want
