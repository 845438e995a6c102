"""What every fact extractor shares: the batch item, the protocol, limits, the
author's name as facts spell it (third person, so "I live in Oslo" becomes
"<name> lives in Oslo")."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from memory.models import Candidate

EVIDENCE_MAX = 220
EXTRACTOR_TYPES = ("preference", "profile", "relationship", "project", "other")


def author_name(author: str) -> str:
    """The author's display name as extractors write it into facts ("The author" if blank)."""
    name = re.sub(r"\s+", " ", re.sub("[\ud800-\udfff]", "", author or "")).strip()
    return name or "The author"


@dataclass(frozen=True)
class ExtractionItem:
    text: str
    author: str


class Extractor(Protocol):
    name: str

    async def extract(self, text: str, author: str, max_facts: int) -> list[Candidate]: ...

    async def extract_batch(
        self, items: Sequence[ExtractionItem], max_facts: int
    ) -> list[list[Candidate]]: ...
