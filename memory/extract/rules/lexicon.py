"""Offline rule extractor, part 1: text preparation, word lists and the
patterns the rules are built from, plus small phrase helpers."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from memory.text import compact

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})
_CODE_BLOCK = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_URL = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
_DISCORD_TOKENS = re.compile(r"<a?:\w+:\d+>|<(?:@[!&]?|#)\d+>|<t:\d+(?::\w)?>")
_QUOTED = re.compile(r"\"[^\"\n]{0,400}\"|“[^”\n]{0,400}”|«[^»\n]{0,400}»")
_QUOTE_LINE = re.compile(r"^\s*>.*$", re.MULTILINE)
_SPOILER = re.compile(r"\|\|.*?\|\|", re.DOTALL)
_MARKDOWN = re.compile(r"(\*\*|__|~~|\*|(?<!\w)_|_(?!\w))")
SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\s*\n+\s*|\s+/\s+|(?<=\.\.\.)")
_EMOTICON = re.compile(
    r"(?:[:;=8xX][-']?[()\[\]dDpPoO3/\\|*]+|<3|\^\^|:'\)+|\bT_T\b|\bxD\b)(?=\s|$)"
)


def _is_emoji(ch: str) -> bool:
    cp = ord(ch)
    return (
        0x1F000 <= cp <= 0x1FAFF
        or 0x2600 <= cp <= 0x27BF
        or 0x2B00 <= cp <= 0x2BFF
        or unicodedata.category(ch) == "So"
    )


def prepare(text: str) -> str:
    """Strip what is not the author's own prose: code, URLs, quotes, markup."""
    value = re.sub("[\ud800-\udfff]", "", text)
    value = _CODE_BLOCK.sub("\n", value)
    value = _INLINE_CODE.sub(" ", value)
    value = value.translate(_APOSTROPHES)  # after code: "`" is also a typed apostrophe
    value = _QUOTE_LINE.sub("\n", value)
    value = _SPOILER.sub(" ", value)
    value = _URL.sub(" ", value)
    value = _DISCORD_TOKENS.sub(" ", value)
    value = _QUOTED.sub(" ", value)  # someone else's words, or a mention of words
    value = _MARKDOWN.sub("", value)
    value = "".join(" " if unicodedata.category(c) == "Cc" and c != "\n" else c for c in value)
    return value


# Words that may sit between the start of a clause and the pronoun.
LEAD_IN = re.compile(
    r"(?:\b(?:and|but|so|also|because|cause|cuz|since|though|although|plus|btw|fyi|yes|yeah|"
    r"yep|yup|well|oh|ah|actually|honestly|anyway|anyways|lol|haha|ok|okay|hi|hey|hello|tbh|"
    r"ngl|fwiw|personally|now|currently|hmm|sure|not only|as for me|for context|fun fact|"
    r"first of all|by the way|in fact|funnily enough|these days|nowadays|however|still|again|"
    r"sorry|thanks|thank you|cheers|yesterday|today|tonight|recently|lately|the other day|"
    r"(?:last|this|next)\s+(?:week|weekend|night|month|year|summer|winter|spring|fall|autumn|"
    r"morning|evening|time|mon|tue|wed|thu|fri|sat|sun|\w+day)|"
    r"(?:a few|a couple of|two|three|\d+)\s+(?:days|weeks|months|years)\s+ago)\W*|@\S+\s*)$",
    re.IGNORECASE,
)
CONJUNCTION = re.compile(
    r"(?:and|but|so|because|cause|cuz|since|though|although|plus|however|whereas)\b", re.I
)
CLAUSE_END = re.compile(r"(?:^|[,;:(\-–—!.]|\b(?:and|but|so))\s*$")
HYPOTHETICAL_START = re.compile(
    r"^\W*(?:if|when|whenever|unless|whether|maybe|perhaps|hopefully|imagine|suppose|supposing|"
    r"pretend|what if|wish|once|someday|one day|even if|as if|in case)\b",
    re.IGNORECASE,
)
JOKE = re.compile(r"(?:^|\s)/s\b|\b(?:jk|j/k|kidding|joking|sarcasm)\b", re.IGNORECASE)

_KEEP_ADVERBS = {"really", "absolutely", "totally", "also", "genuinely", "truly", "still"}
ADV = r"(?P<adv>(?:(?:really|absolutely|totally|also|genuinely|truly|still|now|currently|" \
    r"actually|honestly|just|kinda|literally|basically|definitely|seriously|pretty much|" \
    r"kind of|sort of|do|so)\s+)*)"  # fmt: skip
IM = r"(?:i'm|i am|im)\s+"

_DEICTIC_START = re.compile(
    r"^(?:it|its|it's|this|that|these|those|them|here|there|him|you|your|yours|u|ur|ya|y'all|"
    r"yall|what|how|why|where|who|whom|which|such|everyone|everybody|all of you|to see|seeing|"
    r"reading this|the idea|the way|the fact|when|if|one|some of|lots of them|both|other|"
    r"the other|another|the same|the rest|more|some more)\b",
    re.IGNORECASE,
)
_SECOND_PERSON = re.compile(
    r"\b(?:you|your|yours|u|ur|ya|y'all|yall|this|these|those|here)\b", re.IGNORECASE
)
_CONTEXTUAL = re.compile(
    r"\b(?:this|these|that|those)\s+(?:channel|server|discord|thread|chat|conversation|one|"
    r"thing|things|stuff|post|message|idea|image|picture|pic|photo|video|song|letter|word|"
    r"line|reading|question|part|bit|guy|person)\b",
    re.IGNORECASE,
)
_RELATIVE_TIME_ONLY = re.compile(
    r"^(?:today|tomorrow|yesterday|tonight|soon|now|right now|next \w+|this \w+|last \w+|"
    r"in \w+ (?:days?|weeks?|hours?|minutes?))$",
    re.IGNORECASE,
)
# Where an object phrase ends: punctuation, another clause, a filler word.
_OBJECT_STOP = re.compile(
    r"\s*(?:[.!?;:()\[\]{}\"“”«»]|\s[-–—]\s|--|\.\.\.|\s/\s|"
    r",\s*(?:and\s+|but\s+|so\s+)?(?:i|i'm|im|i've|we|you|he|she|they|it|that|this|which|who|"
    r"then|so|but|because|although|though|lol|haha|lmao|hence|however|unless|while)\b|"
    r"\s(?:but|because|cause|'cause|cuz|coz|cos|since|although|though|tho|so|unless|which|if|"
    r"whereas|while|"
    r"whenever|lol|lmao|lmfao|haha\w*|hehe\w*|btw|tbh|imo|imho|ngl|xd|rn|anyway|anyways|"
    r"and\s+(?:i|i'm|im|i've|my|our|have|am|was|will|can|would|do|did|got|think|then|so|now|not|it|"
    r"that|this|we|you|he|she|they|want|need|hope|also)|or\s+(?:i|something|whatever|so))\b)",
    re.IGNORECASE,
)
_TRAILING_FILLER = re.compile(
    r"(?:\s+(?:too|as well|lol|haha|tho|though|btw|honestly|ngl|tbh|lmao|xd|ok|okay|yeah|"
    r"and|or|but|so|a lot|very much|so much|anyway|for|in|on|at|with|to|of|from|about|by|as|"
    r"the|a|an|their|like|just|really|such|that|there|then|right now|at the moment|atm|"
    r"(?:for|with|of|on|about) (?:that|it|them)|(?:i|they) (?:use|do)))+$",
    re.IGNORECASE,
)

RELATIONS = (
    r"(?:wife|husband|partner|spouse|girlfriend|boyfriend|gf|bf|fianc[eé]e?|sister|brother|"
    r"sibling|twin|mom|mum|mother|dad|father|parents|son|daughter|kids?|children|child|baby|"
    r"cousin|aunt|uncle|niece|nephew|grandma|grandpa|grandmother|grandfather|grandparents|"
    r"best friend|friend|roommate|flatmate|housemate|boss|coworker|co-worker|colleague|"
    r"supervisor|advisor|mentor|dog|cat|puppy|kitten|pet|bird|parrot|rabbit|bunny|hamster)"
)
PROFILE_KEYS = (
    r"(?:name|nickname|username|birthday|bday|age|job|occupation|profession|role|major|"
    r"field|specialty|speciality|research|research area|area of research|thesis|dissertation|"
    r"hometown|home town|native language|first language|mother tongue|pronouns|timezone|"
    r"time zone|star sign|zodiac sign|handle|day job|background|goal|dream|passion|hobby|"
    r"hobbies|main hobby|career|plan for the future)"
)
FAVOURITE = r"(?:favou?rite|fav|fave)\s+[\w'&-]+(?:\s+[\w'&-]+){0,2}?"
ROLE_NOUNS = (
    r"(?:student|researcher|engineer|developer|programmer|designer|artist|teacher|professor|"
    r"lecturer|nurse|doctor|physician|scientist|writer|author|translator|historian|linguist|"
    r"archaeologist|archeologist|papyrologist|paleographer|palaeographer|classicist|"
    r"philologist|hellenist|epigrapher|hobbyist|amateur|freelancer|musician|photographer|"
    r"lawyer|chef|baker|journalist|editor|librarian|student|postdoc|mathematician|physicist|"
    r"chemist|biologist|economist|accountant|consultant|analyst|architect|pilot|farmer|"
    r"mechanic|electrician|plumber|carpenter|veteran|retiree|intern|apprentice|candidate)"
)
ROLE_MODIFIERS = (
    r"(?:phd|ph\.d\.|grad|graduate|undergrad|undergraduate|master's|masters|college|"
    r"university|uni|high school|highschool|med|medical|law|art|exchange|first-year|"
    r"second-year|third-year|final-year|full-time|part-time|freelance|senior|junior|lead|"
    r"software|web|game|data|research|doctoral|retired|professional|amateur|self-taught|ml|"
    r"ai|computer|history|classics|greek|latin)"
)
ADJECTIVES = (
    r"(?:vegan|vegetarian|pescatarian|left-handed|right-handed|ambidextrous|colou?rblind|"
    r"married|engaged|single|divorced|widowed|retired|pregnant|bilingual|trilingual|"
    r"multilingual|autistic|dyslexic|deaf|diabetic|celiac|coeliac|self-taught|self-employed|"
    r"unemployed|introverted|extroverted|lactose intolerant|gluten intolerant|allergic to|"
    r"married to|engaged to|fluent in|native to|obsessed with|passionate about|interested in|"
    r"into|fascinated by|good at|great at|bad at|terrible at|decent at|keen on|fond of|"
    r"american|british|english|scottish|welsh|irish|canadian|australian|german|french|"
    r"italian|spanish|portuguese|brazilian|mexican|argentinian|argentine|chilean|colombian|"
    r"peruvian|dutch|belgian|swiss|austrian|polish|czech|slovak|hungarian|romanian|"
    r"bulgarian|serbian|croatian|russian|ukrainian|greek|turkish|swedish|norwegian|danish|"
    r"finnish|icelandic|estonian|latvian|lithuanian|japanese|chinese|korean|vietnamese|"
    r"thai|filipino|indonesian|malaysian|indian|pakistani|bangladeshi|iranian|persian|"
    r"israeli|egyptian|moroccan|nigerian|kenyan|ethiopian|south african|new zealander|kiwi)"
)
NP_BAD_START = re.compile(
    r"^(?:a|an)\s+(?:bit|little|tad|lot|lotta|bunch|couple|few|moment|sec|second|minute|"
    r"while|way|means|reason|question|part|step|mess|disaster|idiot|moron|dummy|dumbass|fool|"
    r"clown|joke|total idiot|complete idiot|genius|liar|hypocrite|good|great|nice|big deal|"
    r"huge deal|result|case|matter|sort of|kind of|problem|pain|mix|mixture|wreck|bundle|"
    r"ball of|nervous wreck|fan$)\b",
    re.IGNORECASE,
)
HAS_BAD = re.compile(
    r"\b(?:question|questions|problem|problems|issue|issues|doubt|doubts|idea|ideas|theory|"
    r"suggestion|suggestions|feeling|hunch|guess|hard time|good time|great time|tough time|"
    r"look|sec|second|minute|moment|chance|meeting|call|headache|cold|fever|bug|typo|"
    r"confession|request|thought|thoughts|comment|point|clue|tip|favou?r|proposal|update|"
    r"appointment|deadline|interview|date|plan|plans|class|exam|test|lot of work|work to do|"
    r"stuff|things|fun|time|trouble|difficulty|feeling|hard|similar|same|question for|"
    r"reading|readings|reconstruction|translation|transcription|draft|version|copy|"
    r"screenshot|image|images|picture|pic|photo|link|file|list|few|bit|note|notes|"
    r"suspicion|sense|impression|hypothesis|answer|solution|fix|follow-up|go|try|word|"
    r"vague|quick|small|slight|different|better|another|couple)\b",
    re.IGNORECASE,
)
PREF_BAD_OBJECT = re.compile(
    r"^(?:to\s+(?:see|hear|know|think|say|ask|read|share|add|help|point|mention|believe|"
    r"imagine|agree|check|try|have|get|be)|how|when|what|where|the idea|the way|the fact|"
    r"the thought|the sound|that|this|it|talking to|seeing|hearing|reading)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    build: Callable[[re.Match[str], str], tuple[str, str, float] | None]


def third_person(verb: str) -> str:
    v = verb.lower()
    irregular = {"am": "is", "'m": "is", "have": "has", "do": "does", "go": "goes"}
    if v in irregular:
        return irregular[v]
    if re.search(r"(?:s|sh|ch|x|z|o)$", v):
        return v + "es"
    if re.search(r"[^aeiou]y$", v):
        return v[:-1] + "ies"
    return v + "s"


_PRONOUNS = [
    (re.compile(r"\bi'm\b|\bim\b", re.IGNORECASE), "they're"),
    (re.compile(r"\bi've\b", re.IGNORECASE), "they've"),
    (re.compile(r"\bi'd\b", re.IGNORECASE), "they'd"),
    (re.compile(r"\bi'll\b", re.IGNORECASE), "they'll"),
    (re.compile(r"\bi\b", re.IGNORECASE), "they"),
    (re.compile(r"\bmy\b", re.IGNORECASE), "their"),
    (re.compile(r"\bme\b", re.IGNORECASE), "them"),
    (re.compile(r"\bmine\b", re.IGNORECASE), "theirs"),
    (re.compile(r"\bmyself\b", re.IGNORECASE), "themself"),
]


def third_person_object(obj: str) -> str:
    for pattern, repl in _PRONOUNS:
        obj = pattern.sub(repl, obj)
    return obj


def _cut_object(raw: str, max_words: int = 18) -> str | None:
    """The object phrase up to where the clause ends, tidied; None if unusable."""
    m = _OBJECT_STOP.search(raw)
    obj = raw[: m.start()] if m else raw
    cut = next((i for i, ch in enumerate(obj) if _is_emoji(ch)), None)
    if cut is not None:
        obj = obj[:cut]
    obj = _EMOTICON.sub(" ", obj)
    obj = re.sub(r"\s+", " ", obj).strip(" ,-–—'*_~")
    for _ in range(3):
        stripped = _TRAILING_FILLER.sub("", obj).strip(" ,-–—")
        if stripped == obj:
            break
        obj = stripped
    if not obj or not compact(obj):
        return None
    if len(obj.split()) > max_words:
        return None
    if _SECOND_PERSON.search(obj) or _CONTEXTUAL.search(obj) or _RELATIVE_TIME_ONLY.match(obj):
        return None
    if not any(len(w) >= 3 and w.lower() not in _FUNCTION_WORDS for w in re.findall(r"\w+", obj)):
        return None  # "I love to." — nothing left to remember
    return obj


_FUNCTION_WORDS = {
    "the", "and", "for", "with", "from", "about", "that", "them", "they", "their", "theirs",
    "there", "then", "than", "too", "not", "all", "any", "some", "one", "out", "off", "over",
    "into", "onto", "upon", "way", "lot", "lots", "much", "more", "most", "very", "really",
    "just", "also", "still", "even", "well", "now", "got", "get", "doing", "being", "been",
}  # fmt: skip
EPHEMERAL_STATE = re.compile(
    r"^(?:so|very|too|really|super|such|kinda|pretty|quite|a bit|a little|excited|happy|sad|"
    r"tired|sick|ill|busy|angry|mad|upset|bored|hungry|sleepy|stressed|worried|scared|"
    r"nervous|glad|proud|sure|fine|ok|okay|good|great|awesome|amazing|cool|here|there|home|"
    r"out|away|back|gone|asleep|awake|ready|late|early|done|over|coming|going|getting|"
    r"having|not|no longer|currently|now|always|never|\w+ing)\b",
    re.IGNORECASE,
)


def kept_adverbs(m: re.Match[str]) -> str:
    words = [w for w in (m.groupdict().get("adv") or "").lower().split() if w in _KEEP_ADVERBS]
    return "".join(w + " " for w in words)


def with_article(np: str) -> str:
    first = np.split()[0].lower()
    if re.match(r"^(?:a|an|the|my|their)$", first):
        return np
    vowel = first[0] in "aeio" or (first[0] == "u" and not first.startswith(("uni", "use")))
    return ("an " if vowel else "a ") + np


def object_phrase(m: re.Match[str], group: str = "obj", *, deictic_ok: bool = False) -> str | None:
    raw = m.group(group)
    if not deictic_ok and _DEICTIC_START.match(raw.strip()):
        return None
    obj = _cut_object(raw)
    if obj is None:
        return None
    return third_person_object(obj)
