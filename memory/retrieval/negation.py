"""Negation: which words of a chat line are said under "not", and which
questions ask for the members who *have* a property.

"Who is a papyrologist?" must not be answered by "I'm a paleographer btw, not
a papyrologist", nor "who studies Greek?" by "I don't read greek": the line
holds the question's word, so lexical overlap counted it, and a small sentence
encoder barely hears the "not" (MiniLM puts "not a papyrologist" at 0.7 of
"who is a papyrologist?"). Whether a negated line answers depends on the
question, though: "is Alice a papyrologist?" is answered by "I'm not a
papyrologist". So only a question that asks *who* has a property (who,
which of us, anyone…), names no member and is not negated itself
(``asks_for_holders``) reads lines positively: a word it asks about counts
only where no negation governs it (``memory.retrieval.lexical``), and a line
that holds the question's words only under negation does not pass the
strict gate (``memory.retrieval.scoring``).

A negation governs the words after it in its clause: up to ``WINDOW`` words,
and never past a word that starts another clause ("but", "though", a new
subject such as "I"). Text is read compact (``memory.text.compact``:
punctuation gone, "don't" → "don t"). English only; pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

# Read compact: "don't" is "don t", "isn't" "isn t" (``_CONTRACTED``).
NEGATORS = frozenset(
    """
    not no never nor neither nobody none nothing cannot without
    dont doesnt didnt cant isnt arent wasnt werent wont wouldnt couldnt shouldnt
    havent hasnt hadnt aint
    """.split()
)
# "t" after one of these is a contraction's "n't".
_CONTRACTED = frozenset(
    """
    don doesn didn can isn aren wasn weren won wouldn couldn shouldn haven hasn hadn ain
    """.split()
)
# Words that start another clause: a negation before them governs nothing after.
BREAKERS = frozenset(
    """
    but though although however yet except instead rather so because since while
    whereas unless i we you he she they
    """.split()
)
WINDOW = 5  # words after a negation that it governs ("I don't even speak or write Greek")

# How a question asks for the members who have something.
_HOLDER_STARTS = frozenset({"who", "whom", "whose", "anyone", "anybody", "someone", "somebody"})
_HOLDER_AFTER_WHICH = frozenset(
    {"of", "member", "members", "people", "person", "one", "ones", "users", "folks"}
)


def is_negator(words: Sequence[str], i: int) -> bool:
    w = words[i]
    if w == "t":
        return i > 0 and words[i - 1] in _CONTRACTED
    if w == "not" and i + 1 < len(words) and words[i + 1] == "only":
        return False  # "not only X but Y" says X
    return w in NEGATORS


def negated(words: Sequence[str]) -> list[bool]:
    """For each word, whether a negation before it in its clause governs it."""
    out = [False] * len(words)
    left = 0
    for i, w in enumerate(words):
        if w in BREAKERS:
            left = 0
        elif is_negator(words, i):
            left = WINDOW
        elif left:
            out[i] = True
            left -= 1
    return out


def has_negator(words: Sequence[str]) -> bool:
    return any(is_negator(words, i) for i in range(len(words)))


def asks_for_holders(words: Sequence[str]) -> bool:
    """Whether a question (its compact words) asks which members have
    something — "who studies Greek?", "which of us plays chess?", "does
    anyone here knit?" — and is not itself negated ("who doesn't read
    Greek?" is answered by the lines that say "don't")."""
    if not words or has_negator(words):
        return False
    head = words[:4]
    if any(w in _HOLDER_STARTS for w in head):
        return True
    for i, w in enumerate(head):
        if w == "which" and any(x in _HOLDER_AFTER_WHICH for x in words[i + 1 : i + 4]):
            return True
    return False
