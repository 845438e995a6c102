"""Words as the store's FTS5 tables see them, for the in-memory lexicons
(``memory.retrieval.lexicon``, ``memory.retrieval.fact_lexicon``).

A text's words are those of ``fts_index_text`` (spaceless scripts as
character bigrams), case-folded, without diacritics, split where a character
is neither letter nor digit: the tables' ``unicode61 remove_diacritics 2``
tokenizer. A query is the store's FTS5 MATCH expression
(``memory.retrieval.query.fts_match_expression``): quoted phrases, each
optionally a prefix, joined by OR. A phrase that holds several words counts
as those words.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from memory.text import fts_index_text

_WORD = re.compile(r"[^\W_]+")
_PHRASE = re.compile(r'"((?:[^"]|"")*)"(\*?)')


def words(text: str | None) -> list[str]:
    """The words the lexicons index and match in ``text``."""
    value = fts_index_text(text) or ""
    value = value.casefold()
    if not value.isascii():
        value = "".join(
            ch for ch in unicodedata.normalize("NFKD", value) if not unicodedata.combining(ch)
        )
    return _WORD.findall(value)


@dataclass(frozen=True)
class Phrase:
    word: str
    prefix: bool


def parse_match(match: str) -> list[Phrase]:
    """The words of an FTS5 MATCH expression of the store's form."""
    out: list[Phrase] = []
    for text, star in _PHRASE.findall(match or ""):
        ws = words(text.replace('""', '"'))
        for i, w in enumerate(ws):
            out.append(Phrase(w, bool(star) and i == len(ws) - 1))
    return out
