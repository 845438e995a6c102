"""How a message is worded: whether it tells or asks, and whether its author
speaks of themself or to someone else.

Pure functions on text (no I/O), shared by message ranking
(``memory.retrieval.messages``: the ``statement`` and ``first_person`` score
parts) and by attribution (``memory.retrieval.attribution``: whether a hit is
about the member a query names).

Why the first person counts: what memory is asked about is mostly what
members said about themselves — their plans, tastes, family, work ("I've
been skiing since I was six", "my kids love the dinosaur museum"). A
message that only answers someone else ("You'll be an awesome mom!") or
an assistant's long explanation shares a question's topic without holding
anyone's story. Not so for a question put to someone ("you mentioned a few
apps — which were they?", "can you remind me what you said about…"): it
may want what the one it addresses said, a bot's answer or a member's
advice, so such a query does not favour the first person
(``asks_for_own_story``). Word lists: English, German, Spanish, Russian, plus the
Japanese and Chinese pronouns; text in another language scores 0 for every
message alike, which leaves its order as the other parts give it.
"""

from __future__ import annotations

import re

__all__ = [
    "FIRST_PERSON_FULL",
    "asks_for_own_story",
    "asks_for_words",
    "first_person_share",
    "person_lean",
    "speaks_of_self",
    "speaks_to_other",
    "statement_share",
]

# First-person words: English, German, Spanish, Russian (whole words, folded).
_FIRST_PERSON = frozenset(
    """
    i i'm i've i'd i'll im ive me my mine myself we we're we've we'd we'll us our ours ourselves
    ich mich mir mein meine meinen meinem meiner meines wir uns unser unsere unserem unseren
    yo me mi mis mío mía míos mías conmigo nosotros nosotras nos nuestro nuestra nuestros nuestras
    я меня мне мной мой моя моё мое мои моего моей моих мы нас нам нами наш наша наше наши
    """.split()
)
# Second-person words, the same languages.
_SECOND_PERSON = frozenset(
    """
    you you're you've you'd you'll your yours yourself yourselves u ur
    du dich dir dein deine deinen deinem deiner euch euer eure
    tú tu tus te ti contigo usted ustedes vosotros vosotras vuestro vuestra
    ты тебя тебе тобой твой твоя твоё твое твои вы вас вам вами ваш ваша ваше ваши
    """.split()
)
# Verbs asking for someone's words rather than their deeds, the same languages.
_SAYING = frozenset(
    """
    say says said saying tell tells told mention mentions mentioned think thinks thought
    suggest suggests suggested recommend recommends recommended advise advises advised
    sagen sagt sagte gesagt erzählt erzählte erwähnt erwähnte denkt dachte meint meinte
    decir dice dijo dicho cuenta contó menciona mencionó piensa pensó opina
    сказал сказала сказали говорит говорил говорила рассказал рассказала думает думал думала
    """.split()
)
# Japanese and Chinese pronouns, matched as substrings (no spaces).
_FIRST_PERSON_CJK = ("私", "僕", "俺", "わたし", "ぼく", "おれ", "我")
_SECOND_PERSON_CJK = ("あなた", "君", "きみ", "お前", "你")
WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)?", re.UNICODE)
# The share of first-person words at which ``first_person_share`` is full:
# one word in ten. Chat that tells of its author reaches it in a sentence or
# two ("I finally signed up for a pottery class"); an answer to someone else
# or a long explanation stays well below.
FIRST_PERSON_FULL = 0.1

_SENTENCE = re.compile(r"([^.!?\n]+)([.!?]*)")  # a sentence and its end marks
_ALNUM = re.compile(r"[^\W_]")  # what str.isalnum accepts


def statement_share(text: str) -> float:
    """The share of ``text``'s sentences (with a letter or digit) that do not end with "?"."""
    if "?" not in (text or ""):
        return 1.0  # nothing asks: long messages skip the regexes
    ends = [end for body, end in _SENTENCE.findall(text) if _ALNUM.search(body)]
    return 1.0 - sum(e.endswith("?") for e in ends) / len(ends) if ends else 1.0


def speaks_of_self(text: str) -> bool:
    """Whether ``text`` holds a first-person word."""
    return _holds(text, _FIRST_PERSON, _FIRST_PERSON_CJK)


def speaks_to_other(text: str) -> bool:
    """Whether ``text`` holds a second-person word."""
    return _holds(text, _SECOND_PERSON, _SECOND_PERSON_CJK)


def person_lean(text: str) -> int:
    """First-person words minus second-person words in ``text`` (a Japanese
    or Chinese pronoun counts as one)."""
    words = [_fold(w) for w in WORD.findall(text)]
    lean = sum(w in _FIRST_PERSON for w in words) - sum(w in _SECOND_PERSON for w in words)
    if not text.isascii():
        lean += sum(text.count(p) for p in _FIRST_PERSON_CJK)
        lean -= sum(text.count(p) for p in _SECOND_PERSON_CJK)
    return lean


def first_person_share(text: str) -> float:
    """How much ``text`` speaks of its author, 0..1: its share of
    first-person words (a Japanese or Chinese pronoun counts as one) over
    ``FIRST_PERSON_FULL``, at most 1."""
    text = text or ""
    folded = text.casefold()
    if len(folded) == len(text):
        # Every character folds to one: the same words, folded in one call
        # (a long message has hundreds).
        words = WORD.findall(folded.replace("\u2019", "'"))
        mine = sum(map(_FIRST_PERSON.__contains__, words))
    else:  # "ß", "İ": folding changes the text's length, fold word by word
        words = WORD.findall(text)
        mine = sum(1 for w in words if _fold(w) in _FIRST_PERSON)
    mine += sum(text.count(p) for p in _FIRST_PERSON_CJK) if not text.isascii() else 0
    if not mine:
        return 0.0
    return min(1.0, mine / (max(1, len(words)) * FIRST_PERSON_FULL))


def asks_for_own_story(query: str) -> bool:
    """Whether ranking for ``query`` favours messages in the first person:
    unless it speaks to someone (a second-person word; see the module)."""
    return not speaks_to_other(query)


def asks_for_words(query: str) -> bool:
    """Whether ``query`` asks what someone said or thinks ("What did Jon say
    about the store?", "What does Alice think of…") rather than what they
    did: a verb of saying, thinking or advising."""
    return any(_fold(w) in _SAYING for w in WORD.findall(query))


def _fold(word: str) -> str:
    return word.casefold().replace("\u2019", "'")


def _holds(text: str, words: frozenset[str], cjk: tuple[str, ...]) -> bool:
    if any(p in text for p in cjk):
        return True
    return any(_fold(w) in words for w in WORD.findall(text))
