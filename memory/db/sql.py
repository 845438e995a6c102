"""Small helpers for writing SQL: chunked ``IN (...)`` lists and column lists."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from memory.db.core import Connection

T = TypeVar("T")

# Values bound into one ``IN (...)`` list: well under SQLite's limit on host
# parameters, and small enough that each statement stays an index probe per value.
IN_CHUNK = 500


def chunks(items: Sequence[T], size: int = IN_CHUNK) -> Iterator[list[T]]:
    """``items`` in consecutive lists of at most ``size``."""
    for i in range(0, len(items), size):
        yield list(items[i : i + size])


def marks(n: int) -> str:
    """``?, ?, ...``: ``n`` placeholders for an ``IN (...)`` list."""
    return ",".join("?" * n)


def rows_in(
    con: Connection,
    sql: str,
    values: Sequence[Any],
    *,
    before: Sequence[Any] = (),
    after: Sequence[Any] = (),
    size: int = IN_CHUNK,
) -> Iterator[Any]:
    """The rows of ``sql`` run once per chunk of ``values``.

    ``{in}`` in ``sql`` stands for the chunk's placeholders; ``before`` and
    ``after`` are the parameters bound ahead of and behind them. Rows come
    chunk by chunk, so an ``ORDER BY`` holds within a chunk only.
    """
    for chunk in chunks(values, size):
        yield from con.execute(sql.replace("{in}", marks(len(chunk))), [*before, *chunk, *after])


def prefixed(columns: str, alias: str) -> str:
    """``a, b`` → ``t.a AS a, t.b AS b``: a column list for a join that keeps the names."""
    return ", ".join(f"{alias}.{c.strip()} AS {c.strip()}" for c in columns.split(","))


def dialect_of(con: Connection) -> str:
    """``"postgresql"`` or ``"sqlite"``: which SQL a connection speaks (a
    PostgreSQL connection says so; SQLite's are the default)."""
    return str(getattr(con, "dialect", "sqlite"))


def id_range(column: str, lo: int | None, hi: int | None) -> tuple[str, list[int]]:
    """`` AND column >= lo AND column < hi`` for the bounds given (none: ""),
    and its parameters: one part of a statement split by id into ranges."""
    sql = ""
    args: list[int] = []
    if lo is not None:
        sql += f" AND {column} >= ?"
        args.append(lo)
    if hi is not None:
        sql += f" AND {column} < ?"
        args.append(hi)
    return sql, args
