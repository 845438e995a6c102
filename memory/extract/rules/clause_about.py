"""Offline rule extractor, part 4b: sentences about something else that name
the author ("Pottery is a huge part of my life" → "Pottery is a huge part of
X's life", "Family time matters to me" → "Family time matters to X") and who
the author says they are in an aside ("I (amateur papyrologist) can answer
this" → "X is an amateur papyrologist")."""

from __future__ import annotations

import re

from memory.extract.rules import clause_words as w
from memory.extract.rules.clauses import (
    DEICTIC_OBJECT,
    MAX_WORDS,
    POINTING,
    TOKEN,
    Said,
    content_words,
    is_adverb,
    join_words,
    later_persons,
    possessive,
    trim,
)
from memory.extract.rules.lexicon import ROLE_NOUNS, with_article

# -- a sentence about something else that names the author ----------------------------------

# The verbs such a sentence may have before the author's "me"/"my"
# ("Pottery is a huge part of my life", "Painting helps me relax").
_ABOUT_VERBS = w.words(
    "is are was were has have had helps helped makes made keeps kept brings brought gives "
    "gave taught teaches matters mattered means meant reminds reminded allowed allows "
    "inspired inspires motivates motivated changed changes keep help make bring give remind "
    "inspire motivate calms calm"
)
_NOT_A_SUBJECT = w.words(
    "it it's its this that there here he she they you we what which who thanks thank "
    "everything something nothing everyone someone anyone one they're there's that's he's "
    "she's what's who's i i'm my me so if when but or"
)


def rewrite_about(clause: str, name: str) -> Said | None:
    """ "Family time matters to me" → "Family time matters to X"."""
    tokens = TOKEN.findall(clause.replace("’", "'"))
    if len(tokens) < 4 or len(tokens) > MAX_WORDS or w.SECOND_PERSON.search(clause):
        return None
    if DEICTIC_OBJECT.search(clause) or POINTING.search(clause):
        return None
    tokens = trim(tokens)
    low = [t.lower() for t in tokens]
    verb_at = next(
        (
            i
            for i, t in enumerate(low[:7])
            if i > 0 and (t in _ABOUT_VERBS or (t.endswith("'s") and t not in _NOT_A_SUBJECT))
        ),
        None,
    )
    if verb_at is None:
        return None
    subject = low[: verb_at + 1] if low[verb_at].endswith("'s") else low[:verb_at]
    if subject[0] in _NOT_A_SUBJECT or subject[0] in w.DEICTIC or not tokens[0][0].isalpha():
        return None
    if any(t in _NOT_A_SUBJECT or t == "," for t in subject[1:]) or subject[-1] == "and":
        return None
    mine = next((i for i, t in enumerate(low) if t in ("me", "my", "myself")), None)
    if mine is None or mine <= verb_at:
        return None
    b = mine - 1
    while b > verb_at and is_adverb(low[b]):
        b -= 1  # "Guitar's mostly my thing"
    before = low[b]
    tied = (
        before in _ABOUT_VERBS
        or (low[mine] == "my" and (low[mine - 2 : mine] == ["part", "of"] or b == verb_at))
        or (before == "to" and low[mine - 2] in ("matters", "mattered", "means", "meant", "lot"))
    )
    if not tied or (mine + 1 < len(low) and low[mine + 1] in w.TALK_VERBS):
        return None
    if content_words([t for i, t in enumerate(tokens) if i != mine]) < 3:
        return None
    words = list(tokens)
    words[mine] = possessive(name) if low[mine] == "my" else name
    words = words[: mine + 1] + later_persons(words[mine + 1 :])
    words[0] = words[0][:1].upper() + words[0][1:]
    return join_words(words), "other", "clause.about"


# "I (amateur papyrologist) can answer this one": who the author is, as an aside.
_ASIDE = re.compile(
    rf"(?<![\w'])i\s*\(\s*(?P<np>(?:(?:a|an)\s+)?(?:[\w'-]+\s+){{0,3}}{ROLE_NOUNS})\s*\)",
    re.IGNORECASE,
)


def rewrite_aside(sentence: str, name: str) -> Said | None:
    m = _ASIDE.search(sentence)
    if m is None:
        return None
    return f"{name} is {with_article(m.group('np'))}", "profile", "clause.aside"
