"""Offline rule extractor, part 3: sentence splitting, clause checks and
``RuleExtractor`` itself — deterministic English first-person statements."""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.errors import ExtractionError
from memory.extract.base import EVIDENCE_MAX, ExtractionItem, author_name
from memory.extract.rules.builders import (
    APPOSITION,
    PRONOUN_START,
    RULES,
    build_relation_apposition,
)
from memory.extract.rules.clause_about import rewrite_about, rewrite_aside
from memory.extract.rules.clauses import clause_span, rewrite
from memory.extract.rules.i18n import JA_SENTENCE, other_languages
from memory.extract.rules.lexicon import (
    CLAUSE_END,
    CONJUNCTION,
    HYPOTHETICAL_START,
    JOKE,
    LEAD_IN,
    SENTENCE_SPLIT,
    prepare,
)
from memory.models import Candidate
from memory.text import compact

# Below the shaped rules' 0.56–0.70 and a raw message's neutral 0.5 (search's
# confidence signal): a clause fact restates its message, and at 0.55 it
# pushed other turns out of REALTALK's top 10 (R@10 70.9 → 69.7; 70.6 at 0.45).
CLAUSE_CONFIDENCE = 0.45
_SUBJECTLESS = re.compile(
    r"^(?:(?:yeah|yes|yep|oh|well|ok|okay|also|btw)\W+)*(?:(?P<been>been)(?=\s+\w+ing\b)|"
    r"(?P<just>just|finally|recently)(?=\s+\w+ed\b))",
    re.IGNORECASE,
)
_FIRST_PERSON_OBJECT = re.compile(r"(?<![\w'])(?:me|my|myself)(?![\w'])", re.IGNORECASE)


def _sentences(text: str) -> list[str]:
    parts = (p for s in SENTENCE_SPLIT.split(text) if s for p in JA_SENTENCE.split(s))
    return [s.strip() for s in parts if s and s.strip()]


def _is_question(sentence: str) -> bool:
    return "?" in sentence


def _clause_ok(prefix: str) -> bool:
    """May a first-person statement start after ``prefix`` (within the sentence)?"""
    rest = prefix.rstrip()
    for _ in range(4):
        m = LEAD_IN.search(rest)
        if not m:
            break
        if CONJUNCTION.match(m.group(0)):
            return True  # "…, but I am left-handed": a new clause starts here
        rest = rest[: m.start()].rstrip()
    return not rest or bool(CLAUSE_END.search(rest))


class RuleExtractor:
    """Deterministic English first-person statement extraction (no network)."""

    name = "rules"

    def __init__(self, *, truncated_at: int = 320) -> None:
        # Texts at least this long are assumed cut by clean_message.
        self.truncated_at = truncated_at

    def extract_sync(self, text: str, author: str, max_facts: int = 4) -> list[Candidate]:
        if max_facts <= 0 or not text or not isinstance(text, str):
            return []
        name = author_name(author)
        prepared = prepare(text[:4000])  # the guards cut messages to 320 chars anyway
        sentences = _sentences(prepared)
        # A cut that fell on a space was stripped of it: 319 characters are cut too.
        cut = len(text) >= self.truncated_at - 1
        if sentences and cut and sentences[-1][-1:].isalnum():
            # The message was cut mid-sentence (clean_message's limit); a fact from
            # the stump would end mid-word ("passionate about creating a safe, inviti").
            sentences.pop()
        out: list[Candidate] = []
        seen: set[str] = set()
        for sentence in sentences:
            if (
                _is_question(sentence)
                or HYPOTHETICAL_START.match(sentence)
                or JOKE.search(sentence)
            ):
                continue
            for fact, kind, conf, rule in self._sentence_facts(sentence, name):
                key = compact(fact)
                if key in seen:
                    continue
                seen.add(key)
                evidence = sentence if len(sentence) <= EVIDENCE_MAX else sentence[:EVIDENCE_MAX]
                out.append(
                    Candidate(
                        fact=fact + ".",
                        type=kind,
                        confidence=conf,
                        evidence=evidence,
                        source=f"rules.{rule}",
                    )
                )
                if len(out) >= max_facts:
                    return out
        return out

    def _sentence_facts(self, sentence: str, name: str) -> list[tuple[str, str, float, str]]:
        found: list[tuple[str, str, float, str]] = []
        taken_until = -1
        for start in PRONOUN_START.finditer(sentence):
            pos = start.start()
            if pos < taken_until or not _clause_ok(sentence[:pos]):
                continue
            shaped = False
            for rule in RULES:
                m = rule.pattern.match(sentence, pos)
                if not m:
                    continue
                built = rule.build(m, name)
                if built is not None:
                    found.append((*built, rule.name))
                    taken_until = m.start("obj") + 1 if "obj" in m.groupdict() else m.end()
                    shaped = True
                break  # the first rule that matches owns this position
            if not shaped:
                # No shape fits: the clause whole, in the third person.
                clause = clause_span(sentence, pos)
                said = rewrite(clause, name)
                if said is not None:
                    fact, kind, rule_name = said
                    found.append((fact, kind, CLAUSE_CONFIDENCE, rule_name))
                    taken_until = pos + len(clause)
        for m in APPOSITION.finditer(sentence):
            built = build_relation_apposition(m, name)
            if built is not None:
                found.append((*built, "apposition"))
        aside = rewrite_aside(sentence, name)
        if aside is not None:
            found.append((aside[0], aside[1], CLAUSE_CONFIDENCE, aside[2]))
        fragment = _SUBJECTLESS.match(sentence)
        if not found and fragment:
            # Chat drops the "I": "Been running longer since our last chat",
            # "Just signed up for a pottery class".
            aux = "I've been" if fragment.group("been") else f"I {fragment.group('just')}"
            said = rewrite(clause_span(aux + sentence[fragment.end() :], 0), name)
            if said is not None:
                found.append((said[0], said[1], CLAUSE_CONFIDENCE, said[2]))
        if not found and _FIRST_PERSON_OBJECT.search(sentence):
            about = rewrite_about(clause_span(sentence, 0), name)
            if about is not None:
                found.append((about[0], about[1], CLAUSE_CONFIDENCE, about[2]))
        if not found:
            for fact, kind, rule_name in other_languages(sentence, name):
                found.append((fact, kind, CLAUSE_CONFIDENCE, rule_name))
        return found

    async def extract(self, text: str, author: str, max_facts: int) -> list[Candidate]:
        try:
            return self.extract_sync(text, author, max_facts)
        except Exception as exc:  # a rule bug must not take the ingest worker down
            raise ExtractionError(f"rule extractor failed: {exc!r}") from exc

    async def extract_batch(
        self, items: Sequence[ExtractionItem], max_facts: int
    ) -> list[list[Candidate]]:
        return [await self.extract(item.text, item.author, max_facts) for item in items]
