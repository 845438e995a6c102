"""Safety filters every fact candidate passes before it is stored.

Whatever produced a candidate — an LLM, the offline rules, a lore line from a
reply — it is normalised, checked for instruction-like content and checked for
grounding in the message it came from. All functions here are pure and never
raise on odd input (empty strings, control characters, lone surrogates, 100 KB
blobs): they return ``None`` / ``False`` / a rejection instead.

Instruction-like text is refused by ``memory.extract.injection``
(``instruction_reason``): directive markup, injection vocabulary, override and
output directives, secrets — after undoing the usual obfuscations.

Grounding (``is_grounded``): the fact must be found in its source message,
whole or by enough of its tokens, on ``memory.text`` tokens (Unicode letters
and digits; CJK as bigrams), so a model cannot store what nobody said.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from memory.extract.injection import instruction_reason, is_instruction_like
from memory.models import FACT_TYPES, Candidate
from memory.text import compact, scrub, significant_tokens

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

_WS = re.compile(r"\s+")


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
    """Clean a message before anything else: collapse whitespace, ``|`` → ``/``, trim, drop < 2 chars, cut."""
    value = _collapse(scrub(text or "").replace("|", "/"))
    if len(value) < 2:
        return None
    return value[:max_chars].rstrip()


def clean_line(text: str, max_chars: int = 320) -> str | None:
    """``clean_message`` for people to read (a journal line): a message longer
    than ``max_chars`` is cut at a word boundary when one is near, with "…"
    to say it was cut. Extraction keeps ``clean_message``'s plain cut, which
    the rule extractor recognises."""
    value = _collapse(scrub(text or "").replace("|", "/"))
    if len(value) < 2:
        return None
    if len(value) <= max_chars:
        return value
    return _cut(value, max_chars - 1) + "…"


# -- normalisation --------------------------------------------------------------

_TRAILING_JUNK = " ,;:-–—/\\"


def normalise_fact(text: str) -> str | None:
    """Collapse whitespace; ≥ 4 chars; end with ``.``/``!``/``?``; ≤ 190 chars."""
    value = _collapse(scrub(text or "")).rstrip(_TRAILING_JUNK)
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
    key = _collapse(scrub(t or "")).casefold()
    if key in FACT_TYPES:
        return key
    return _TYPE_ALIASES.get(key, "other")


# -- grounding --------------------------------------------------------------------


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def is_grounded(fact: str, source: str) -> bool:
    """Compact containment, or enough of the fact's tokens in the source.

    Enough = ``max(2, ceil(0.45 × n))`` of the fact's first 32 distinct tokens
    of ≥ 3 chars (CJK bigrams always count) found among the source's first 64
    such tokens. Both sides use the same tokenizer, so short words do not eat
    the source's 64-token window.
    """
    cf = compact(scrub(fact or ""))
    cs = compact(scrub(source or ""))
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

    def refusals(self) -> dict[str, int]:
        """Candidates the instruction/secret checks refused, counted by rule name
        (ungrounded, too short and duplicate candidates are not refusals)."""
        out: dict[str, int] = {}
        for r in self.rejected:
            kind, _, rule = r.reason.partition(":")
            if kind == "instruction_like":
                out[rule] = out.get(rule, 0) + 1
        return out


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
    value = _cut(_collapse(scrub(evidence)), EVIDENCE_MAX_CHARS)
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
    source = scrub(source_text or "")
    grounding_source = f"{scrub(author)} {source}" if author else source
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
        if ftype in ("lore", "canon"):  # lore comes from members and pins, never extractors
            ftype = "other"
        accepted.append(
            Candidate(
                fact=fact,
                type=ftype,
                confidence=_confidence(cand.confidence),
                evidence=_clean_evidence(cand.evidence, source),
                source=cand.source,
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


# -- operator text ----------------------------------------------------------------

_REFUSALS = {
    "directive_markup": "it contains directive markup ([[…]], a chat-template token or a role label)",
    "override_phrase": "it reads like an instruction to override the bot's rules",
    "output_directive": "it reads like an instruction about how the bot must reply",
    "injection_word": (
        "it uses a word the injection filter refuses "
        "(system, developer, instruction, policy, jailbreak, override)"
    ),
    "prompt_reference": "it refers to the bot's prompt",
    "secret": "it mentions a password, key, token, code or other secret",
    "secret_shape": "it contains something shaped like a key or token",
}


def operator_text_refusal(text: str) -> str | None:
    """Why fact text written by an operator may not be stored, or None if it may.

    Operator corrections pass the same instruction/injection and secret checks
    as extracted facts. Grounding does not apply: the operator is the source.
    The answer is a sentence for the operator, naming the rule.
    """
    reason = instruction_reason(text)
    if reason is None:
        return None
    return f"fact text refused: {_REFUSALS.get(reason, 'it fails the safety filter')} ({reason})"


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
    """A reply's memory line as a lore fact: strip filler ("remember", "fyi" …) and trailing ``.!?``, ≥ 4 chars, cut, guard.

    Returns the fact text ``"Memory line: <line>."`` or None when rejected.
    The line is cut to 176 rather than 180 chars so the whole fact stays within
    the 190-char limit of ``memory_facts.fact``.
    """
    value = _collapse(scrub(line or "").replace("\u2019", "'"))
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
