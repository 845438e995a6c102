"""Offline rule extractor, part 4: a first-person clause said again in the third person.

The shaped rules (``builders``) read a few statement shapes into crisp facts
("X works as a nurse"). Most of what people say about themselves has no such
shape: "I ran a charity race for mental health last Saturday", "I do
genealogy", "My field of expertise is making neural networks train quickly",
"I don't read greek". This rule takes the clause whole, from its subject to
where it ends, and says it again about the author: the subject becomes the
author's name with its verb agreeing ("I do" → "X does", "I don't read" →
"X does not read", "I've been exploring" → "X has been exploring", "My field
… is" → "X's field … is"), every later first person becomes "they / their /
them" ("working on my first MA" → "working on their first MA"). "We" with
the author's family ("we took the kids camping") becomes "X and others";
a sentence about something the author ties to themself ("Pottery is a huge
part of my life") names the author in place of "me"/"my".

It refuses what is not about the member or will not stay true: a verb of
the conversation rather than of a life ("I think", "I see what you mean",
"I thought it was a κ", "I was wondering"), a modal or a plan of the moment
("I'd say", "I could", "I'll take a look"), a passing state ("I'm tired",
"I'm so glad", "I'm off to go swimming"), a clause about the person spoken
to ("you") or about what only the conversation shows ("I love that", "I
read a paper about this"), and a clause with too little left. A negation
keeps its "not" ("I'm not a papyrologist" → "X is not a papyrologist"),
and is kept only for what stays true ("X does not read Greek"; not "I
don't know").
"""

from __future__ import annotations

import re

from memory.extract.rules import clause_words as w
from memory.extract.rules.lexicon import (
    HAS_BAD,
    NP_BAD_START,
    PREF_BAD_OBJECT,
    third_person,
)

# Where a clause ends: another clause that is not the author's, an aside, a
# laugh. (A first-person clause after "and"/"but" is read on its own.)
_CLAUSE_CUT = re.compile(
    r"\s+[-–—]+\s+|\s*[;:()\[\]]\s*|\.\.\.|"
    r",?\s+(?:but|although|though|tho|whereas|unless|except|lol|lmao|haha\w*|hehe\w*|xd|btw|"
    r"tbh|imo|imho|ngl|which)\b|"
    r",?\s+(?:and|so|because|cause|'cause|cuz|since|as|plus|then|or)\s+(?=(?:i|i'm|im|i've|"
    r"ive|i'd|i'll|it|it's|its|that|this|those|these|there|you|your|u|he|she|they|we|we're|"
    r"everyone|everything|nothing|someone)\b)|"
    r",\s+(?=(?:i|i'm|im|i've|it|it's|that|this|you|he|she|they|we|so|then|been)\b)|"
    r",?\s+and\s+(?=\w+ing\b|(?:good|oh|omg|god|man|boy|wow|damn|lord|gosh)\b)|"
    r"\s+(?=(?:i'm|i've|i am)\s)",
    re.IGNORECASE,
)
TOKEN = re.compile(r"\d+(?:[.,]\d+)+|[\w'’]+(?:[-.][\w'’]+)*[+#]*|[^\w\s]", re.UNICODE)
# "about this", "for it", "… them": what only the conversation explains.
DEICTIC_OBJECT = re.compile(
    r"\b(?:about|of|on|for|with|at|from|to|into|in)\s+(?:it|this|that|these|those|them|here|"
    r"there)\b(?!\s+(?:\w+ing|\w+s)\b)|\b(?:it|this|that|them|these|those)\s*$|"
    r"\b(?:have|has|had|do|doing|did|done|read|reading|see|got|get|make|making|made|take|took|"
    r"try|tried|open|opening|find|found|\w+ing|\w+ed)\s+(?:it|them)\b",
    re.IGNORECASE,
)
# "this project", "this line": the server or the message at hand.
POINTING = re.compile(
    r"(?<=\s)(?:(?:this|these)\s+(?:\w+\s+)?|(?:that|those)\s+)(?:channel|server|discord|thread|chat|"
    r"conversation|project|challenge|scroll|scrolls|segment|segments|line|lines|letter|letters|"
    r"word|words|character|characters|image|images|picture|pic|photo|post|message|reading|"
    r"question|part|bit|one|ones|thing|things|stuff|guy|person|area|column|text|passage|"
    r"idea|point|case|way|topic|issue|problem|paper|version|model|data|dataset)\b"
    r"|(?<=\s)(?:this|these)\s*$",
    re.IGNORECASE,
)
# A moment, not a fact: "I'm opening rawtherapee now".
NOW = re.compile(r"\b(?:now|right now|atm|rn|today|tonight|at the moment)\s*$", re.IGNORECASE)
# "We went to the beach recently": an outing with a date is the author's too.
_WHEN = re.compile(
    r"\b(?:yesterday|recently|last (?:week|weekend|night|month|year|summer|\w+day)|"
    r"\w+ (?:days|weeks|months|years) ago|this (?:week|weekend|summer|month))\b"
)
MAX_WORDS = 32
MIN_CONTENT = 2
_LATER_FIRST_PERSON = {
    "i": "they", "i'm": "they're", "im": "they're", "i've": "they've", "i'd": "they'd",
    "i'll": "they'll", "my": "their", "me": "them", "mine": "theirs", "myself": "themself",
    "we": "they", "we're": "they're", "we've": "they've", "our": "their", "us": "them",
    "ourselves": "themselves", "ours": "theirs",
}  # fmt: skip
Said = tuple[str, str, str]  # (fact, type, rule name)


def clause_span(sentence: str, start: int) -> str:
    """The clause from ``start`` to where it ends."""
    rest = sentence[start:]
    m = _CLAUSE_CUT.search(rest, 1)
    return (rest[: m.start()] if m else rest).strip(" ,.!")


def rewrite(clause: str, name: str) -> Said | None:
    """(fact, type, rule) for a first-person clause, or None when it is not
    one worth remembering."""
    tokens = TOKEN.findall(clause.replace("’", "'"))
    if not tokens or len(tokens) > MAX_WORDS + 8 or w.SECOND_PERSON.search(clause):
        return None
    if DEICTIC_OBJECT.search(clause) or POINTING.search(clause):
        return None
    tokens = trim(tokens)
    low = [t.lower() for t in tokens]
    if not low:
        return None
    if low[0] == "my":
        return _my_clause(tokens, low, name)
    if low[0] in ("we", "we're", "we've"):
        return _we_clause(tokens, low, name)
    said = _i_clause(tokens, low)
    if said is None:
        return None
    words, kind, rule = said
    return join_words([name, *words]), kind, rule


def trim(tokens: list[str]) -> list[str]:
    while tokens and (tokens[-1].lower() in w.TRAILING or not tokens[-1][:1].isalnum()):
        tokens = tokens[:-1]
    return tokens


def is_adverb(word: str) -> bool:
    return word in w.ADVERBS or (len(word) > 4 and word.endswith("ly") and word not in w.LY_VERBS)


def _is_past(verb: str) -> bool:
    return verb in w.IRREGULAR_PAST or (len(verb) > 3 and verb.endswith("ed"))


def content_words(tokens: list[str]) -> int:
    return sum(
        1
        for t in tokens
        if len(t) >= 3 and t.lower() not in w.CONTENT_STOP and any(c.isalpha() for c in t)
    )


def later_persons(tokens: list[str]) -> list[str]:
    """Later first persons as "they" forms ("I was" → "they were")."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        low = tokens[i].lower()
        nxt = tokens[i + 1].lower() if i + 1 < len(tokens) else ""
        if low == "i" and nxt in ("am", "was"):
            out.extend(["they", "are" if nxt == "am" else "were"])
            i += 2
            continue
        out.append(_LATER_FIRST_PERSON.get(low, tokens[i]))
        i += 1
    return out


def _this_as_a(tokens: list[str]) -> list[str]:
    """ "I made this bowl in my class" → "… made a bowl …": what was shown
    stays, the pointing goes ("these" → nothing)."""
    out: list[str] = []
    for i, t in enumerate(tokens):
        low = t.lower()
        if low in ("this", "these") and i > 0 and i + 1 < len(tokens) and tokens[i + 1].isalpha():
            if low == "this":
                out.append("an" if tokens[i + 1][0].lower() in "aeio" else "a")
            continue
        out.append(t)
    return out


def join_words(tokens: list[str]) -> str:
    tokens = _this_as_a(tokens)
    text = ""
    for t in tokens:
        if not text or re.match(r"^[,.!?%)\]}]", t) or text.endswith(("(", "[", "{", "$")):
            text += t
        else:
            text += " " + t
    return w.LANGUAGES.sub(lambda m: m.group(1).capitalize(), text)


def possessive(name: str) -> str:
    return f"{name}'" if name.endswith("'") else f"{name}'s"


# -- "my …" -------------------------------------------------------------------------------------


def _my_clause(tokens: list[str], low: list[str], name: str) -> Said | None:
    """ "My field of expertise is …" → "X's field of expertise is …"."""
    for j in range(1, min(len(low), 7)):
        if low[j] in ("is", "are", "was", "were", "has", "have", "had"):
            key, rest = tokens[1:j], tokens[j:]
            break
        if low[j].endswith("'s") and j <= 4 and _is_after_s(low[j + 1 : j + 2]):
            # "my hat's off": "'s" is "is" — not in "my grandmother's letters"
            key, rest = tokens[1:j] + [tokens[j][:-2]], ["is", *tokens[j + 1 :]]
            break
    else:
        return None
    if not key or key[0].lower() in w.BAD_MY_KEYS:
        return None
    if any(t.lower() in ("and", "or", "i", ",") for t in key):
        return None
    obj = [t.lower() for t in rest[1:] if not is_adverb(t.lower())]
    if not obj or obj[0] in w.DEICTIC or obj[0] in w.INTENSIFIERS or obj[0] in ("like", "gonna"):
        return None
    relation = bool(w.RELATION.match(key[-1]))
    if content_words(rest[1:]) < (1 if relation else MIN_CONTENT):
        return None
    words = [possessive(name), *later_persons(key), *later_persons(rest)]
    return join_words(words), "relationship" if relation else "profile", "clause.my"


_AFTER_IS = w.words(
    "a an the not off on in from at been gone going getting still always also really very so "
    "pretty quite my their"
)


def _is_after_s(after: list[str]) -> bool:
    """Does "'s" read as "is" before this word?"""
    return bool(after) and (after[0] in _AFTER_IS or after[0].endswith("ing"))


# -- "we …" -------------------------------------------------------------------------------------


def _we_clause(tokens: list[str], low: list[str], name: str) -> Said | None:
    """ "We celebrated my daughter's birthday with a concert" → "X and others
    celebrated their daughter's birthday with a concert": what the author did
    with their family. Other "we" (a team, the server, everyone) is left."""
    family = any(w.RELATION.match(t.removesuffix("'s")) for t in low)
    if not family and not (_WHEN.search(" ".join(low)) and len(low) > 1 and _is_past(low[1])):
        return None
    as_i = {"we": "i", "we're": "i'm", "we've": "i've"}[low[0]]
    said = _i_clause([as_i, *tokens[1:]], [as_i, *low[1:]])
    if said is None:
        return None
    words, kind, _ = said
    plural = {"is": "are", "was": "were", "has": "have", "does": "do"}
    for i, word in enumerate(words):
        if word in plural:
            words[i] = plural[word]
            break
        if word.lower() not in w.ADVERBS:
            if low[0] == "we" and i < len(tokens) - 1:
                original = tokens[1 + i]
                if original.lower() != word.lower() and not _is_past(original.lower()):
                    words[i] = original  # "we love" stays "love", not "loves"
            break
    return join_words([name, "and", "others", *words]), kind, "clause.we"


# -- "I …" --------------------------------------------------------------------------------------

_NEGATIVE_AUX = {
    "don't": "does not", "dont": "does not", "didn't": "did not", "didnt": "did not",
    "can't": "cannot", "cant": "cannot", "cannot": "cannot",
}  # fmt: skip
_AUX = {"do": "does", "did": "did", "can": "can"}
_BE = {"am": ["is"], "'m": ["is"], "was": ["was"], "wasn't": ["was", "not"],
       "wasnt": ["was", "not"]}  # fmt: skip
_HAVE = {"have": ["has"], "'ve": ["has"], "had": ["had"], "haven't": ["has", "not"],
         "havent": ["has", "not"], "hadn't": ["had", "not"]}  # fmt: skip


def _i_clause(tokens: list[str], low: list[str]) -> tuple[list[str], str, str] | None:
    """The clause's words after the subject, in the third person, its type and rule."""
    i = 1
    if low[0] in ("i'm", "im"):
        head, kind = ["is"], "be"
    elif low[0] in ("i've", "ive"):
        head, kind = ["has"], "have"
    elif low[0] == "i" and len(low) > 1:
        head, kind = [], ""
    else:  # "I'd", "I'll": a wish, a plan of the moment
        return None
    adverbs: list[str] = []
    while i < len(low) and is_adverb(low[i]):
        adverbs.append(tokens[i])
        i += 1
    if i >= len(low) or low[i] in w.MODALS:
        return None
    if not head:
        word = low[i]
        if word in _BE:
            head, kind, i = list(_BE[word]), "be", i + 1
        elif word in _HAVE:
            head, kind, i = list(_HAVE[word]), "have", i + 1
        elif word in _NEGATIVE_AUX or word in _AUX:
            aux = _NEGATIVE_AUX.get(word) or _AUX[word]
            i += 1
            if i < len(low) and low[i] == "not":
                aux, i = ("cannot" if word == "can" else aux + " not"), i + 1
            while i < len(low) and is_adverb(low[i]):
                adverbs.append(tokens[i])
                i += 1
            if i >= len(low):
                return None
            verb = low[i]
            # "I do genealogy" (do + a noun) says something; "I don't know",
            # "I can see", "I did a bit of …" do not.
            if verb not in w.DURABLE_VERBS and not (word == "do" and content_words([verb])):
                return None
            if word == "do" and verb in w.TALK_VERBS:
                return None
            head, kind = aux.split(), "aux"
        else:
            if not word.isalpha() or word in w.DEICTIC:
                return None
            if word in w.TALK_VERBS and not _kept_with_object(word, low[i + 1 : i + 3]):
                return None
            shown = tokens[i] if _is_past(word) else third_person(word)
            head, kind, i = [shown], "verb", i + 1
    if kind in ("be", "have") and i < len(low) and low[i] == "not":
        head.append("not")
        i += 1
    while i < len(low) and is_adverb(low[i]):
        adverbs.append(tokens[i])
        i += 1
    rest, rest_low = tokens[i:], low[i:]
    if not rest or not _complement_ok(kind, head, rest_low):
        return None
    if content_words(rest) < MIN_CONTENT and not _short_ok(kind, rest_low):
        return None
    return (
        [*_with_adverbs(head, adverbs), *later_persons(rest)],
        _kind(kind, rest_low),
        f"clause.{kind}",
    )


def _kept_with_object(verb: str, after: list[str]) -> bool:
    """ "I love pottery", "I went to a support group" — not "I love that",
    "I like how …", "I like to think"."""
    if verb not in w.KEPT_WITH_OBJECT or not after:
        return False
    if after[0] in w.DEICTIC or after[0] in ("how", "seeing", "hearing", "reading", "your"):
        return False
    if verb in ("love", "loved", "like", "liked") and PREF_BAD_OBJECT.match(" ".join(after)):
        return False  # "I like the idea of …"
    if verb == "got" and after[0] in ("into", "in", "to", "up", "back", "home", "out", "off"):
        return False  # "I got into a fight", "I got home": an anecdote, not a fact
    return not (after[0] == "to" and len(after) > 1 and after[1] in w.TALK_VERBS)


def _with_adverbs(head: list[str], adverbs: list[str]) -> list[str]:
    """After the first auxiliary ("X is still", "X has also"), or before a
    plain verb ("X just signed up")."""
    if not adverbs:
        return head
    if head[0] in ("is", "was", "has", "had", "does", "did", "can", "cannot"):
        return [head[0], *adverbs, *head[1:]]
    return [*adverbs, *head]


def _complement_ok(kind: str, head: list[str], rest: list[str]) -> bool:
    first = rest[0]
    if not first[:1].isalnum():
        return False
    if first in w.DEICTIC:
        # "I painted that lake sunrise last year" names something; "I love
        # that", "I made this" do not.
        if first not in ("this", "that", "these", "those") or content_words(rest[1:]) < 2:
            return False
    if kind == "be":
        return _be_ok(head, rest)
    if kind == "have":
        return _have_ok(head, rest)
    after = rest[1:] if kind == "aux" else rest
    if after and (after[0] in w.DEICTIC and after[0] not in ("this", "that", "these", "those")):
        return False
    # "I keep saying", "I do not have it": the conversation again
    return not (after and after[0].endswith("ing") and after[0] in w.TALK_VERBS)


def _be_ok(head: list[str], rest: list[str]) -> bool:
    while len(rest) > 1 and rest[0] in w.INTENSIFIERS and rest[1] in w.KEEP_WITH_CONTENT:
        rest = rest[1:]  # "I'm so excited to meet other people in the community"
    first = rest[0]
    if NOW.search(" ".join(rest)):
        return False  # "I'm in the middle of doing that right now": a moment
    if "not" in head and first not in ("a", "an", "from", "in"):
        # "I'm not a papyrologist", "I'm not from here" — not "I'm not trying
        # to answer", a moment
        return bool(w.DURABLE_ADJECTIVE.match(first))
    if first in ("a", "an", "no"):
        return not NP_BAD_START.match(" ".join(rest[:3])) or (
            len(rest) > 2 and rest[1] == "fan" and rest[2] == "of"
        )
    if first in ("in", "from", "based", "located", "originally", "part", "the", "one", "on"):
        return not (first == "the" and len(rest) > 1 and rest[1] in ("same", "one", "opposite"))
    if first.endswith("ing"):
        # "I'm learning the piano", not "I was just interpolating", "I'm
        # wondering", "I'm going to have a go".
        if head[0] == "was" or first in w.TALK_VERBS or first in w.PASSING:
            return first in w.KEEP_WITH_CONTENT and content_words(rest[1:]) >= 2
        if NOW.search(" ".join(rest)):
            return False
        return not (first in ("going", "gonna") and len(rest) > 1 and rest[1] == "to")
    if first in w.KEEP_WITH_CONTENT:
        return (
            len(rest) > 1
            and rest[1] in ("to", "about", "in", "by", "with", "for", "of")
            and (content_words(rest[2:]) >= 2)
        )
    if w.DURABLE_ADJECTIVE.match(" ".join(rest[:2])) or w.DURABLE_ADJECTIVE.match(first):
        return True
    if first.isdigit() and len(rest) > 1 and rest[1] in ("years", "yo", "y/o"):
        return True  # "I'm 34 years old"
    if first.endswith("ed") and len(rest) > 2 and rest[1] in ("in", "to", "at", "with", "by"):
        return first not in w.TALK_VERBS and first not in w.PASSING  # "I'm involved in a group"
    return False


def _have_ok(head: list[str], rest: list[str]) -> bool:
    first = rest[0]
    if first in ("to", "got") and (first == "to" or (len(rest) > 1 and rest[1] == "to")):
        return False  # "I have to go"
    if first in w.TALK_VERBS or (first == "been" and len(rest) > 1 and rest[1] in w.TALK_VERBS):
        return False
    if first == "been" and len(rest) > 1 and rest[1] in w.PASSING:
        return rest[1] in w.KEEP_WITH_CONTENT and content_words(rest[2:]) >= 2
    if first.endswith("ed") or first in w.IRREGULAR_PAST or first in w.PARTICIPLES:
        return True
    if HAS_BAD.search(" ".join(rest[:4])) and "experience" not in rest:
        return False
    return not (first in ("no", "nothing") and "not" not in head)


def _short_ok(kind: str, rest: list[str]) -> bool:
    """A short complement that still says something: "X does genealogy",
    "X is not a papyrologist"."""
    if kind == "be" and len(rest) >= 2 and rest[0] in ("a", "an", "no") and len(rest[-1]) >= 5:
        return True
    return kind in ("aux", "verb") and len(rest) >= 1 and len(rest[0]) >= 5


def _kind(kind: str, rest: list[str]) -> str:
    if any(w.RELATION.match(t) for t in rest[:6]):
        return "relationship"
    if kind == "be" and rest[0] in ("a", "an"):
        return "profile"
    if kind in ("be", "have") and rest[0].endswith("ing"):
        return "project"
    if kind == "have" and rest[0] == "been" and len(rest) > 1 and rest[1].endswith("ing"):
        return "project"
    return "other"
