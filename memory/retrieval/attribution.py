"""Whether a hit is about the members a query names.

"What did Alice realise after her race?" asks about Alice. A message in
which Bob tells of his own race matches every word of it but the name, and
the name is what search strips before ranking (it is rarely in a member's
own messages). Worse, the messages that name Alice are often Bob talking
*to* her ("Thanks, Alice! The race was…"), and Alice's own messages that
match are often her asking about Bob's ("What got you into running?").

So when a query names members, strict search counts as covering it only
hits attributable to one of them:

* a fact whose subject is the member;
* a message the member wrote that speaks of themselves (``about_author``:
  a question or a compliment aimed at someone else does not count);
* a message by anyone that names the member other than in address: "Alice
  told me…" counts, "Thanks, Alice!" does not.

Otherwise memory holds nothing about *that member* doing what the query
asks, and strict search answers with no hit rather than with someone else's
story. Such a hit must also be among the first ``NAMED_COVER_WITHIN`` of
strict search's hits. The hits themselves are not filtered: a covered query
keeps them all.

A member's own message is judged by the sentences that share the query's
words, not as a whole. "That charity race sounds great, Mel! I'm so proud of
you" holds "I'm", but the sentence about the race addresses Mel; "Love that
colour! For walking or running?" asks about running rather than telling of
it. So such a message counts only when a sentence sharing a word of the
query tells (is not a question about those words) and speaks of its author:
a first-person word in it, or, in a sentence with no person of its own, in
the sentence before ("Been hectic. Started hitting the gym"), while a
second-person word or an address hands the sentences that follow to the
other member ("Congrats, Alice! Adoption sounds awesome"). A message that
shares no word with the query is judged as a whole, and counts only when
its meaning is close: semantic similarity at least the calibration's
``cover_named_sem_min`` (``memory.retrieval.gate_calibration``), since the
speaker signal lifts the named member's loosely related messages into the
first hits.

A question about one member is often about another's story: "What did
Melanie realise after her race?" when Caroline ran it. The named member's
messages lead the ranking (the speaker signal), and one of them tells of
themself with a word of the question ("My kids are excited about summer").
So an attributable hit among the first counts only when no other member's
own story among the first ``RIVAL_WITHIN`` hits matches the query clearly
closer: by more than the calibration's ``cover_rival_margin`` in a hit's own
relevance (``memory.retrieval.scoring.MessageWeights.base``: meaning and
BM25, without the speaker and the other signals that rank the named
member's messages first). A rival is a fact about another member, or a
message about its author in the first person ("A tropical vacation is
always a good idea" holds an opinion, not a story) that only states: no
question, and no second-person word in the sentences that share the
query's words (in the whole message if none does): "How long have you been
into art?" asks the named member for their story, "Your store looks great!"
praises theirs, while "Yeah, you're right. Family's everything to me since
the accident" tells the author's own.
Such an outmatched hit is marked ``OUTMATCHED``.

Whose a sentence is, is read from its persons: first-person words against
second-person words and addresses ("I hope you're okay" is even, so it
keeps the sentence before's reading), and in a sentence sharing the query's
words, first the clauses that share them ("Your store looks great, I
remember it!" praises the other's store; "Lately I trained for the race,
have you run one?" tells of the author's race). A query that asks what a
member said ("What did Jon say about Gina's store?",
``voice.asks_for_words``) wants their words, whoever they speak of: any
sentence of theirs that shares the query's words and tells counts
(``THEIR_WORDS``).

Each of the first hits of a query naming members carries the verdict in
``parts.about`` (``ABOUT_REASONS``): why it counts, or why it does not.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from memory.models import Hit
from memory.retrieval.query import MemberNames, NameMatch, content_terms, find_names, light_stem
from memory.retrieval.scoring import DEFAULT_MESSAGE_WEIGHTS
from memory.retrieval.voice import (
    WORD,
    asks_for_words,
    person_lean,
    speaks_of_self,
    speaks_to_other,
    statement_share,
)
from memory.text import tokens

__all__ = [
    "ABOUT_REASONS",
    "ASKS",
    "ATTRIBUTING",
    "FAR_MEANING",
    "NAMED_COVER_WITHIN",
    "NAMES_THEM",
    "OUTMATCHED",
    "RIVAL_WITHIN",
    "SOMEONE_ELSE",
    "THEIR_FACT",
    "THEIR_WORDS",
    "TOLD_OF_SELF",
    "TO_ANOTHER",
    "NamedQuery",
    "about_author",
    "addressed",
    "attributed",
    "own_relevance",
]
# How far down strict search's ranking the attributable hit that covers a
# query may be. Attributable evidence of an answerable question leads the
# ranking (the first hit in 87 % of LoCoMo dev's questions); when the member
# only asked about someone else's story, the story leads and the member's
# hits trail. Measured on LoCoMo and REALTALK dev with the budget of the
# gate's calibration (strict recall@10 loses at most 3 points): share of
# LoCoMo's false-premise questions with no strict hit / strict recall@10
# change on LoCoMo, REALTALK — anywhere 22.5 % (−0.4, −0.7); within 5
# 33.8 % (−1.7, −1.8); within 3 38.0 % (−2.1, −2.2); within 2 50.7 %
# (−3.2, −2.9); first only 71.8 % (−8.7, −9.0).
NAMED_COVER_WITHIN = 3
# How far down the ranking another member's own story is looked for (see the
# module). The other's story that a false premise moves onto the named member
# ranks among the first ten in LoCoMo dev (the speaker signal keeps it below
# the named member's messages); deeper, the rivals are mostly loose matches.
RIVAL_WITHIN = 10

# ``parts.about``: why a hit is about a named member ...
THEIR_FACT = "their fact"
TOLD_OF_SELF = "told of themselves"
THEIR_WORDS = "their words"
NAMES_THEM = "names them"
# ... or why it is not.
ASKS = "asks about it"
TO_ANOTHER = "speaks to another"
FAR_MEANING = "shares no word, meaning too far"
SOMEONE_ELSE = "about someone else"
OUTMATCHED = "another's own story is closer"
ATTRIBUTING = frozenset({THEIR_FACT, TOLD_OF_SELF, THEIR_WORDS, NAMES_THEM})
ABOUT_REASONS = (
    THEIR_FACT,
    TOLD_OF_SELF,
    THEIR_WORDS,
    NAMES_THEM,
    ASKS,
    TO_ANOTHER,
    FAR_MEANING,
    SOMEONE_ELSE,
    OUTMATCHED,
)
_EPS = 1e-9
# Letters two words must share at their start to count as one word when
# neither's stem is the other's beginning.
_SHARED_PREFIX = 6

# Words that open an address: "Hey Alice,", "Thanks Alice!".
_GREETINGS = frozenset(
    """
    hey hi hello hiya yo thanks thank thx congrats congratulations wow woah whoa woohoo yay hooray
    cheers oh aw aww ah yes yeah yep
    sure ok okay dear morning night bye love sorry well haha lol omg hallo danke hola gracias
    привет спасибо
    """.split()
)
# What may follow a name in address (the end of the text counts too).
_ADDRESS_END = re.compile(r"\s*(?:[,!?.:;…]|$)")


def about_author(text: str, author_id: str, names: MemberNames) -> bool:
    """Whether a message speaks of its author: a first-person word, or — chat
    drops "I" ("baked two loaves") — a statement that neither speaks to nor
    addresses someone else. "What got you into running?" and "That race
    sounds great, Mel!" are about the other member."""
    if speaks_of_self(text):
        return True
    if speaks_to_other(text) or statement_share(text) == 0.0:
        return False
    return not _addresses_another(text, author_id, names)


def addressed(text: str, match: NameMatch) -> bool:
    """Whether the name at ``match`` addresses its member ("Thanks, Alice!")
    rather than speaking of them: followed by punctuation or the end, and
    preceded by the start of a sentence, a comma or a greeting.

    Wider than ``memory.retrieval.addressed.addresses``, which learns names
    and so takes only the surest forms at a message's edges; here a missed
    address credits a member with someone else's story, so "Yeah Mel, let's
    go" and "Woah, Caroline, it sounds…" count too."""
    if not _ADDRESS_END.match(text, match.end):
        return False
    before = text[: match.start].rstrip()
    if not before or before[-1] in ",.!?;:(-—":
        return True
    words = WORD.findall(before[-40:])
    return bool(words) and words[-1].casefold() in _GREETINGS


def attributed(hit: Hit, named: Collection[str], names: MemberNames, content: str = "") -> bool:
    """Whether ``hit`` is about one of the ``named`` member ids (see the
    module); ``content`` is the query without its names ("" judges a
    member's message as a whole)."""
    if not named:
        return True
    return NamedQuery.of(named, names, content).reason(hit) in ATTRIBUTING


@dataclass(frozen=True)
class NamedQuery:
    """A query's named members, as strict search judges its hits by them."""

    named: frozenset[str]
    names: MemberNames
    # The query's content words, stemmed (``light_stem``): a word of a hit
    # that starts with one shares it ("paint" ~ "painting").
    stems: tuple[str, ...] = ()
    # The least semantic similarity of a member's message that shares no word
    # with the query (0: no floor).
    unworded_sem_min: float = 0.0
    # The stems' first ``_SHARED_PREFIX`` letters (those that long).
    prefixes: frozenset[str] = frozenset()
    # How much closer (own relevance) another member's own story may be than
    # an attributable hit that still counts (above 1: any).
    rival_margin: float = 1.5
    # The query asks what the member said ("What did Jon say about…"): any
    # sentence of theirs that tells is their words, whoever it speaks of.
    asks_words: bool = False

    @classmethod
    def of(
        cls,
        named: Iterable[str],
        names: MemberNames,
        content: str,
        unworded_sem_min: float = 0.0,
        rival_margin: float = 1.5,
    ) -> NamedQuery:
        stems = tuple(dict.fromkeys(light_stem(t) for t in content_terms(content)))
        prefixes = frozenset(s[:_SHARED_PREFIX] for s in stems if len(s) >= _SHARED_PREFIX)
        words = asks_for_words(content)
        return cls(frozenset(named), names, stems, unworded_sem_min, prefixes, rival_margin, words)

    def reason(self, hit: Hit) -> str:
        """Why ``hit`` is (a reason in ``ATTRIBUTING``) or is not about a named member."""
        verdict = SOMEONE_ELSE
        if hit.subject in self.named:
            if hit.kind == "fact":
                return THEIR_FACT
            verdict = self._own_message(hit)
            if verdict == TOLD_OF_SELF:
                return verdict
        if any(
            not m.user_ids.isdisjoint(self.named) and not addressed(hit.text, m)
            for m in find_names(hit.text, self.names)
        ):
            return NAMES_THEM
        return verdict

    def marked(self, hit: Hit, reason: str | None = None) -> Hit:
        """``hit`` with its ``parts.about`` set (to ``reason``, or its own)."""
        parts = dataclasses.replace(hit.parts, about=reason or self.reason(hit))
        return dataclasses.replace(hit, parts=parts)

    def judged(self, hits: Sequence[Hit]) -> list[Hit]:
        """The first ``NAMED_COVER_WITHIN`` of ``hits`` (best first), marked;
        an attributable one that another member's own story among the first
        ``RIVAL_WITHIN`` outmatches is marked ``OUTMATCHED`` (see the module)."""
        reasons = [self.reason(h) for h in hits[:NAMED_COVER_WITHIN]]
        rival = max(
            (
                own_relevance(h)
                for h in hits[:RIVAL_WITHIN]
                if h.subject not in self.named and self._rival(h)
            ),
            default=None,
        )
        if rival is not None:
            reasons = [
                OUTMATCHED
                if why in ATTRIBUTING and rival - own_relevance(h) > self.rival_margin + _EPS
                else why
                for h, why in zip(hits, reasons, strict=False)
            ]
        return [self.marked(h, why) for h, why in zip(hits, reasons, strict=False)]

    def _rival(self, hit: Hit) -> bool:
        """Whether ``hit`` (not about a named member) tells its author's own
        story: a fact about them, or a message about them (as a named
        member's would be) in the first person, only statements, and no
        second-person word where it shares the query's words."""
        if hit.subject not in self.names.ids or self.reason(hit) in ATTRIBUTING:
            return False
        if statement_share(hit.text) < 1.0:
            return False
        sharing = [x for x in _sentences(hit.text) if self._shares_word(x)]
        if any(speaks_to_other(x) for x in sharing or [hit.text]):
            return False
        if hit.kind == "message" and not speaks_of_self(hit.text):
            return False
        theirs = dataclasses.replace(self, named=frozenset({hit.subject}), asks_words=False)
        return theirs.reason(hit) in ATTRIBUTING

    def _own_message(self, hit: Hit) -> str:
        text, author = hit.text, hit.subject
        whole = about_author(text, author, self.names)
        sentences = _sentences(text)
        sharing = {i for i, s in enumerate(sentences) if self._shares_word(s)}
        if not sharing:
            if not whole:
                return ASKS if statement_share(text) == 0.0 else TO_ANOTHER
            sem = hit.parts.semantic
            if sem is not None and sem < self.unworded_sem_min - _EPS:
                return FAR_MEANING
            return TOLD_OF_SELF
        # Whose the sentences are, read in order: a sentence without a
        # person of its own continues the one before.
        own = whole and not speaks_to_other(text)
        asked = False
        for i, sentence in enumerate(sentences):
            if i not in sharing:
                lean = self._lean(sentence, author)
                if lean:
                    own = lean > 0
                continue
            # The clauses holding the query's words decide first: "Lately I
            # trained for the race, have you run one?" tells of its author,
            # "Your store looks great, I remember it!" praises another's.
            clauses = [c for c in _CLAUSE.split(sentence) if self._shares_word(c)]
            lean = sum(self._lean(c, author) for c in clauses) or self._lean(sentence, author)
            if lean:
                own = lean > 0
            if self._asks(sentence):
                asked = True
            elif own:
                return TOLD_OF_SELF
            elif self.asks_words:
                return THEIR_WORDS
        return ASKS if asked else TO_ANOTHER

    def _lean(self, text: str, author: str) -> int:
        """Whom ``text`` speaks of: above 0 its author, below 0 someone else
        (first-person words, less second-person words and addresses)."""
        return person_lean(text) - _addresses_another(text, author, self.names)

    def _shares_word(self, text: str) -> bool:
        """Whether a word of ``text`` starts with a stem of the query's, or
        shares its first ``_SHARED_PREFIX`` letters with one ("mentoring" ~
        "mentorship", which the stems miss)."""
        for t in tokens(text):
            if t.startswith(self.stems):
                return True
            if len(t) >= _SHARED_PREFIX and t[:_SHARED_PREFIX] in self.prefixes:
                return True
        return False

    def _asks(self, sentence: str) -> bool:
        """Whether ``sentence`` asks about the words it shares with the query:
        a question whose shared words are in its last clause ("Sunflowers
        mean warmth, right?" tells; "For walking or running?" asks)."""
        if not sentence.rstrip(_CLOSERS).endswith(("?", "？")):
            return False
        clauses = _CLAUSE.split(sentence)
        return not any(self._shares_word(c) for c in clauses[:-1])


# A sentence and its end marks (Latin and CJK), or a line.
_SENTENCE = re.compile(r"[^.!?…。！？\n]+[.!?…。！？]*")
_ALNUM = re.compile(r"[^\W_]")
_CLAUSE = re.compile(r"[,;:，、；：]\s*|\s+[-–—]+\s+")
_CLOSERS = " \t\"'”’)]»」』"


def own_relevance(hit: Hit) -> float:
    """``hit``'s relevance of its own: meaning and BM25 as message ranking
    weighs them (``MessageWeights.base``), without the signals about who
    wrote it or when."""
    return DEFAULT_MESSAGE_WEIGHTS.base(hit.parts.semantic, hit.parts.bm25)


def _sentences(text: str) -> list[str]:
    return [m.group(0).strip() for m in _SENTENCE.finditer(text) if _ALNUM.search(m.group(0))]


def _addresses_another(text: str, author: str, names: MemberNames) -> bool:
    return any(author not in m.user_ids and addressed(text, m) for m in find_names(text, names))
