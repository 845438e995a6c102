"""Offline rule extractor, part 2: one builder per statement shape
("I work as …", "my sister is …") and the ordered rule table."""

from __future__ import annotations

import re

from memory.extract.rules.lexicon import (
    ADJECTIVES,
    ADV,
    EPHEMERAL_STATE,
    FAVOURITE,
    HAS_BAD,
    IM,
    NP_BAD_START,
    PREF_BAD_OBJECT,
    PROFILE_KEYS,
    RELATIONS,
    ROLE_MODIFIERS,
    ROLE_NOUNS,
    Rule,
    kept_adverbs,
    object_phrase,
    third_person,
    third_person_object,
    with_article,
)


def _build_identity(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    raw = m.group("obj")
    if NP_BAD_START.match(raw):
        return None
    obj = object_phrase(m)
    if obj is None or len(obj.split()) < 2:
        return None
    kind = "profile"
    if re.match(r"^(?:a|an)\s+(?:(?:big|huge|massive|great|long-time|longtime)\s+)?(?:fan of|"
                r"sucker for|lover of|believer in)\b", obj, re.IGNORECASE):  # fmt: skip
        kind = "preference"
    return f"{name} is {kept_adverbs(m)}{obj}", kind, 0.65


def _build_the_role(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    obj = object_phrase(m)
    if obj is None or len(obj.split()) < 3:
        return None
    return f"{name} is {obj}", "profile", 0.62


def _build_bare_role(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    obj = object_phrase(m)
    if obj is None:
        return None
    return f"{name} is {with_article(obj)}", "profile", 0.62


def _build_adjective(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    obj = object_phrase(m)
    if obj is None:
        return None
    low = obj.lower()
    if re.match(r"^(?:allergic|married|engaged|fluent|native|obsessed|passionate|interested|"
                r"into|fascinated|good|great|bad|terrible|decent)\b", low) and len(low.split()) < 2:  # fmt: skip
        return None  # "I'm into" with nothing after it
    kind = "profile"
    if re.match(r"^(?:married|engaged|divorced|widowed|single)\b", low):
        kind = "relationship"
    elif re.match(r"^(?:obsessed|passionate|interested|into|fascinated|keen|fond)\b", low):
        kind = "preference"
    return f"{name} is {kept_adverbs(m)}{obj}", kind, 0.62


def _build_from(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    obj = object_phrase(m)
    if obj is None or re.match(
        r"^(?:work|home|school|the office|the future|the past|their phone|mobile|the other)\b",
        obj,
        re.IGNORECASE,
    ):
        return None
    return f"{name} is {m.group('how').lower()} {obj}", "profile", 0.68


_VERB_TYPES = {
    "love": "preference", "like": "preference", "enjoy": "preference", "adore": "preference",
    "hate": "preference", "dislike": "preference", "prefer": "preference",
    "detest": "preference", "despise": "preference", "loathe": "preference",
    "play": "preference", "collect": "preference", "cook": "preference", "bake": "preference",
    "knit": "preference", "draw": "preference", "paint": "preference", "practice": "preference",
    "practise": "preference", "watch": "preference", "listen to": "preference",
    "study": "profile", "teach": "profile", "research": "profile", "speak": "profile",
    "code": "profile", "program": "profile", "coach": "profile", "volunteer": "profile",
    "own": "profile", "run": "profile", "studied": "profile", "taught": "profile",
    "majored in": "profile", "major in": "profile", "graduated from": "profile",
}  # fmt: skip


def _build_preference(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    raw = m.group("obj")
    if PREF_BAD_OBJECT.match(raw.strip()):
        return None
    obj = object_phrase(m)
    if obj is None:
        return None
    verb = re.sub(r"\s+", " ", m.group("verb").lower())
    return f"{name} {kept_adverbs(m)}{third_person(verb)} {obj}", "preference", 0.62


def _build_negative_preference(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    raw = m.group("obj")
    if PREF_BAD_OBJECT.match(raw.strip()):
        return None
    obj = object_phrase(m)
    if obj is None:
        return None
    neg = m.group("neg").lower()
    if neg.startswith("can"):
        return f"{name} can't stand {obj}", "preference", 0.6
    return f"{name} doesn't {m.group('verb').lower()} {obj}", "preference", 0.6


def _build_habit(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    obj = object_phrase(m)
    if obj is None:
        return None
    verb = re.sub(r"\s+", " ", m.group("verb").lower())
    if verb == "speak" and re.match(r"^(?:for|to|with|about|up|out|from)\b", obj, re.I):
        return None
    if verb in ("watch", "listen to", "play") and len(obj.split()) > 6:
        return None
    kind = _VERB_TYPES.get(verb, "profile")
    past = verb in ("studied", "taught", "majored in", "graduated from")
    verb_out = verb if past else third_person(verb.split()[0]) + verb[len(verb.split()[0]) :]
    return f"{name} {kept_adverbs(m)}{verb_out} {obj}", kind, 0.6


def _build_work(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    obj = object_phrase(m)
    if obj is None:
        return None
    prep = m.group("prep").lower()
    kind = "project" if prep == "on" else "profile"
    verb = "is working" if m.group("verb").lower().startswith("working") else "works"
    return f"{name} {kept_adverbs(m)}{verb} {prep} {obj}", kind, 0.7


def _build_live(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    obj = object_phrase(m)
    if obj is None:
        return None
    prep = re.sub(r"\s+", " ", m.group("prep").lower())
    kind = "relationship" if prep == "with" else "profile"
    return f"{name} {kept_adverbs(m)}lives {prep} {obj}", kind, 0.7


def _build_moved(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    obj = object_phrase(m)
    if obj is None:
        return None
    verb = re.sub(r"\s+", " ", m.group("verb").lower())
    prep = re.sub(r"\s+", " ", m.group("prep").lower())
    return f"{name} {verb} {prep} {obj}", "profile", 0.66


_PROJECT_VERBS = (
    r"(?:learning|studying|working on|building|developing|writing|making|creating|designing|"
    r"training for|preparing for|co-supervising|supervising|running|organi[sz]ing|"
    r"maintaining|translating|researching|saving up for|saving for|planning|teaching myself|"
    r"looking into|starting|opening|launching|"
    r"(?:only |just )?starting to learn|trying to learn|doing)"
)
_NEEDS_DETERMINER = {
    "writing", "making", "creating", "designing", "running", "planning", "doing", "starting",
    "opening", "launching",
}  # fmt: skip


def _build_project(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    verb = re.sub(r"\s+", " ", m.group("verb").lower())
    raw = m.group("obj").strip()
    if verb in _NEEDS_DETERMINER and not re.match(r"^(?:a|an|my|our)\b", raw, re.I):
        return None
    if verb == "doing" and not re.match(
        r"^(?:a|an|my)\s+(?:phd|ph\.d|master'?s|masters|degree|bachelor'?s|bsc|msc|ma|ba|"
        r"residency|internship|apprenticeship|postdoc|thesis|dissertation)\b",
        raw,
        re.I,
    ):
        return None
    obj = object_phrase(m)
    if obj is None:
        return None
    verb_out = third_person_object(verb)
    perfect = m.group("perf")
    aux = "has been" if perfect else "is"
    kind = "project"
    return f"{name} {aux} {kept_adverbs(m)}{verb_out} {obj}", kind, 0.62


def _build_started(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    obj = object_phrase(m)
    if obj is None:
        return None
    verb = re.sub(r"\s+", " ", m.group("verb").lower())
    return f"{name} started {verb} {obj}", "project", 0.6


def _build_duration(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    obj = object_phrase(m)
    if obj is None or not re.search(
        r"\b(?:for\s+(?:\d+|a|one|two|three|four|five|six|seven|eight|nine|ten|many|several|"
        r"over|more than|almost|about|nearly)\b.*\b(?:years?|decades?|months)\b|since\s+(?:\d{4}|"
        r"they were|childhood|high school|college|uni))",
        obj,
        re.I,
    ):
        return None
    verb = m.group("verb").lower()
    return f"{name} has been {verb} {obj}", "profile", 0.62


def _build_been_into(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    obj = object_phrase(m)
    if obj is None:
        return None
    verb = re.sub(r"\s+", " ", m.group("verb").lower())
    return f"{name} has been {verb} {obj}", "preference", 0.62


def _build_has(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    raw = m.group("obj")
    if HAS_BAD.search(" ".join(raw.split()[:4])) and not re.search(r"\bexperience\b", raw, re.I):
        return None
    obj = object_phrase(m)
    if obj is None:
        return None
    kind = "relationship" if re.search(rf"\b{RELATIONS}s?\b", obj, re.I) else "profile"
    verb = "owns" if m.group("verb").strip().lower() == "own" else "has"
    return f"{name} {verb} {obj}", kind, 0.56


def _possessive(name: str) -> str:
    return f"{name}'" if name.endswith("'") else f"{name}'s"


def _build_my_is(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    raw = m.group("obj").strip()
    if EPHEMERAL_STATE.match(raw) and not re.match(r"^(?:something|nothing)\b", raw):
        return None  # "my dog is sleeping", "my kids are so excited" — a moment, not a fact
    obj = object_phrase(m)
    if obj is None:
        return None
    key = re.sub(r"\s+", " ", m.group("key").lower())
    if re.match(FAVOURITE, key):
        kind = "preference"
    elif re.fullmatch(RELATIONS + r"(?:'s name|'s birthday)?", key):
        kind = "relationship"
    else:
        kind = "profile"
    return f"{_possessive(name)} {key} {m.group('be').lower()} {obj}", kind, 0.66


def _build_relation_does(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    raw = m.group("obj").strip()
    verb = re.sub(r"\s+", " ", m.group("verb").lower())
    if verb == "is" and EPHEMERAL_STATE.match(raw):
        return None
    obj = object_phrase(m)
    if obj is None:
        return None
    rel = m.group("rel").lower()
    return f"{_possessive(name)} {rel} {verb} {obj}", "relationship", 0.62


def build_relation_apposition(m: re.Match[str], name: str) -> tuple[str, str, float] | None:
    obj = object_phrase(m)
    if obj is None:
        return None
    rel = m.group("rel").lower()
    return f"{_possessive(name)} {rel} is {obj}", "relationship", 0.6


def _r(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


RULES: tuple[Rule, ...] = (
    Rule("from", _r(rf"{IM}(?P<how>originally from|from|based in|based out of|located in)"
                     r"\s+(?P<obj>.+)"), _build_from),  # fmt: skip
    Rule("identity", _r(rf"{IM}{ADV}(?P<obj>(?:a|an)\s+.+)"), _build_identity),
    Rule("the_role", _r(rf"{IM}(?P<obj>the\s+(?:one who|one that|only one|first|last|"
                         r"author|maintainer|creator|founder|co-founder|owner|lead|organi[sz]er|"
                         r"admin|moderator|host|editor|president|head|captain|least|most)\b.+)"),
          _build_the_role),  # fmt: skip
    Rule("bare_role", _r(rf"{IM}{ADV}(?P<obj>(?:{ROLE_MODIFIERS}[\s-]+){{1,2}}"
                          rf"{ROLE_NOUNS}s?\b.*)"), _build_bare_role),  # fmt: skip
    Rule("adjective", _r(rf"{IM}{ADV}(?P<obj>{ADJECTIVES}\b.*)"), _build_adjective),
    Rule("negative_pref", _r(r"i\s+(?P<neg>don't|do not|dont|can't|cannot|cant)\s+"
                              r"(?:really\s+)?(?P<verb>like|enjoy|love|stand)\s+(?P<obj>.+)"),
          _build_negative_preference),  # fmt: skip
    Rule("preference", _r(rf"i\s+{ADV}(?P<verb>love|like|enjoy|adore|hate|dislike|prefer|"
                           r"detest|despise|loathe)\s+(?P<obj>.+)"), _build_preference),  # fmt: skip
    Rule("work", _r(rf"i\s+{ADV}(?P<verb>work)\s+(?P<prep>as|at|for|in|on|with|from)\s+"
                     r"(?P<obj>.+)"), _build_work),  # fmt: skip
    Rule("working", _r(rf"{IM}{ADV}(?P<verb>working)\s+(?P<prep>as|at|for)\s+(?P<obj>.+)"),
          _build_work),  # fmt: skip
    Rule("live", _r(rf"i\s+{ADV}live\s+(?P<prep>in|near|on|with|outside|just outside|"
                     r"close to|next to|by)\s+(?P<obj>.+)"), _build_live),  # fmt: skip
    Rule("moved", _r(r"i\s+(?:just\s+|recently\s+|finally\s+)?(?P<verb>moved|relocated|grew up|"
                      r"was born|was raised|come|came)\s+(?P<prep>to|from|back to|here from|in|"
                      r"on|near|outside)\s+(?P<obj>.+)"), _build_moved),  # fmt: skip
    Rule("been_into", _r(r"i(?:'ve|ve| have)\s+(?:always\s+)?been\s+(?P<verb>into|passionate about|"
                          r"interested in|obsessed with|fascinated by|a fan of|a big fan of)\s+"
                          r"(?P<obj>.+)"), _build_been_into),  # fmt: skip
    Rule("duration", _r(r"i(?:'ve|ve| have)\s+been\s+(?P<verb>playing|doing|practi[cs]ing|"
                         r"using|speaking|reading|watching|making|writing|drawing|painting|"
                         r"coding|programming|running|teaching|studying|working)\s+(?P<obj>.+)"),
          _build_duration),  # fmt: skip
    Rule("project", _r(rf"(?:{IM}|i(?P<perf>'ve|ve| have)\s+been\s+){ADV}"
                        rf"(?P<verb>{_PROJECT_VERBS})\s+(?P<obj>.+)"), _build_project),  # fmt: skip
    Rule("started", _r(r"i\s+(?:just\s+|recently\s+)?(?:started|began)\s+(?P<verb>learning|"
                        r"studying|playing|practi[cs]ing|working on|building|writing|"
                        r"training for|to learn)\s+(?P<obj>.+)"), _build_started),  # fmt: skip
    Rule("habit", _r(rf"i\s+{ADV}(?P<verb>study|studied|teach|taught|research|speak|play|"
                      r"practice|practise|collect|own|code|program|coach|volunteer|cook|bake|"
                      r"knit|draw|paint|run|watch|listen to|majored in|major in|graduated from)"
                      r"\s+(?P<obj>.+)"), _build_habit),  # fmt: skip
    Rule("has", _r(r"i(?P<verb>\s+have got|\s+have|'ve got|ve got|\s+own)\s+(?P<obj>(?:a|an|two|"
                    r"three|four|five|six|\d+|several|many|my own|over|more than|about|around|"
                    r"almost|nearly)\b.+)"), _build_has),  # fmt: skip
    Rule("my_is", _r(rf"my\s+(?P<key>{FAVOURITE}|{PROFILE_KEYS}|{RELATIONS}(?:'s name|"
                      r"'s birthday)?)\s+(?P<be>is|are|was)\s+(?P<obj>.+)"), _build_my_is),  # fmt: skip
    Rule("relation_does", _r(rf"my\s+(?P<rel>{RELATIONS})\s+(?P<verb>is|lives|works|studies|"
                              r"teaches|loves|likes|has|plays|speaks|owns|runs|just moved|moved|"
                              r"was born|grew up)\s+(?P<obj>.+)"), _build_relation_does),  # fmt: skip
)  # fmt: skip

APPOSITION = re.compile(
    rf"\bmy\s+(?P<rel>{RELATIONS})\s*(?:\(|,)\s*(?P<obj>(?:a|an)\s+[^,()]+)", re.IGNORECASE
)
PRONOUN_START = re.compile(
    r"(?<![\w'])(?:i|im|i'm|i've|ive|my|we|we're|we've)(?![\w'])", re.IGNORECASE
)
