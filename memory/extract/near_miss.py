"""Near-misses of the guards: a candidate they accepted, but only just.

The review queue (``memory.ingest.review_gate``) flags such a fact for a
moderator instead of trusting it:

- its message reads like an instruction or carries a secret (the fact itself
  passed the same checks: the rest of the message is the worry);
- it is grounded only at the threshold: not found whole in its message,
  some of its words missing there, and exactly as many found as
  ``is_grounded`` needs, no more (a short fact all of whose words are in the
  message is not a near-miss, however few they are).

Pure, and like the guards never raises on odd input.
"""

from __future__ import annotations

import math

from memory.extract.guards import (
    GROUNDING_FACT_TOKENS,
    GROUNDING_MIN_HITS,
    GROUNDING_RATIO,
    GROUNDING_SOURCE_TOKENS,
)
from memory.extract.injection import instruction_reason
from memory.text import compact, scrub, significant_tokens


def grounding_margin(fact: str, source: str) -> tuple[int, int, int] | None:
    """(words of the fact found in the source, words needed, words it has)
    when the fact is grounded by its words, not found whole; None when it is
    found whole or has no words to count. The same tokens as
    ``guards.is_grounded``."""
    cf = compact(scrub(fact or ""))
    cs = compact(scrub(source or ""))
    if not cf or not cs or cf in cs:
        return None
    fact_tokens = list(dict.fromkeys(significant_tokens(cf)))[:GROUNDING_FACT_TOKENS]
    if not fact_tokens:
        return None
    source_tokens = set(significant_tokens(cs, limit=GROUNDING_SOURCE_TOKENS))
    need = max(GROUNDING_MIN_HITS, math.ceil(GROUNDING_RATIO * len(fact_tokens)))
    return sum(1 for t in fact_tokens if _found(t, source_tokens)), need, len(fact_tokens)


def _found(token: str, source: set[str]) -> bool:
    """In the source, or its word there with an inflection the extractor
    added: the offline rules turn "I play" into "Ana plays", and "plays" is
    not a word missing from the message."""
    if token in source:
        return True
    return any(len(s) >= 3 and token.startswith(s) and len(token) - len(s) <= 3 for s in source)


def near_miss(fact: str, message: str, author: str | None = None) -> str | None:
    """Why an accepted fact from ``message`` (written by ``author``) was a
    near-miss, in words; None when it passed with room to spare."""
    rule = instruction_reason(message or "")
    if rule is not None:
        return f"its message trips the {rule.replace('_', ' ')} check"
    source = f"{scrub(author)} {message}" if author else message
    margin = grounding_margin(fact, source)
    if margin is not None:
        hits, need, words = margin
        if hits == need < words:
            return (
                f"barely grounded: {hits} of its {words} words are in the message ({need} needed)"
            )
    return None
