"""Full-text search in each backend's own terms.

The retrieval layer builds one match expression from plain tokens
(``"paint" OR "paint"*``: FTS5's syntax). SQLite runs it against the FTS5
table and ranks by ``bm25()`` (negative, lower is better). PostgreSQL keeps a
``tsvector`` per row in a table of the same name (``rowid`` = the content
row) and runs the same expression as a ``tsquery`` (``'paint' | 'paint':*``),
ranked by ``-ts_rank_cd`` — negative too, lower is better — so the caller's
normalisation to 0..1 (divide by the best) is the same for both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from memory.store.sql import dialect_of

_TERM = re.compile(r'"((?:[^"]|"")*)"(\*?)')


def tsquery_text(match: str) -> str:
    """The FTS5 expression ``match`` (quoted terms joined by OR, each maybe a
    prefix) as PostgreSQL ``to_tsquery`` input."""
    terms: list[str] = []
    for m in _TERM.finditer(match):
        word = m.group(1).replace('""', '"')
        quoted = "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"
        terms.append(quoted + (":*" if m.group(2) else ""))
    return " | ".join(terms)


@dataclass(frozen=True)
class FtsQuery:
    """Pieces of one statement that searches ``table``: ``source`` goes where
    the table is named in FROM, ``where`` is the match condition and ``rank``
    the raw rank. ``param`` is bound once, as the statement's first parameter:
    PostgreSQL's ``source`` holds it, SQLite's ``where``."""

    source: str
    where: str
    rank: str
    param: str


def fts_query(con: Any, table: str, match: str) -> FtsQuery:
    if dialect_of(con) == "postgresql":
        return FtsQuery(
            source=f"{table} CROSS JOIN to_tsquery('simple', ?) AS fts_q",
            where=f"{table}.tsv @@ fts_q",
            rank=f"-ts_rank_cd({table}.tsv, fts_q)",
            param=tsquery_text(match),
        )
    return FtsQuery(
        source=table,
        where=f"{table} MATCH ?",
        rank=f"bm25({table})",
        param=match,
    )
