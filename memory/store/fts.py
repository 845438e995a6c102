"""Full-text search in each backend's own terms.

The retrieval layer builds one match expression from plain tokens
(``"paint" OR "paint"*``: FTS5's syntax). SQLite runs it against the FTS5
table and ranks by ``bm25()`` (negative, lower is better). PostgreSQL keeps a
``tsvector`` per row in a table of the same name (``rowid`` = the content
row) and runs the same expression through ``guildlore_fts_match``,
ranked by the same BM25 (below) — negative, lower is better — so the
caller's normalisation to 0..1 (divide by the best) is the same for both.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from memory.db.core import Connection
from memory.db.sql import dialect_of

if TYPE_CHECKING:
    from memory.db.postgres.driver import PgConnection

R = TypeVar("R")

_TERM = re.compile(r'"((?:[^"]|"")*)"(\*?)')


@dataclass(frozen=True)
class FtsQuery:
    """Pieces of one statement that searches ``table``: ``rank`` (the raw
    rank, in the SELECT list), ``source`` (where the table is named in FROM)
    and ``where`` (the match condition, first in WHERE). ``params`` are theirs,
    in that order: they come first in the statement's parameters."""

    source: str
    where: str
    rank: str
    params: tuple[Any, ...]


def fts_query(con: Connection, table: str, match: str) -> FtsQuery | None:
    """The pieces for ``match`` on this connection's backend (None: the
    expression holds no word the index could match)."""
    if dialect_of(con) == "postgresql":
        stats = bm25(con, table, match)
        return None if stats is None else stats.query(table, match)
    return FtsQuery(source=table, where=f"{table} MATCH ?", rank=f"bm25({table})", params=(match,))


def best_ranked(
    con: Connection,
    table: str,
    match: str,
    limit: int,
    run: Callable[[FtsQuery], list[R]],
    rank_of: Callable[[R], float],
) -> list[R]:
    """The ``limit`` best rows of ``match`` — what ``run`` returns for the full
    query (its statement ordered by rank, then id, with ``limit``) — asking
    PostgreSQL to rank as few rows as exactness allows.

    FTS5 ranks thousands of matches of a common word in C; PostgreSQL ranks
    each row in SQL, so ranking every row that holds "the" is what makes a
    search slow. A row's BM25 is a sum over the phrases it holds, each part
    at most ``idf ×`` the largest term-frequency part any row of the table
    gives that phrase (``Bm25.phrases``; ``k1 + 1`` when not measured). So
    the rows holding one of the rarest phrases are ranked first (by every
    phrase, as always); if ``limit`` of them score above what the remaining
    phrases together could give any other row, no other row can enter the
    answer, and it is the exact answer (as exact as the counted bounds are
    current: see ``_Counts``). Otherwise the next rarest phrase joins, up to
    the whole expression. SQLite: the one query."""
    if dialect_of(con) != "postgresql":
        q = fts_query(con, table, match)
        return [] if q is None else run(q)
    stats = bm25(con, table, match)
    if stats is None:
        return []
    ordered = sorted(stats.phrases, key=lambda p: -p[1])
    for n in range(1, len(ordered) + 1):
        part = " OR ".join(expr for expr, _, _ in ordered[:n])
        rows = run(stats.query(table, part))
        if n == len(ordered):
            return rows
        if len(rows) < limit:
            continue
        rest = sum(most * idf for _, idf, most in ordered[n:])
        # A hair of slack: the bound and the row's score add in other orders.
        if rest * (1 + 1e-9) + 1e-12 < -rank_of(rows[-1]):
            return rows
    return []


# -- BM25 on PostgreSQL -------------------------------------------------------------------------
#
# FTS5's bm25() with its defaults (k1 = 1.2, b = 0.75, every column weight 1),
# computed from the same statistics: N rows and their mean length (in tokens)
# from ``fts_stats``, which the index's triggers keep; each phrase's IDF from
# the rows that match it, over the whole table as FTS5 counts them; the
# phrase's frequency and the row's length from its tsvector. So a ranking
# agrees with SQLite's wherever the two tokenizers agree on the words.

K1 = 1.2
B = 0.75


def phrases(match: str) -> list[tuple[str, bool]]:
    """(term, is prefix) of each quoted term of an FTS5 expression."""
    return [(m.group(1).replace('""', '"'), bool(m.group(2))) for m in _TERM.finditer(match)]


@dataclass(frozen=True)
class Bm25:
    """What a PostgreSQL search needs to rank by BM25: each phrase (as the
    match expression writes it) with its IDF, its words as the index holds
    them, and the table's mean row length."""

    # (phrase expression, idf, the largest term-frequency part of BM25 any row
    # of the table gives it: at most k1 + 1)
    phrases: tuple[tuple[str, float, float], ...]
    terms: tuple[tuple[str, bool, float], ...]  # (lexeme, prefix, idf)
    avgdl: float

    def query(self, table: str, match: str) -> FtsQuery:
        """The pieces for the rows matching ``match`` (this expression or a
        part of it), ranked by every phrase of the whole one."""
        rank, params = self.rank_sql(table)
        return FtsQuery(
            source=(
                f"{table} CROSS JOIN guildlore_fts_match(?) AS fts_q "
                "CROSS JOIN (SELECT ?::float4[] AS b) AS fts_counts"
            ),
            where=f"{table}.tsv @@ fts_q",
            rank=rank,
            params=(*params, match, COUNT_BOUNDS),
        )

    def rank_sql(self, alias: str) -> tuple[str, list[Any]]:
        """An expression for the raw (negative) BM25 of row ``alias`` of the
        FTS table, and its parameters (they come before any other of the
        statement's, as the expression sits in its SELECT list). In double
        precision throughout, as FTS5 computes.

        A word's count in the row is read off ``ts_rank`` of the row against
        that one word (see ``COUNT_BOUNDS``): a call in C per word and row.
        A prefix matches several words of a row, whose counts add up, so the
        row's tsvector is expanded and joined to the prefixes instead — some
        ten times the cost a row. A phrase of several words counts each
        word's occurrences: close to FTS5's count of the phrase, and the
        store's phrases are single words."""
        scale, count = _scale_sql(alias), _count_sql(alias)
        scale_params = [K1, 1 - B, B, self.avgdl]
        sums: list[str] = []
        params: list[Any] = []
        for lexeme, prefix, idf in self.terms:
            if prefix:
                continue
            sums.append(f"?::float8 * {count} * ?::float8 / ({count} + {scale})")
            params.extend((idf, lexeme, K1 + 1, lexeme, *scale_params))
        prefixes = [t for t in self.terms if t[1]]
        if prefixes:
            values = ", ".join("(?, ?::float8)" for _ in prefixes)
            sums.append(
                "(SELECT coalesce(sum(s.idf * s.f * ?::float8 / (s.f + "
                f"{scale})), 0) FROM "
                "(SELECT p.idf, sum(coalesce(array_length(u.positions, 1), 1))::float8 AS f "
                f"FROM unnest({alias}.tsv) AS u JOIN (VALUES {values}) AS p(term, idf) "
                "ON starts_with(u.lexeme, p.term) GROUP BY p.term, p.idf) AS s)"
            )
            params.extend((K1 + 1, *scale_params))
            for lexeme, _, idf in prefixes:
                params.extend((lexeme, idf))
        return "-(" + " + ".join(sums) + ")", params


def _count_bounds(most: int = 256) -> list[float]:
    """``ts_rank`` of a row against one word said n times (every position of
    the default weight, 0.1) is 0.1 × (1 + 1/4 + … + 1/n²) / (π²/6): it
    grows with n, so n is the bucket of the midpoints between its values
    (``width_bucket``; 0 for a row without the word). A tsvector keeps at
    most 256 positions of a word, as the expanded count did."""
    values = [0.0]
    total = 0.0
    for n in range(1, most + 2):
        total += 1.0 / (n * n)
        values.append(0.1 * total / 1.64493406685)
    return [(values[n - 1] + values[n]) / 2 for n in range(1, most + 2)]


# ``ts_rank`` answers in single precision: the midpoints are far apart in it
# (the closest, near n = 256, by ~100 of its steps).
COUNT_BOUNDS = _count_bounds()


def _count_sql(alias: str) -> str:
    """The count of one word (its one parameter) in row ``alias``, read off
    ``ts_rank`` with the bounds joined as ``fts_counts.b``."""
    return (
        f"width_bucket(ts_rank({alias}.tsv, quote_literal(?::text)::tsquery), fts_counts.b)::float8"
    )


def _scale_sql(alias: str) -> str:
    """BM25's length scale of row ``alias``: k1 × (1 − b + b × len / avgdl)
    (its four parameters in that order)."""
    return f"?::float8 * (?::float8 + ?::float8 * {alias}.len / ?::float8)"


def _lexemes(con: PgConnection, term: str) -> tuple[str, ...]:
    """A term's words as the index holds them (case, diacritics); asking
    costs a round trip, so the database's caches keep the answer."""
    found: tuple[str, ...] | None = con.caches.lexemes.get(term)
    if found is not None:
        return found
    rows = con.execute(
        "SELECT lexeme FROM unnest(guildlore_fts_vector(?)) ORDER BY lexeme", (term,)
    ).fetchall()
    words = tuple(str(lexeme) for (lexeme,) in rows)
    con.caches.lexemes.put(term, words)
    return words


def _count(
    con: Connection, table: str, expr: str, words: tuple[str, ...], avgdl: float
) -> tuple[int, float]:
    """How many rows hold phrase ``expr``, and the largest term-frequency
    part of BM25 one of them gives it — measured for a phrase of one word
    (``words``), else its ceiling k1 + 1."""
    if len(words) != 1:
        sql = f"SELECT count(*), ?::float8 FROM {table} WHERE tsv @@ guildlore_fts_match(?)"
        row = con.execute(sql, (K1 + 1, expr)).fetchone()
        return int(row[0]), float(row[1])
    count = _count_sql(table)
    sql = (
        f"SELECT count(*), coalesce(max({count} * ?::float8 / ({count} + {_scale_sql(table)})), 0) "
        f"FROM {table} CROSS JOIN (SELECT ?::float4[] AS b) AS fts_counts "
        f"WHERE {table}.tsv @@ guildlore_fts_match(?)"
    )
    (word,) = words
    row = con.execute(sql, (word, K1 + 1, word, K1, 1 - B, B, avgdl, COUNT_BOUNDS, expr)).fetchone()
    return int(row[0]), min(float(row[1]), K1 + 1)


def bm25(con: Connection, table: str, match: str) -> Bm25 | None:
    """The BM25 inputs for ``match`` against ``table`` (None: no word); on
    PostgreSQL only."""
    pg = cast("PgConnection", con)
    wanted = phrases(match)
    if not wanted:
        return None
    docs, tokens = con.execute(
        "SELECT coalesce(sum(docs), 0), coalesce(sum(tokens), 0) FROM fts_stats WHERE tbl = ?",
        (table,),
    ).fetchone()
    n_rows = int(docs)
    avgdl = float(tokens) / n_rows if n_rows else 1.0
    terms: list[tuple[str, bool, float]] = []
    found: list[tuple[str, float, float]] = []
    for term, prefix in wanted:
        expr = '"' + term.replace('"', '""') + '"' + ("*" if prefix else "")
        # Its words as the index holds them (case, diacritics).
        words = _lexemes(pg, term)
        # The phrase's rows, as FTS5 counts them: every row of the table.
        # Counting a common word's rows is the costly part of a search; the
        # count is kept while the table's totals (rows and tokens) are what
        # they were, and those move with nearly any write (an edit that keeps
        # both keeps the old figures until the next write that moves them).
        key = (table, expr, n_rows, int(tokens))
        counted = pg.caches.phrase_rows.get(key)
        if counted is None:
            counted = _count(con, table, expr, words if not prefix else (), avgdl or 1.0)
            pg.caches.phrase_rows.put(key, counted)
        hits, most = counted
        idf = math.log((n_rows - hits + 0.5) / (hits + 0.5)) if n_rows else 0.0
        idf = idf if idf > 0 else 1e-6  # FTS5's floor for a word in most rows
        found.append((expr, idf, most))
        for lexeme in words:
            item = (lexeme, prefix, idf)
            if item not in terms:
                terms.append(item)
    if not terms:
        return None
    return Bm25(tuple(found), tuple(terms), avgdl or 1.0)
