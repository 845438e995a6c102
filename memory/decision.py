"""The offline write decision: what a new candidate fact does to the
subject's current facts.

Exactly one of:
- ``add``: new information (a new row);
- ``noop``: the same meaning as a current fact (a paraphrase): no new row,
  the existing fact is observed again;
- ``update``: the same fact with more detail: the existing row takes the
  more specific text;
- ``supersede``: a different value in a single-valued slot (where someone
  lives, works, studies, their job, age, name, pronouns, relationship
  status, "favourite X", an opinion of X, learning → knowing X): the old
  facts close at the candidate's observation time and the candidate is added.

The newer observation wins: a candidate observed before the latest
observation of the current value never supersedes it. It is stored as a
historical fact, already closed at the current value's observation time, so
that a question about that earlier time still finds it and the source
message keeps a fact; the current set is the same whichever order the
observations arrive in.

Pure functions over plain values; the SQL that applies a decision is in
``memory.store.fact_decision``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from memory.text import tokens

DecisionKind = Literal["add", "noop", "update", "supersede"]
DECISION_KINDS: tuple[DecisionKind, ...] = ("add", "noop", "update", "supersede")

# Token overlap (Jaccard of content tokens) from which two facts without a
# slot read as the same statement.
PARAPHRASE_MIN_OVERLAP = 0.8


@dataclass(frozen=True)
class CurrentFact:
    id: int
    fact: str
    observed_at: str
    last_observed_at: str


@dataclass(frozen=True)
class Slot:
    """A single-valued property of the subject: ``kind``+``key`` name it
    (``residence``; ``favourite``+``food``), ``value`` is its value as tokens."""

    kind: str
    key: tuple[str, ...]
    value: tuple[str, ...]


@dataclass(frozen=True)
class Decision:
    kind: DecisionKind
    targets: tuple[int, ...] = ()
    reason: str = ""
    # A historical candidate: stored already closed at this time, by the
    # newer fact ``closed_by``.
    closed_at: str | None = None
    closed_by: int | None = None


_WHO = r"^(?P<who>.+?)"
_ADVERBS = r"(?:(?:currently|now|still|also|just|recently|finally|actually|really) )*"
_TAIL = r"\s*\.?$"
# (slot kind, pattern): the pattern's ``who`` is the subject (a relative's
# facts — "Ana's sister lives in …" — are not the subject's slot), ``key``
# (when present) names the slot within its kind, ``v`` is the value.
_SLOT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (
        (
            "residence",
            _WHO + rf" {_ADVERBS}(?:lives in|moved to|moved back to|relocated to|"
            rf"is based in|is based out of|is located in) (?P<v>.+?){_TAIL}",
        ),
        ("job", _WHO + rf" {_ADVERBS}(?:works|is working) as (?P<v>.+?){_TAIL}"),
        ("employer", _WHO + rf" {_ADVERBS}(?:works|is working) (?:at|for) (?P<v>.+?){_TAIL}"),
        (
            "studies",
            _WHO + rf" {_ADVERBS}(?:studies|is studying|majors in) (?P<v>.+?){_TAIL}",
        ),
        ("age", _WHO + rf" is (?P<v>\d{{1,3}}) years? old{_TAIL}"),
        (
            "relationship status",
            _WHO + rf" is {_ADVERBS}(?P<v>single|married|engaged|divorced|widowed|"
            rf"separated|in a relationship|dating .+?){_TAIL}",
        ),
        (
            "favourite",
            _WHO + rf"'s? (?:favou?rite|fav|fave) (?P<key>.+?) (?:is|are|was) (?P<v>.+?){_TAIL}",
        ),
        (
            "profile",
            _WHO + r"'s? (?P<key>name|nickname|age|job|occupation|profession|day job|major|"
            r"hometown|home town|pronouns|timezone|time zone|birthday|native language|"
            rf"first language|mother tongue) (?:is|are|was) (?P<v>.+?){_TAIL}",
        ),
        (
            "skill",
            _WHO + rf" (?:{_ADVERBS}is {_ADVERBS}learning|has been learning|started learning|"
            rf"is trying to learn|is teaching (?:themself|themselves|himself|herself)) "
            rf"(?P<key>.+?){_TAIL}",
        ),
        (
            "skill known",
            _WHO + rf" {_ADVERBS}(?:knows|is fluent in|is proficient in|has learned|"
            rf"has learnt|learned|learnt|speaks) (?P<key>.+?){_TAIL}",
        ),
        (
            "opinion positive",
            _WHO + rf" {_ADVERBS}(?:likes|loves|enjoys|adores|prefers|is into|is a fan of|"
            rf"is a big fan of|is passionate about|is obsessed with|has been into) "
            rf"(?P<key>.+?){_TAIL}",
        ),
        (
            "opinion negative",
            _WHO + rf" {_ADVERBS}(?:hates|dislikes|detests|despises|loathes|doesn't like|"
            rf"doesn't love|doesn't enjoy|can't stand) (?P<key>.+?){_TAIL}",
        ),
    )
)
# A relative's fact: the part before the verb holds a possessive.
_RELATIVE = re.compile(r"'s?\s")
# Words that name the same thing in the profile keys.
_KEY_SYNONYMS = {
    "occupation": "job",
    "profession": "job",
    "day job": "job",
    "home town": "hometown",
    "time zone": "timezone",
    "first language": "native language",
    "mother tongue": "native language",
}
# Words that carry no content when two facts are compared.
_STOPWORDS = frozenset(
    "a an the is are was were be been has have had of to in on at for with and or but "
    "their them they it its this that very really also just still now currently s".split()
)
# Verbs that state the same liking.
_CANONICAL = {
    "loves": "likes",
    "enjoys": "likes",
    "adores": "likes",
    "like": "likes",
    "love": "likes",
    "enjoy": "likes",
    "favorite": "favourite",
    "fav": "favourite",
    "fave": "favourite",
}


@lru_cache(maxsize=8192)
def _words(text: str) -> tuple[str, ...]:
    return tuple(_CANONICAL.get(t, t) for t in tokens(text) if t not in _STOPWORDS)


@lru_cache(maxsize=8192)
def slot_of(fact: str) -> Slot | None:
    """The single-valued slot a normalised fact fills, or None. Cached: a
    subject's current facts are read again for every candidate."""
    for kind, pattern in _SLOT_PATTERNS:
        m = pattern.match(fact.strip())
        if m is None or _RELATIVE.search(m.group("who")):
            continue
        groups = m.groupdict()
        raw_key = (groups.get("key") or "").lower()
        if "key" in groups and not _words(raw_key):
            return None  # "likes it": no object to hold a slot
        if kind == "profile":
            kind, raw_key = "profile " + _KEY_SYNONYMS.get(raw_key, raw_key), ""
        if kind.startswith("skill"):
            # learning X, then knowing X: one slot per skill, the stage is the value.
            return Slot("skill", _words(raw_key), ("learning",) if kind == "skill" else ("knows",))
        if kind.startswith("opinion"):
            return Slot("opinion", _words(raw_key), (kind.split()[1],))
        value = _words(groups["v"]) or tuple(tokens(groups["v"]))
        if not value:
            return None
        return Slot(kind, _words(raw_key), value)
    return None


@lru_cache(maxsize=8192)
def content_tokens(fact: str, name: str | None = None) -> frozenset[str]:
    """The words that carry a fact's content: no stopwords, not the subject's name."""
    drop = set(tokens(name)) if name else set()
    return frozenset(t for t in _words(fact) if t not in drop)


def _within(small: Sequence[str], big: Sequence[str]) -> bool:
    return set(small) <= set(big)


def _same_slot(a: Slot, b: Slot) -> bool:
    return a.kind == b.kind and a.key == b.key


def _slot_decision(cand: Slot, cand_at: str, old: CurrentFact, old_slot: Slot) -> Decision:
    """Two facts of the same slot."""
    label = " ".join((cand.kind, *cand.key))
    if _within(cand.value, old_slot.value):
        return Decision("noop", (old.id,), f"same {label}")
    if _within(old_slot.value, cand.value):
        return Decision("update", (old.id,), f"more specific {label}")
    if cand_at < old.last_observed_at:
        return Decision(
            "add",
            reason=f"older {label} than fact {old.id}",
            closed_at=max(old.observed_at, cand_at),
            closed_by=old.id,
        )
    return Decision("supersede", (old.id,), f"new {label}")


def decide(
    fact: str, observed_at: str, current: Sequence[CurrentFact], name: str | None = None
) -> Decision:
    """The decision for candidate text ``fact`` observed at ``observed_at``
    (ISO text) against the subject's current facts. ``name``: the subject's
    name as the facts spell it, left out of the word comparison."""
    for old in current:
        if old.fact == fact:
            return Decision("noop", (old.id,), "same text")
    cand = slot_of(fact)
    if cand is not None:
        superseded: list[int] = []
        historical: Decision | None = None
        for old in current:
            old_slot = slot_of(old.fact)
            if old_slot is None:
                continue
            if (
                cand.kind == "opinion"
                and old_slot.kind == "opinion"
                and cand.value == old_slot.value
            ):
                # The same liking said of a narrower or wider object.
                if cand.key != old_slot.key and _within(old_slot.key, cand.key):
                    return Decision("update", (old.id,), "more specific opinion")
                if cand.key != old_slot.key and _within(cand.key, old_slot.key):
                    return Decision("noop", (old.id,), "less specific opinion")
            if not _same_slot(cand, old_slot):
                continue
            d = _slot_decision(cand, observed_at, old, old_slot)
            if d.kind in ("noop", "update"):
                return d
            if d.kind == "supersede":
                superseded.append(old.id)
            elif historical is None:
                historical = d
        if historical is not None:
            return historical
        if superseded:
            label = " ".join((cand.kind, *cand.key))
            return Decision("supersede", tuple(superseded), f"new {label}")
        return Decision("add", reason="new")
    words = content_tokens(fact, name)
    if not words:
        return Decision("add", reason="new")
    for old in current:
        if slot_of(old.fact) is not None:
            continue  # a slot fact only meets facts of its own slot
        old_words = content_tokens(old.fact, name)
        if not old_words:
            continue
        overlap = len(words & old_words) / len(words | old_words)
        if overlap >= PARAPHRASE_MIN_OVERLAP or words <= old_words:
            return Decision("noop", (old.id,), f"paraphrase ({overlap:.2f} overlap)")
        if old_words < words:
            return Decision("update", (old.id,), "more specific")
    return Decision("add", reason="new")
