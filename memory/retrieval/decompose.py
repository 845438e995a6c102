"""Query decomposition: the parts a question combines, each a query of its own.

"How many days passed between my visit to the dentist and buying the bike?"
asks about two events that were most likely told in two different sittings.
One embedding of the whole question lands between them, and its nearest
messages are often several of one event and none of the other. Searching
each part on its own ("... between my visit to the dentist?", "... between
buying the bike?") finds each event's evidence; ``memory.retrieval.part_fusion``
then makes room for it in the whole query's ranking.

The reading is syntactic and English only (coordination by "and", "or" and
commas), pure and deterministic:

* A question is split only when it is one sentence: a longer message is a
  narrative whose "and"s join what it tells, not what it asks.
* Quoted titles ('How I Built This') are single words.
* A coordination is a list of two or more *conjuncts* joined by commas and
  a final "and"/"or" ("X and Y", "X, Y, and Z", "X or Y").
* Where the list starts: right after a marker that introduces it —
  "between", "both", "either", "among", "including", "such as", or a comma
  closing the question's head ("Which came first, X or Y?") — so the
  first conjunct is everything from there. Without a marker the first
  conjunct is the run of content words just before the first joiner
  ("gifts for my coworker and brother" → "coworker").
* Where it ends: with a marker, the last conjunct runs to the end of the
  clause (a comma or the question mark) — unless the first conjunct is a
  bare run of content words ("both Kate and Elise like"), then it is
  measured as below. Without a marker, both conjuncts are as many content
  words as the shorter run beside the joiner ("Melanie's kids and her
  husband like" → "Melanie's kids", "husband"); what follows stays shared by
  every part ("like"). A joiner followed by a subject pronoun joins clauses
  and is skipped.
* Each part is the question with the other conjuncts taken out, so it keeps
  the shared frame ("How many hours of ... did I do last week?").

At most ``MAX_PARTS`` parts, from the first coordination that yields two or
more; a question with none has no parts (it is searched whole, as before).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory.retrieval.lexical import STOP_WORDS

MAX_PARTS = 4
_JOINERS = frozenset({"and", "or"})
# Words that open a list whose first conjunct is everything after them.
_MARKERS = frozenset({"between", "both", "either", "among", "amongst", "including"})
_MARKER_PAIRS = (("such", "as"),)
_WH = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how"})
# A joiner followed by a subject pronoun joins two clauses ("..., and I was
# wondering"), not two things asked about.
_PRONOUNS = frozenset({"i", "you", "he", "she", "we", "they", "it"})
_POSSESSIVE = re.compile(r"['\u2019][sS]$")
# A question of more than one sentence is not split (module doc); an
# abbreviation's full stop ("St. Mary's", "Dr. Lee") does not end one.
_SENTENCE_END = re.compile(r"(?<![A-Z][a-z])(?<![A-Z])[.!?]+\s+(?=[A-Z0-9'\"])")
_TOKEN = re.compile(
    r"(?P<quote>(?<![\w'])'[^'\n]{1,80}'(?![\w])|\"[^\"\n]{1,80}\"|\u2018[^\u2019\n]{1,80}\u2019"
    r"|\u201c[^\u201d\n]{1,80}\u201d)"
    r"|(?P<word>[A-Z][a-z]{0,2}\.(?=\s+[A-Z])|#?[^\W_]+(?:[-'\u2019.][^\W_]+)*(?:['\u2019][sS]?)?)"
    r"|(?P<punct>[,;:?!.()])"
)


@dataclass(frozen=True)
class _Tok:
    start: int
    end: int
    text: str
    kind: str  # "quote", "word" or "punct"

    @property
    def low(self) -> str:
        return self.text.casefold()

    @property
    def content(self) -> bool:
        """A word that carries topic: a quoted title, or a word that is not a stop word."""
        if self.kind == "quote":
            return True
        if self.kind != "word":
            return False
        bare = re.sub(r"['\u2019][sS]?$", "", self.low)
        return bool(bare) and bare not in STOP_WORDS and not bare.isdigit()


@dataclass(frozen=True)
class Coordination:
    """Conjunct spans (token index ranges, end exclusive) of one list."""

    conjuncts: tuple[tuple[int, int], ...]


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup or "word"
        out.append(_Tok(m.start(), m.end(), m.group(0), kind))
    return out


def one_sentence(text: str) -> bool:
    """Whether ``text`` (stripped) holds a single sentence."""
    return _SENTENCE_END.search(text.strip()) is None


def _is_clause_end(t: _Tok) -> bool:
    return t.kind == "punct" and t.text in {",", ";", ":", "?", "!", "."}


def _marker_end(toks: list[_Tok], i: int) -> int | None:
    """If a marker ends at token ``i`` (inclusive), the index just after it."""
    t = toks[i]
    if t.kind == "word" and t.low in _MARKERS:
        return i + 1
    for a, b in _MARKER_PAIRS:
        if t.kind == "word" and t.low == b and i > 0 and toks[i - 1].low == a:
            return i + 1
    return None


def _head_comma(toks: list[_Tok], i: int) -> bool:
    """A comma that closes the question's head ("Which came first, X or Y?"):
    what precedes holds a question word and what follows holds none."""
    before = {t.low for t in toks[:i] if t.kind == "word"}
    after = {t.low for t in toks[i + 1 :] if t.kind == "word"}
    return bool(before & _WH) and not (after & _WH)


def _content_run_before(toks: list[_Tok], end: int) -> list[int]:
    """Indexes of the run of content words that ends just before ``end``."""
    i = end
    while i > 0 and toks[i - 1].content:
        i -= 1
    return list(range(i, end))


def _content_run_after(toks: list[_Tok], lo: int, hi: int) -> list[int]:
    """Indexes of the first run of content words in ``lo..hi`` (leading
    function words skipped)."""
    i = lo
    while i < hi and toks[i].kind == "word" and not toks[i].content:
        i += 1
    out: list[int] = []
    while i < hi and toks[i].content:
        out.append(i)
        i += 1
    return out


def _heads(toks: list[_Tok], idx: list[int]) -> list[int]:
    """The content words of a run that are not a possessive modifier ("Melanie's")."""
    return [i for i in idx if not _POSSESSIVE.search(toks[i].text)]


def find_coordination(text: str) -> Coordination | None:
    """The list of two or more conjuncts ``text`` asks about (module doc): the
    first one a marker introduces, else the first one."""
    toks = _tokens(text)
    found: list[tuple[bool, Coordination]] = []
    for j, t in enumerate(toks):
        if t.kind != "word" or t.low not in _JOINERS or j == 0:
            continue
        got = _coordination_at(toks, j)
        if got is not None:
            found.append(got)
    marked = [c for m, c in found if m]
    if marked:
        return marked[0]
    return found[0][1] if found else None


def _coordination_at(toks: list[_Tok], j: int) -> tuple[bool, Coordination] | None:
    """The list whose final joiner is token ``j`` and whether a marker opens it."""
    if j + 1 >= len(toks) or toks[j + 1].low in _PRONOUNS:
        return None  # "..., and I was wondering": two clauses, not a list
    clause_end = next((m for m in range(j + 1, len(toks)) if _is_clause_end(toks[m])), len(toks))
    commas: list[int] = []
    marker: int | None = None
    k = j - 1
    while k >= 0:
        t = toks[k]
        end = _marker_end(toks, k)
        if end is not None:
            marker = end
            break
        if t.kind == "punct":
            if t.text == ",":
                commas.insert(0, k)
            elif t.text not in "()":
                break
        elif t.low in _JOINERS or t.low in _WH:
            break
        k -= 1
    if marker is not None:
        while marker < j and toks[marker].text == ",":
            marker += 1
        seps = [c for c in commas if c >= marker] + [j]
        first = list(range(marker, seps[0]))
        if all(toks[i].content for i in first):
            right = _content_run_after(toks, j + 1, clause_end)
            n = len(_heads(toks, first))
            last_end = right[min(n, len(right)) - 1] + 1 if right else clause_end
        else:
            last_end = clause_end
        spans = _spans(toks, marker, seps, last_end, skip_lead=False)
        return None if spans is None else (True, Coordination(spans))
    if len(commas) == 1 and toks[j].low == "or" and _head_comma(toks, commas[0]):
        spans = _spans(toks, commas[0] + 1, [j], clause_end, skip_lead=False)
        return None if spans is None else (True, Coordination(spans))
    # No marker: a comma separates conjuncts only between short runs.
    seps = [j]
    edge = j - 1 if toks[j - 1].text == "," else j  # an Oxford comma belongs to the joiner
    for c in reversed([c for c in commas if c < edge]):
        seg = toks[c + 1 : edge if seps[0] == j else seps[0]]
        if 0 < len(seg) <= 4 and all(x.kind in ("word", "quote") for x in seg):
            seps.insert(0, c)
        else:
            break
    left = _content_run_before(toks, seps[0] if seps[0] != j else edge)
    if not left:
        return None
    right = _content_run_after(toks, j + 1, clause_end)
    if not right:
        return None
    n = min(len(_heads(toks, left)), len(_heads(toks, right))) or 1
    heads = _heads(toks, left)[-n:] or left[-1:]
    start = heads[0]
    while start > left[0] and _POSSESSIVE.search(toks[start - 1].text):
        start -= 1
    spans = _spans(toks, start, seps, right[min(n, len(right)) - 1] + 1, skip_lead=True)
    return None if spans is None else (False, Coordination(spans))


def _spans(
    toks: list[_Tok], start: int, seps: list[int], last_end: int, *, skip_lead: bool
) -> tuple[tuple[int, int], ...] | None:
    """Conjunct spans between ``start``, the separators and ``last_end``;
    None unless there are two or more and each has a content word."""
    bounds = [start, *seps, last_end]
    out: list[tuple[int, int]] = []
    for n, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        lo = a if n == 0 else a + 1
        while lo < b and (toks[lo].text == "," or toks[lo].low in _JOINERS):
            lo += 1
        if skip_lead and n > 0:
            while lo < b and toks[lo].kind == "word" and not toks[lo].content:
                lo += 1
        hi = b
        while hi > lo and toks[hi - 1].text == ",":
            hi -= 1
        if not any(x.content for x in toks[lo:hi]):
            return None
        out.append((lo, hi))
    return tuple(out) if len(out) >= 2 else None


def decompose(query: str) -> tuple[str, ...]:
    """The parts of ``query`` (module doc): each is the query with the other
    conjuncts of its first list taken out. Empty when the query is not one
    sentence or joins nothing."""
    text = " ".join((query or "").split())
    if not text or not one_sentence(text):
        return ()
    coord = find_coordination(text)
    if coord is None:
        return ()
    toks = _tokens(text)
    parts: list[str] = []
    spans = coord.conjuncts[:MAX_PARTS]
    # The text the list covers, from its first conjunct to its last.
    lo_char = toks[coord.conjuncts[0][0]].start
    hi_char = toks[coord.conjuncts[-1][1] - 1].end
    for a, b in spans:
        piece = text[toks[a].start : toks[b - 1].end]
        part = " ".join(f"{text[:lo_char]}{piece}{text[hi_char:]}".split())
        if part not in parts and part != text:
            parts.append(part)
    return tuple(parts) if len(parts) >= 2 else ()
