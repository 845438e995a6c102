"""Lexical overlap: how much of a query's wording a text holds, 0..1.

A query such as "what does she like?" is mostly function words. Counting
them would let any text containing "what" and "does" look half relevant, and
dilute the one word that matters. So the query's English stop words are
dropped before the overlap is measured, unless the query has nothing else
(then all its tokens are kept, so "who is she" still matches "she is who she
is" better than unrelated text). Tokens on both sides are also folded by a
trailing plural "s" ("likes" ~ "like"), and an English query word of four
letters or more is also said in its regular inflections ("walk" ~
"walking", "walked"): a member asking what they said about their walk means
the message where they were out walking. The whole-query containment test
uses the full compact query, stop words included, and respects word
boundaries ("art" is not found in "party"). A question that asks who has
something reads text positively (``positive``): a word counts only where no
negation governs it, so "I don't read greek" holds nothing of "who studies
Greek?" (``memory.retrieval.negation``). Pure: no I/O.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from memory.retrieval.negation import NEGATORS, negated
from memory.text import compact, is_no_space_token, tokens

# English function words that carry no topic. Kept short on purpose: words
# like "like", "work" or "home" are stop words in some lists but are exactly
# what chat memory is about.
STOP_WORDS: frozenset[str] = frozenset(
    """
    a an the and or but if then so than that this these those there here
    i me my mine you your yours he him his she her hers it its we us our ours
    they them their theirs who whom whose what which when where why how
    is am are was were be been being do does did done doing have has had having
    can could will would shall should may might must
    of in on at to for from by with about into onto over under as up out off
    not no yes any some all just also too very really
    tell know remember said say anything something everything
    """.split()
)


def fold(token: str) -> str:
    """``token`` without a plural/third-person "s" ("likes" → "like")."""
    # Plural/third-person "s" only; anything cleverer belongs to the semantic side.
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


_SIBILANT_ENDS = ("s", "x", "z", "ch", "sh")


def word_forms(term: str) -> frozenset[str]:
    """The words that say query ``term`` (already ``fold``-ed): itself, its
    plural, and for an English word of four letters or more its regular
    inflections ("walk" → walks, walked, walking; "stop" → stopped; "bake" →
    baked, baking). Only forwards: stripping a query word's ending guesses a
    stem that is often another word ("evening" → "even", "thing" → "th-e"),
    and irregular forms ("ran", "went") are the semantic side's."""
    out = {term}
    if fold(term + "s") == term:
        out.add(term + "s")
    if not (term.isascii() and term.isalpha() and len(term) >= 4):
        return frozenset(out)
    if term.endswith(("ing", "ed")):
        return frozenset(out)  # already inflected
    if term.endswith("e"):
        out |= {term + "d", term[:-1] + "ing"}
    else:
        out |= {term + "ed", term + "ing"}
        if term.endswith(_SIBILANT_ENDS):
            out.add(term + "es")
        if _doubles(term):
            out |= {term + term[-1] + "ing", term + term[-1] + "ed"}
    return frozenset(out)


def _doubles(word: str) -> bool:
    """Whether an inflection doubles ``word``'s last letter ("run" → "running"):
    a consonant after a single vowel, not w/x/y."""
    vowels = "aeiou"
    return (
        len(word) >= 3
        and word[-1] not in vowels + "wxy"
        and word[-2] in vowels
        and word[-3] not in vowels
    )


def _contains_phrase(haystack: str, needle: str) -> bool:
    """``needle`` occurs in ``haystack`` on word boundaries (both compact).

    Scripts written without spaces have no word boundaries to respect, so a
    match that starts or ends on such a character is accepted as is.
    """
    start = haystack.find(needle)
    while start != -1:
        end = start + len(needle)
        left_ok = (
            start == 0
            or haystack[start - 1] == " "
            or is_no_space_token(needle[0])
            or is_no_space_token(haystack[start - 1])
        )
        right_ok = (
            end == len(haystack)
            or haystack[end] == " "
            or is_no_space_token(needle[-1])
            or is_no_space_token(haystack[end])
        )
        if left_ok and right_ok:
            return True
        start = haystack.find(needle, start + 1)
    return False


def query_terms(query: str) -> frozenset[str]:
    """The folded query tokens lexical overlap is measured on (see module doc)."""
    # Stop words are matched before folding: folded "this" would be "thi".
    raw = set(tokens(query))
    content = {t for t in raw if t not in STOP_WORDS} or raw
    return frozenset(fold(t) for t in content)


def compact_tokens(compacted: str) -> list[str]:
    """Tokens of text already ``compact``-ed."""
    # ASCII text needs no script-aware splitting: whitespace is the boundary.
    if compacted.isascii():
        return compacted.split()
    return tokens(compacted, already_compact=True)


class LexicalQuery:
    """``lexical_score`` with the query's side prepared once (many candidates).
    ``positive``: count a word only where no negation governs it."""

    __slots__ = ("_probes", "compact", "positive", "terms")

    def __init__(self, query: str, *, positive: bool = False) -> None:
        self.positive = positive
        self.compact = compact(query)
        self.terms = query_terms(self.compact) if self.compact else frozenset()
        # Each term's forms, and the start they all share as a word of an
        # ASCII text wrapped in spaces (see ``score_compact``): one search
        # finds every place a form can be.
        self._probes = tuple(
            (" " + os.path.commonprefix(sorted(forms)), forms)
            for forms in (word_forms(q) for q in self.terms)
        )

    def score(self, text: str) -> float:
        return self.score_compact(compact(text))

    def score_compact(self, t: str, said: Callable[[], set[str]] | None = None) -> float:
        """``score`` of text already ``compact``-ed; ``said``: its tokens, when known."""
        if not self.compact or not t:
            return 0.0
        if self.positive and _may_negate(t):
            return self._positive_score(t)
        if _contains_phrase(t, self.compact):
            return 1.0
        if not self.terms:
            return 0.0
        if t.isascii():
            # Compact ASCII text is its words joined by single spaces: a word
            # starting with the forms' common start is read to its end and
            # looked up, without splitting a long message into a set.
            spaced = f" {t} "
            found = sum(_said_in(spaced, probe, forms) for probe, forms in self._probes)
            return found / len(self.terms)
        words = set(compact_tokens(t)) if said is None else said()
        found = sum(not forms.isdisjoint(words) for _, forms in self._probes)
        return found / len(self.terms)

    def _positive_score(self, t: str) -> float:
        """``score_compact`` of a text with a negation in it, counting only the
        words (and the whole query) said where no negation governs them."""
        words = compact_tokens(t)
        free = [w for w, neg in zip(words, negated(words), strict=True) if not neg]
        if not self.terms:
            return 0.0
        kept = set(free)
        found = sum(not forms.isdisjoint(kept) for _, forms in self._probes)
        if found == len(self.terms) and _contains_phrase(" ".join(free), self.compact):
            return 1.0
        return found / len(self.terms)

    def only_negated(self, t: str) -> bool:
        """Whether text (compact) holds words of the query, but each only where
        a negation governs it: "not a papyrologist" for "who is a papyrologist?"."""
        if not self.terms or not t or not _may_negate(t):
            return False
        words = compact_tokens(t)
        neg = negated(words)
        said = {w for w, n in zip(words, neg, strict=True) if not n}
        under = {w for w, n in zip(words, neg, strict=True) if n}
        forms = [f for _, f in self._probes]
        return any(not f.isdisjoint(under) for f in forms) and all(
            f.isdisjoint(said) for f in forms
        )


def _may_negate(t: str) -> bool:
    """Whether compact text can hold a negation (a quick look before reading it)."""
    spaced = f" {t} "
    return " t " in spaced or any(f" {w} " in spaced for w in _NEGATOR_WORDS)


_NEGATOR_WORDS = tuple(sorted(NEGATORS, key=len))  # the short, common ones first


def _said_in(spaced: str, probe: str, forms: frozenset[str]) -> bool:
    """Whether a word of ``spaced`` (compact ASCII text wrapped in spaces)
    starting with ``probe`` (a space and a start) is one of ``forms``."""
    start = spaced.find(probe)
    while start != -1:
        end = spaced.find(" ", start + 1)
        if spaced[start + 1 : end] in forms:
            return True
        start = spaced.find(probe, end)
    return False


def lexical_score(query: str, text: str) -> float:
    """1.0 if ``text`` contains the whole query, else the share of query terms it has."""
    return LexicalQuery(query).score(text)
