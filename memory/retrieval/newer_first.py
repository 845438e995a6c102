"""Same topic, newer first: when a member says something about what the query
asks again later, the later statement ranks above the earlier one.

A ranking scores each message on its own, so "I've been using my tracker for
6 months" and, a season later, "...for 9 months now" score about the same and
the stale one often wins on wording alone. What a reader (and the model)
needs first is the current value. The rule, applied to the leading hits of a
ranking after scoring (pure: no I/O, no clock):

* Two message hits *restate* each other when the same author wrote both, at
  least ``min_gap_s`` apart (a later sitting, not the next turn of the same
  conversation), and both contain one of the query's *phrases*: two content words
  adjacent in the query once stop words and single letters are left out
  ("wells fargo", "coding exercises"), plural "s" folded as the lexical
  score does — and together at least ``min_shared`` of the phrases the
  wordier of the two contains (one phrase in passing is not the same topic).
* A phrase the author uses in more than ``max_repeats`` of the leading hits
  is a running theme of theirs ("my dance studio"), not a value being
  updated: it links nothing.
* Restatements are linked transitively into groups. Each group keeps the
  positions and the scores it had and fills them newest first; every other
  hit stays where it was. The hits returned are the same ones, and each
  moved hit's ``parts.newer_first`` says how much the rule changed its
  ``combined`` score (the newer hit gains what the older one loses), so the
  list stays ordered by score and the explanation adds up.

Only the first ``window`` hits take part: further down, a ranking is a pool
of candidates rather than an answer, and moving them reshuffles what is
returned for nothing. The window is the first ten, the hits a reply and a
search show first: the rule orders what is in them and never moves a hit
out of them (with 15, a group holding places 1 and 15 sent the best hit to
15th — LongMemEval S lost 1.6 points of recall@10 to it).

Facts and messages merged (search with scope ``all``) get the same rule
between a fact and a message (``facts_among_messages``): a fact counts as its
source message would — written by that message's author, when it was said, in
the words of its quote. An old value said plainly becomes a fact, while its
update is often said only inside a question ("remember when I got
pre-approved for $400,000?") and stays a message; without this the stale
fact outranks the update (LongMemEval dev oracle: one knowledge update of 11).
Two facts never link (the write decision already supersedes an older fact by
a newer one), nor do two messages there (the message search ordered those).
A question asking *when* ("When did Melanie sign up for a pottery class?")
wants the telling of the event, which is often the fact, not a later
mention of it: there a fact keeps its place (LoCoMo dev lost 0.5 points of
recall@5 on five such questions otherwise).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from memory.models import Hit
from memory.retrieval.hits import seconds_between
from memory.retrieval.lexical import STOP_WORDS, compact_tokens, fold
from memory.text import compact

Phrase = tuple[str, str]


@dataclass(frozen=True)
class NewerFirstRule:
    """Calibrated on the dev splits of LoCoMo, REALTALK and LongMemEval together
    (bench/results/*-s13-final.json; docs/performance.md): with these values every restated value that two
    phrases can link goes newest first (10 of LongMemEval's 11 knowledge
    updates, on oracle and S), and the first ten hits stay the same set; a
    phrase allowed in 6 of a member's leading hits or a 1-hour gap starts
    pulling two sittings of one discussion apart, and 4 repeats miss real
    updates."""

    window: int = 10  # leading hits the rule looks at (and keeps among them)
    max_repeats: int = 5  # a phrase in more of one author's leading hits is a theme
    min_gap_s: float = 6 * 3600.0  # closer statements belong to one sitting
    # Of the query phrases the wordier of two messages contains, the share the
    # other must contain too: one phrase in common ("words and phrases", 1 of
    # 9) does not make a board game tip a restatement of a list of language
    # apps; a real update may repeat fewer phrases than the first telling
    # (2 of 7 in LongMemEval's "black Converse Chuck Taylor" question).
    min_shared: float = 0.25
    enabled: bool = True


DEFAULT_NEWER_FIRST = NewerFirstRule()


def content_words(text: str) -> list[str]:
    """``text``'s folded content words in order: no stop words, no single
    letters (possessive debris: "Jon's" → "s"); a lone digit stays ("Charge 3")."""
    return _content_words(compact(text))


def _content_words(compacted: str) -> list[str]:
    out: list[str] = []
    for t in compact_tokens(compacted):
        if t in STOP_WORDS or (len(t) == 1 and t.isascii() and t.isalpha()):
            continue
        out.append(fold(t))
    return out


def phrases(text: str) -> frozenset[Phrase]:
    """Pairs of content words adjacent in ``text`` (stop words skipped)."""
    return _pairs(content_words(text))


def _pairs(words: list[str]) -> frozenset[Phrase]:
    return frozenset(zip(words, words[1:], strict=False))


def newer_first(
    hits: Sequence[Hit],
    query: str,
    rule: NewerFirstRule = DEFAULT_NEWER_FIRST,
    compacted: Callable[[Hit], str] | None = None,
) -> list[Hit]:
    """``hits`` (best first) with each group of restatements ordered newest
    first in the positions it held (module doc); nothing else moves.
    ``compacted``: a message hit's ``compact`` text, when the caller has read
    it already."""
    out = list(hits)
    wanted = phrases(query) if rule.enabled else frozenset()
    if not wanted or len(out) < 2:
        return out
    lead = out[: max(0, rule.window)]
    read = compacted or (lambda h: compact(h.text))
    said = [_said(h, wanted, read) for h in lead]
    authors = [h.subject if h.kind == "message" else None for h in lead]
    return _regroup(out, lead, said, authors, rule, lambda a, b: True)


def asks_when(query: str) -> bool:
    """Whether ``query`` asks when something happened ("When did …?", "when
    was …"): its answer is the first telling of the event."""
    words = compact_tokens(compact(query))
    return bool(words) and words[0] == "when"


def facts_to_place(
    hits: Sequence[Hit], query: str, rule: NewerFirstRule = DEFAULT_NEWER_FIRST
) -> list[str]:
    """The source message ids of the fact hits among the leading ``hits`` that
    say one of the query's phrases, when a message hit leads beside them: the
    messages whose authors ``facts_among_messages`` needs (none: nothing to
    place, no author to read)."""
    wanted = phrases(query) if rule.enabled and not asks_when(query) else frozenset()
    lead = hits[: max(0, rule.window)]
    if not wanted or not any(h.kind == "message" for h in lead):
        return []
    return [
        h.source_message_id
        for h in lead
        if h.kind == "fact" and h.source_message_id and _fact_said(h, wanted)
    ]


def facts_among_messages(
    hits: Sequence[Hit],
    query: str,
    authors: Mapping[str, str],
    rule: NewerFirstRule = DEFAULT_NEWER_FIRST,
) -> list[Hit]:
    """``hits`` (facts and messages merged, best first) with each fact and the
    messages that restate what it says ordered newest first (module doc).

    A fact takes part as its source message would: written by that message's
    author (``authors``: source message id → author id; a fact whose source
    is not there takes no part) at the time it was said, in the words of its
    quote. Only a fact and a message link: messages among themselves were
    ordered by the message search (over its own leading hits), and a newer
    fact already superseded an older one at the write decision."""
    out = list(hits)
    wanted = phrases(query) if rule.enabled and not asks_when(query) else frozenset()
    if not wanted or len(out) < 2:
        return out
    lead = out[: max(0, rule.window)]
    said = [
        _fact_said(h, wanted) if h.kind == "fact" else _said(h, wanted, _compact_text) for h in lead
    ]
    by = [
        h.subject if h.kind == "message" else authors.get(h.source_message_id or "") for h in lead
    ]
    return _regroup(
        out, lead, said, by, rule, lambda a, b: (a.kind == "fact") != (b.kind == "fact")
    )


def _regroup(
    out: list[Hit],
    lead: list[Hit],
    said: list[frozenset[Phrase]],
    authors: list[str | None],
    rule: NewerFirstRule,
    may_link: Callable[[Hit, Hit], bool],
) -> list[Hit]:
    """``out`` with the restatements among its leading hits ``lead`` (each
    saying the query phrases ``said``, written by ``authors``; None: takes no
    part) linked into groups, each group filling its places newest first."""
    uses: Counter[tuple[str, Phrase]] = Counter(
        (who, p) for who, ps in zip(authors, said, strict=True) if who is not None for p in ps
    )
    # Each hit's phrases less its author's running themes (they link nothing).
    topical = [
        frozenset(p for p in ps if uses[(who, p)] <= rule.max_repeats)
        if who is not None
        else frozenset()
        for who, ps in zip(authors, said, strict=True)
    ]
    parent = list(range(len(lead)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, a in enumerate(lead):
        if not topical[i]:
            continue
        for j in range(i + 1, len(lead)):
            b = lead[j]
            if authors[i] != authors[j] or not may_link(a, b):
                continue
            shared = topical[i] & topical[j]
            wordier = max(len(topical[i]), len(topical[j]))
            if not shared or len(shared) < rule.min_shared * wordier:
                continue
            apart = abs(seconds_between(a.created_at, b.created_at))
            if not math.isfinite(apart) or apart < rule.min_gap_s:
                continue  # an unreadable time cannot tell which is newer
            parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(len(lead)):
        groups.setdefault(root(i), []).append(i)
    for members in groups.values():
        if len(members) < 2:
            continue
        # ISO texts of one store sort as times; the earlier rank breaks a tie.
        newest = sorted(members, key=lambda i: (lead[i].created_at, -i), reverse=True)
        for slot, i in zip(members, newest, strict=True):
            out[slot] = _moved(lead[i], lead[slot].score)
    return out


def _compact_text(hit: Hit) -> str:
    return compact(hit.text)


def _fact_said(hit: Hit, wanted: frozenset[Phrase]) -> frozenset[Phrase]:
    """The query phrases a fact says in its source's words: its quote (the
    member's own wording, comparable with their messages), or its text when
    it has none."""
    return wanted & _pairs(_content_words(compact(hit.evidence_text or hit.text)))


def _said(
    hit: Hit, wanted: frozenset[Phrase], compacted: Callable[[Hit], str]
) -> frozenset[Phrase]:
    """The query phrases a message hit contains (none for a fact)."""
    if hit.kind != "message":
        return frozenset()
    text = compacted(hit)
    # A folded word is a prefix of the word it came from, so a phrase whose two
    # words are not even substrings cannot be there: long messages that
    # cannot match are not tokenised at all.
    if not any(a in text and b in text for a, b in wanted):
        return frozenset()
    return wanted & _pairs(_content_words(text))


def _moved(hit: Hit, score: float) -> Hit:
    if score == hit.score:
        return hit
    delta = score - hit.score
    parts = dataclasses.replace(
        hit.parts, combined=score, newer_first=hit.parts.newer_first + delta
    )
    return dataclasses.replace(hit, score=score, parts=parts)
