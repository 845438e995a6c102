"""What every fact extractor shares: the batch item, the protocol, limits (SPEC §4)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from memory.models import Candidate

EVIDENCE_MAX = 220
EXTRACTOR_TYPES = ("preference", "profile", "relationship", "project", "other")


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
