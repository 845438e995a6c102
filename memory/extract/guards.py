"""Safety filters every fact candidate passes before it is stored (SPEC §3, §4).

Whatever produced a candidate — an LLM, the offline rules, a lore line from a
reply — it is normalised, checked for instruction-like content and checked for
grounding in the message it came from. All functions here are pure and never
raise on odd input (empty strings, control characters, lone surrogates, 100 KB
blobs): they return ``None`` / ``False`` / a rejection instead.

Instruction-like text (``is_instruction_like``)
------------------------------------------------
Text is first normalised the way a reader (or a model) would see it: NFKC
(full-width letters become ASCII), zero-width and bidi controls removed,
Unicode "tag" characters decoded to the ASCII they hide, Latin/Cyrillic/Greek
look-alikes folded inside words that mix scripts ("ѕуѕtem"), and spaced-out
letters ("s y s t e m", "s.y.s.t.e.m") joined. Then any of these rejects it:

* directive markup: ``[[…]]``, chat-template tokens (``<|im_start|>``,
  ``[INST]``, ``<<SYS>>``) or a leading role label (``system:``);
* injection vocabulary as **whole words** — never substrings, so
  "systematic", "ecosystem" and "developers" are kept: ``system``,
  ``developer``, ``instruction(s)``, ``policy``/``policies``, ``jailbreak``,
  ``override``. These are the words SPEC §4 names and they are rejected in
  every sense, accepting that "Ana is a developer." is lost: a fact store
  must not become a place where such text can hide;
* ``prompt`` only in its injection senses. "prompt" is also an everyday
  adjective ("prompt delivery", "a prompt reply"), so it is rejected only as
  the *noun*: after a qualifier (system, hidden, initial, original, your, my,
  the, this, previous, above …) or after reveal/show/print/repeat/leak …,
  and *not* followed by another content word (a following content word makes
  it the adjective: "the prompt delivery of parcels"); also "prompt
  injection/engineering/leak" and a "prompt:" label. Kept: "prompt delivery",
  "a prompt reply", "Ana is always prompt.", "Ana writes prompts for
  Midjourney."; rejected: "the prompt", "your prompt is …", "system prompt",
  "prompt injection", "reveal the hidden prompt";
* override phrases: ignore/disregard/bypass … previous/prior/earlier/above
  (up to three words apart), "forget everything/all …", "from now on",
  "you are now", "you must", "do anything now", "developer mode", "act as if";
* output directives: always/never + reply/respond/say/output/answer/print/
  mention/reveal in the *base* form — the imperative ("Always reply in
  French.") is rejected, a description of a person ("Ana always replies
  late.") is kept;
* secrets: api key, access key, private key, password, passwd, passphrase,
  credential(s), secret(s), token (whole word, so "tokenizer" and "tokens"
  are kept), and things that look like keys (``sk-…``, GitHub/Slack/AWS/
  Discord token shapes, bearer values, PEM headers).

Grounding (``is_grounded``) is SPEC §4 exactly, on ``memory.text`` tokens
(Unicode letters and digits; CJK as bigrams).
"""

from __future__ import annotations

import logging
import math
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from memory.models import FACT_TYPES, Candidate
from memory.text import compact, significant_tokens, strip_invisible

log = logging.getLogger(__name__)

FACT_MAX_CHARS = 190
FACT_MIN_CHARS = 4
EVIDENCE_MAX_CHARS = 220
LORE_MAX_CHARS = 180
LORE_PREFIX = "Memory line: "
LORE_CONFIDENCE = 0.72
GROUNDING_RATIO = 0.45
GROUNDING_MIN_HITS = 2
GROUNDING_FACT_TOKENS = 32
GROUNDING_SOURCE_TOKENS = 64

# -- text hygiene ---------------------------------------------------------------

# Characters that are invisible or reorder display. ZWJ/ZWNJ (U+200C/D) are
# kept by ``clean_message``: they are part of emoji sequences and of Persian
# and Indic spelling. Matching (``_match_form``) drops them all.
_HIDDEN_FOR_DISPLAY = re.compile(
    "[\u00ad\u034f\u115f\u1160\u180e\u200b\u202a-\u202e\u2060-\u2064\u2066-\u2069"
    "\u3164\ufeff\uffa0\ufff9-\ufffb]"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_WS = re.compile(r"\s+")
_SURROGATE = re.compile("[\ud800-\udfff]")
_TAGS = re.compile("[\U000e0000-\U000e007f]")


def _scrub(text: str) -> str:
    """Make any str safe to store and display: no lone surrogates or controls."""
    if not isinstance(text, str):
        text = str(text)
    # Lone surrogates cannot be encoded as UTF-8 (SQLite, files); replace them.
    text = _SURROGATE.sub("\ufffd", text)
    text = _CONTROL.sub(" ", text)
    return _HIDDEN_FOR_DISPLAY.sub("", text)


def _collapse(text: str) -> str:
    return _WS.sub(" ", text).strip()


def _cut(text: str, limit: int) -> str:
    """Cut to ``limit`` chars, at a word boundary when one is reasonably near."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    space = head.rfind(" ")
    if space >= limit * 0.6:
        head = head[:space]
    return head.rstrip(" ,;:-–—/")


def clean_message(text: str, max_chars: int = 320) -> str | None:
    """SPEC §3 step 1: collapse whitespace, ``|`` → ``/``, trim, drop < 2 chars, cut."""
    value = _collapse(_scrub(text or "").replace("|", "/"))
    if len(value) < 2:
        return None
    return value[:max_chars].rstrip()


# -- normalisation --------------------------------------------------------------

_TRAILING_JUNK = " ,;:-–—/\\"


def normalise_fact(text: str) -> str | None:
    """Collapse whitespace; ≥ 4 chars; end with ``.``/``!``/``?``; ≤ 190 chars."""
    value = _collapse(_scrub(text or "")).rstrip(_TRAILING_JUNK)
    if len(value) < FACT_MIN_CHARS:
        return None
    if len(value) > FACT_MAX_CHARS or value[-1] not in ".!?":
        value = _cut(value.rstrip(".!?"), FACT_MAX_CHARS - 1).rstrip(_TRAILING_JUNK)
        if value[-1:] not in (".", "!", "?"):
            value += "."
    if len(value) < FACT_MIN_CHARS or not compact(value):
        return None
    return value


_TYPE_ALIASES = {
    "general": "other",
    "misc": "other",
    "fact": "other",
    "preferences": "preference",
    "like": "preference",
    "likes": "preference",
    "dislike": "preference",
    "interest": "preference",
    "interests": "preference",
    "hobby": "preference",
    "hobbies": "preference",
    "identity": "profile",
    "personal": "profile",
    "bio": "profile",
    "job": "profile",
    "work": "profile",
    "occupation": "profile",
    "location": "profile",
    "skill": "profile",
    "skills": "profile",
    "relationships": "relationship",
    "family": "relationship",
    "friend": "relationship",
    "social": "relationship",
    "projects": "project",
    "goal": "project",
    "goals": "project",
}


def normalise_type(t: str | None) -> str:
    """Known type, or an obvious alias of one; anything else → ``other``."""
    key = _collapse(_scrub(t or "")).casefold()
    if key in FACT_TYPES:
        return key
    return _TYPE_ALIASES.get(key, "other")


# -- instruction / injection rejection ------------------------------------------

# Folded only inside words that also contain Latin letters, so real Russian
# or Greek words are untouched while "ѕуѕtem" (Cyrillic ѕ, у) is caught.
_CONFUSABLES = str.maketrans(
    {
        "а": "a", "в": "b", "е": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p",
        "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ј": "j", "ԁ": "d",
        "ɡ": "g", "ο": "o", "α": "a", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ρ": "p",
        "τ": "t", "υ": "u", "χ": "x", "ѵ": "v", "ԛ": "q", "ԝ": "w",
    }
)  # fmt: skip
_WORDISH = re.compile(r"[^\W_]+", re.UNICODE)
_LATIN = re.compile(r"[a-z]")
# Three or more single letters/digits separated by one non-word char: "s y s t e m".
_SPACED = re.compile(r"(?<![^\W_])(?:[^\W_][\s.\-_*·]){3,}[^\W_](?![^\W_])", re.UNICODE)


def _fold_word(m: re.Match[str]) -> str:
    word = m.group(0)
    if _LATIN.search(word) and not word.isascii():
        return word.translate(_CONFUSABLES)
    return word


def _match_form(text: str) -> str:
    """What a reader (or a model) sees, lowercased, for the instruction checks."""
    value = _scrub(text or "")
    # Tag characters render as nothing but models read them as ASCII; decode
    # them so the hidden text is checked too.
    value = _TAGS.sub(lambda m: chr(ord(m.group(0)) - 0xE0000), value)
    value = strip_invisible(value).replace("\u200c", "").replace("\u200d", "")
    value = unicodedata.normalize("NFKC", value).casefold()
    value = value.replace("\u2019", "'").replace("\u2018", "'")
    value = _WORDISH.sub(_fold_word, value)
    value = _SPACED.sub(lambda m: re.sub(r"[\s.\-_*·]", "", m.group(0)), value)
    return _collapse(value)


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
_OVERRIDE = re.compile(
    r"\b(?:ignore|ignoring|disregard|disregarding|bypass|bypassing)\b"
    r"(?:\W+\w+){0,3}?\W+(?:previous|prior|earlier|above|preceding|all\s+rules|the\s+rules)\b"
    r"|\bforget\s+(?:all|everything|what\s+you)\b"
    r"|\bfrom\s+now\s+on\b|\byou\s+are\s+now\b|\byou\s+must\b|\bdo\s+anything\s+now\b"
    r"|\bdeveloper\s+mode\b|\bact\s+as\s+if\b|\bnew\s+(?:rules|persona)\b"
)
_ALWAYS_NEVER = re.compile(
    r"\b(?:always|never)\s+(?:ever\s+)?"
    r"(?:reply|respond|say|output|answer|print|mention|reveal)\b"
)
_SECRET_WORDS = re.compile(
    _words(
        r"api[\s_-]?keys?", r"access[\s_-]keys?", r"private[\s_-]keys?", r"secret[\s_-]keys?",
        "password", "passwords", "passwd", "passphrase", "credential", "credentials",
        "secret", "secrets", "token", r"auth[\s_-]?token",
    )
)  # fmt: skip
_SECRET_SHAPES = re.compile(
    r"\bsk-[a-z0-9_\-]{8,}|\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[a-z0-9_]{16,}"
    r"|\bxox[abposr]-[a-z0-9-]{8,}|\bakia[0-9a-z]{16}\b"
    r"|\b[mno][a-z0-9_-]{23,27}\.[a-z0-9_-]{6}\.[a-z0-9_-]{27,}"
    r"|\bbearer\s+[a-z0-9._~+/-]{20,}|-----begin [a-z ]*private key-----"
)

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("directive_markup", _DIRECTIVE),
    ("override_phrase", _OVERRIDE),
    ("output_directive", _ALWAYS_NEVER),
    ("injection_word", _STRICT_WORDS),
    ("prompt_reference", _PROMPT),
    ("secret", _SECRET_WORDS),
    ("secret_shape", _SECRET_SHAPES),
)


def instruction_reason(text: str) -> str | None:
    """The name of the first instruction/secret rule ``text`` trips, else None."""
    form = _match_form(text)
    for name, pattern in _RULES:
        if pattern.search(form):
            return name
    return None


def is_instruction_like(text: str) -> bool:
    """True for instruction-like, injection-like or secret-bearing text (see module doc)."""
    return instruction_reason(text) is not None


# -- grounding --------------------------------------------------------------------


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def is_grounded(fact: str, source: str) -> bool:
    """SPEC §4: compact containment, or enough of the fact's tokens in the source.

    Enough = ``max(2, ceil(0.45 × n))`` of the fact's first 32 distinct tokens
    of ≥ 3 chars (CJK bigrams always count) found among the source's first 64
    such tokens. Both sides use the same tokenizer, so short words do not eat
    the source's 64-token window.
    """
    cf = compact(_scrub(fact or ""))
    cs = compact(_scrub(source or ""))
    if not cf or not cs:
        return False
    if cf in cs:
        return True
    fact_tokens = _unique(significant_tokens(cf))[:GROUNDING_FACT_TOKENS]
    if not fact_tokens:
        return False
    source_tokens = set(significant_tokens(cs, limit=GROUNDING_SOURCE_TOKENS))
    need = max(GROUNDING_MIN_HITS, math.ceil(GROUNDING_RATIO * len(fact_tokens)))
    hits = sum(1 for t in fact_tokens if t in source_tokens)
    return hits >= need


# -- candidates -------------------------------------------------------------------


@dataclass(frozen=True)
class Rejection:
    candidate: Candidate
    reason: str


@dataclass(frozen=True)
class FilterResult:
    accepted: list[Candidate] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)


def _confidence(value: object) -> float:
    try:
        conf = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.5
    if math.isnan(conf):
        return 0.5
    return min(1.0, max(0.0, conf))


def _clean_evidence(evidence: str | None, source: str) -> str | None:
    if not evidence:
        return None
    value = _cut(_collapse(_scrub(evidence)), EVIDENCE_MAX_CHARS)
    if len(value) < 2 or is_instruction_like(value) or not is_grounded(value, source):
        return None
    return value


def filter_candidates(
    cands: Iterable[Candidate], source_text: str, *, author: str | None = None
) -> FilterResult:
    """Normalise, reject instruction-like and ungrounded candidates, dedupe.

    ``author`` (the message author's display name) is prepended to the
    grounding source: in "I work as a nurse" the "I" *is* the author, so
    "Ana works as a nurse." is grounded by the message Ana wrote. Evidence is
    kept only if it is itself grounded and clean, else set to None.
    """
    source = _scrub(source_text or "")
    grounding_source = f"{_scrub(author)} {source}" if author else source
    accepted: list[Candidate] = []
    rejected: list[Rejection] = []
    seen: set[str] = set()
    for cand in cands:
        fact = normalise_fact(cand.fact if isinstance(cand.fact, str) else "")
        if fact is None:
            rejected.append(Rejection(cand, "too_short"))
            continue
        reason = instruction_reason(fact)
        if reason is not None:
            rejected.append(Rejection(cand, f"instruction_like:{reason}"))
            continue
        if not is_grounded(fact, grounding_source):
            rejected.append(Rejection(cand, "ungrounded"))
            continue
        key = compact(fact)
        if key in seen:
            rejected.append(Rejection(cand, "duplicate"))
            continue
        seen.add(key)
        ftype = normalise_type(cand.type)
        if ftype == "lore":  # lore is written only by remember_line, never by extractors
            ftype = "other"
        accepted.append(
            Candidate(
                fact=fact,
                type=ftype,
                confidence=_confidence(cand.confidence),
                evidence=_clean_evidence(cand.evidence, source),
            )
        )
    if rejected:
        log.debug(
            "guards rejected %d of %d candidates: %s",
            len(rejected),
            len(rejected) + len(accepted),
            ", ".join(r.reason for r in rejected),
        )
    return FilterResult(accepted=accepted, rejected=rejected)


# -- lore lines -------------------------------------------------------------------

_LORE_FILLER = re.compile(
    r"^(?:remember\s+this|remember\s+that|remember|important|note\s+this|note\s+that|"
    r"note|don'?t\s+forget|do\s+not\s+forget|keep\s+in\s+mind|fyi|memory\s+line)"
    r"\b\s*[:,\-–—!.]*\s*",
    re.IGNORECASE,
)
_LEADING_THAT = re.compile(r"^that\s+", re.IGNORECASE)
# "Memory line: " + line + "." must still fit the 190-char fact column.
_LORE_LINE_MAX = min(LORE_MAX_CHARS, FACT_MAX_CHARS - len(LORE_PREFIX) - 1)


def normalise_lore_line(line: str, source_text: str) -> str | None:
    """SPEC §3 lore: strip filler and trailing ``.!?``, ≥ 4 chars, cut, guard.

    Returns the fact text ``"Memory line: <line>."`` or None when rejected.
    The line is cut to 176 rather than 180 chars so the whole fact stays within
    the 190-char limit of ``memory_facts.fact``.
    """
    value = _collapse(_scrub(line or "").replace("\u2019", "'"))
    for _ in range(4):  # fillers stack: "Remember this: that …"
        stripped = _LEADING_THAT.sub("", _LORE_FILLER.sub("", value, count=1), count=1)
        if stripped == value:
            break
        value = stripped
    value = value.rstrip(" .!?").strip()
    if len(value) < FACT_MIN_CHARS:
        return None
    value = _cut(value, _LORE_LINE_MAX).rstrip(" .!?")
    if len(value) < FACT_MIN_CHARS or is_instruction_like(value):
        return None
    if not is_grounded(value, source_text or ""):
        return None
    return f"{LORE_PREFIX}{value}."
