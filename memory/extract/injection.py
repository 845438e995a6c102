"""Instruction, injection and secret rejection for text that may be stored as a fact.

Text is first read the way a reader (or a model) would see it: NFKC
(full-width letters become ASCII), every default-ignorable code point removed
(zero-width and bidi controls, joiners, variation selectors, Mongolian and
Khmer invisibles, musical beam controls …), Unicode "tag" characters decoded
to the ASCII they hide, spaced-out letters ("s y s t e m", "s.y.s.t.e.m")
joined. Each check then runs on that form and on its look-alike readings:
Cyrillic/Greek letters inside Latin words ("ѕуѕtem") and digits or symbols
inside words ("passw0rd", "1gnore", "ru1es", "p@ss", "$ecret"). Any of these
rejects the text:

* directive markup: ``[[…]]``, chat-template tokens (``<|im_start|>``,
  ``[INST]``, ``<<SYS>>``) or a leading role label (``system:``);
* injection vocabulary as **whole words** — never substrings, so
  "systematic", "ecosystem" and "developers" are kept: ``system``,
  ``developer``, ``instruction(s)``, ``policy``/``policies``, ``jailbreak``,
  ``override``. They are rejected in every sense, accepting that "Ana is a
  developer." is lost: a fact store must not become a place where such text
  can hide;
* ``prompt`` only in its injection senses. "prompt" is also an everyday
  adjective ("prompt delivery", "a prompt reply"), so it is rejected only as
  the *noun*: after a qualifier (system, hidden, initial, original, your, my,
  the, this, previous, above …) or after reveal/show/print/repeat/leak …,
  and *not* followed by another content word (a following content word makes
  it the adjective: "the prompt delivery of parcels"); also "prompt
  injection/engineering/leak" and a "prompt:" label;
* override phrases: ignore/disregard/bypass/pay no attention to/do not
  follow … previous/prior/earlier/above/original or … the rules/directions
  (up to three words apart); ignore/disregard … everything/all/whatever
  you were told (said, taught …) or everything before/so far; forget
  all/everything/the previous …; "from now
  on", "you are now", "you are no longer", "you must", "you will now"; "act
  as if", "pretend you", "you have no rules"; "do anything now", "developer
  mode"; print/reveal/show/repeat your rules/instructions/prompt/setup/
  settings, "what are your rules";
* output directives: always/never + reply/respond/say/output/answer/print/
  mention/reveal in the *base* form — the imperative ("Always reply in
  French.") is rejected, a description of a person ("Ana always replies
  late.") is kept;
* secrets (``memory.sensitive``): password and its abbreviations (pw, pwd,
  passwd, passcode …), keys, tokens, credentials, one-time and recovery codes,
  seed phrases, "my pin", and text shaped like a key (``sk-…``, GitHub/Slack/
  AWS/Discord tokens, JWTs, bearer values, PEM headers, long hex).

The same override phrases, output directives and secret words in German,
Spanish, Russian and Japanese are in ``memory.extract.injection_i18n``.
"""

from __future__ import annotations

import re
import unicodedata

from memory.extract.injection_i18n import ALWAYS_NEVER_I18N, OVERRIDE_I18N, SECRETS_I18N
from memory.sensitive import SECRET_SHAPES, SECRET_WORDS
from memory.text import fold_lookalikes, scrub, strip_invisible

# Tag characters TAG SPACE … TAG TILDE render as nothing but models read them
# as ASCII; they are decoded so the hidden text is checked too. The other tag
# code points (language tag, cancel tag) are dropped with the rest of the
# default-ignorables.
_TAGS = re.compile("[\U000e0020-\U000e007e]")
_WS = re.compile(r"\s+")
# Three or more single letters/digits separated by one non-word char: "s y s t e m".
_SPACED = re.compile(r"(?<![^\W_])(?:[^\W_][\s.\-_*·]){3,}[^\W_](?![^\W_])", re.UNICODE)


def match_forms(text: str) -> tuple[str, ...]:
    """What a reader (or a model) sees, lowercased, then its look-alike readings."""
    value = scrub(text or "")
    value = _TAGS.sub(lambda m: chr(ord(m.group(0)) - 0xE0000), value)
    value = unicodedata.normalize("NFKC", strip_invisible(value)).casefold()
    value = strip_invisible(value.replace("\u2019", "'").replace("\u2018", "'"))
    value = _SPACED.sub(lambda m: re.sub(r"[\s.\-_*·]", "", m.group(0)), value)
    base = _WS.sub(" ", value).strip()
    return tuple(dict.fromkeys((base, fold_lookalikes(base), fold_lookalikes(base, one="l"))))


def _words(*words: str) -> str:
    return r"\b(?:" + "|".join(words) + r")\b"


_DIRECTIVE = re.compile(
    r"\[\[.*?\]\]|\[\[|\]\]|<\|[^|>]{0,40}\|>|\[/?inst\]|<</?sys>>|"
    r"^\W*(?:system|assistant|developer|user)\s*:|###\s*(?:system|instruction)",
    re.DOTALL,
)
_STRICT_WORDS = re.compile(
    _words(
        "system", "developer", "instruction", "instructions", "policy", "policies",
        "jailbreak", "jailbreaks", "jailbroken", "jailbreaking", "override", "overrides",
        "overriding", "overridden",
    )
)  # fmt: skip
_PROMPT_QUALIFIER = (
    r"(?:system|developer|hidden|initial|original|secret|jailbreak|full|entire|previous|"
    r"above|new|your|my|the|this|that|these|those|base|master|internal)"
)
_PROMPT_NOUN_FOLLOWERS = (
    r"(?:injection|injections|engineering|engineer|leak|leaks|leaking|template|templates|"
    r"text|instructions|hacking|attack|attacks|is|was|are|were|says|said|and|or|to|of|for|"
    r"in|above|below|verbatim|again|word|words|exactly)"
)
# "prompt" as a noun: not followed by a content word ("the prompt delivery"
# is the adjective) unless that word is one of the followers above.
_PROMPT_NOUN = rf"prompts?\b(?!\s+(?!{_PROMPT_NOUN_FOLLOWERS}\b)[^\W\d_]{{2,}})"
_PROMPT = re.compile(
    rf"\b{_PROMPT_QUALIFIER}\s+(?:\w+\s+)?{_PROMPT_NOUN}"
    r"|\bprompts?\s+(?:injection|injections|engineering|leak|leaks|leaking|hacking|attack)\b"
    r"|\bprompt\s*:"
    rf"|\b(?:reveal|show|print|repeat|dump|leak|output|give|tell)\b.{{0,30}}\b{_PROMPT_NOUN}"
)
# What an injection tells the model to drop.
_RULE_NOUNS = (
    r"(?:rules|directions|directives|guidelines|guidance|orders|commands|restrictions|"
    r"constraints|limitations|filters|safeguards|guardrails|programming|instructions)"
)
# Imperatives only ("ignore", not "ignores"): "Ana ignores the rules" describes her.
_DROP_VERBS = (
    r"(?:ignore|ignoring|disregard|disregarding|bypass|bypassing|set\s+aside|"
    r"pay(?:ing)?\s+no\s+(?:more\s+)?(?:attention|heed|mind)\s+to|"
    r"(?:don'?t|do\s+not|stop|quit)\s+(?:follow(?:ing)?|obey(?:ing)?|listen(?:ing)?\s+to))"
)
_EARLIER = rf"(?:previous|prior|earlier|above|preceding|original|initial|{_RULE_NOUNS})"
_REVEAL_VERBS = (
    r"(?:print|reveal|show|repeat|dump|leak|output|display|tell|give|share|list|recite|echo|"
    r"disclose|expose)"
)
# "Everything", and the other words for all of what came before.
_ALL_OF_IT = r"(?:everything|all|anything|whatever|what|all\s+that|everything\s+that)"
_OVERRIDE = re.compile(
    rf"\b{_DROP_VERBS}\b(?:\W+\w+){{0,3}}?\W+{_EARLIER}\b"
    # Everything it was told, however said ("disregard everything you were
    # told before", "ignore whatever you've been taught"), or everything so far.
    rf"|\b{_DROP_VERBS}\s+(?:about\s+)?(?:all\s+(?:of\s+)?)?{_ALL_OF_IT}\b"
    r"(?:\W+\w+){0,4}?\W+(?:told|said|taught|given|instructed|asked|programmed|trained)\b"
    rf"|\b{_DROP_VERBS}\s+{_ALL_OF_IT}\s+(?:(?:that\s+)?(?:came|comes|was|is|written|said)\s+)?"
    r"(?:before|above|so\s+far|until\s+now|up\s+(?:to|until)\s+(?:now|here)|previously)\b"
    r"|\bforget\s+(?:all|everything|what\s+you)\b"
    rf"|\bforget\s+(?:about\s+)?(?:the|your|any|those|these)\s+(?:\w+\s+)?{_EARLIER}\b"
    r"|\bfrom\s+(?:now|this\s+(?:point|moment|message))\s+(?:on|onwards?|forward)\b"
    r"|\b(?:henceforth|hereafter)\b"
    r"|\byou(?:'re|\s+are)\s+(?:now|no\s+longer)\b|\bno\s+longer\s+(?:bound|restricted)\b"
    r"|\byou\s+(?:must|shall|will\s+now|are\s+to)\b"
    rf"|\byou\s+(?:have|has)\s+no\s+(?:more\s+)?{_RULE_NOUNS}"
    r"|\b(?:act|behave|respond|answer)\s+as\s+(?:if|though)\b|\bpretend\s+(?:that\s+)?you\b"
    r"|\bdo\s+anything\s+now\b|\b(?:developer|dan|unrestricted|unfiltered)\s+mode\b"
    r"|\bnew\s+(?:rules|persona)\b"
    rf"|\b{_REVEAL_VERBS}\b(?:\s+(?:me|us|out|back|all|of|everything))*\s+"
    rf"(?:your|ur|the\s+(?:system|hidden|initial|original|internal|secret|full|exact))\s+"
    rf"(?:\w+\s+)?(?:{_RULE_NOUNS}|prompts?|configuration|config|setup|set-up|settings)\b"
    rf"|\bwhat\s+(?:are|were|is)\s+your\s+(?:\w+\s+)?(?:{_RULE_NOUNS}|prompts?)\b"
)
_ALWAYS_NEVER = re.compile(
    r"\b(?:always|never)\s+(?:ever\s+)?"
    r"(?:reply|respond|say|output|answer|print|mention|reveal)\b"
)

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("directive_markup", _DIRECTIVE),
    ("override_phrase", _OVERRIDE),
    ("override_phrase", OVERRIDE_I18N),
    ("output_directive", _ALWAYS_NEVER),
    ("output_directive", ALWAYS_NEVER_I18N),
    ("injection_word", _STRICT_WORDS),
    ("prompt_reference", _PROMPT),
    ("secret", SECRET_WORDS),
    ("secret", SECRETS_I18N),
    ("secret_shape", SECRET_SHAPES),
)
RULE_NAMES = tuple(dict.fromkeys(name for name, _ in _RULES))


def instruction_reason(text: str) -> str | None:
    """The name of the first instruction/secret rule ``text`` trips, else None."""
    forms = match_forms(text)
    for name, pattern in _RULES:
        if any(pattern.search(form) for form in forms):
            return name
    return None


def is_instruction_like(text: str) -> bool:
    """True for instruction-like, injection-like or secret-bearing text (see module doc)."""
    return instruction_reason(text) is not None
