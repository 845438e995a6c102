"""PostgreSQL connections that run the store's SQL.

The store's functions are written once, in the SQL both backends understand
plus SQLite's spelling of a few things (``?`` parameters, ``INSERT OR
IGNORE``, two-argument ``max``/``min``, ``LIKE`` without case,
``lastrowid``). A :class:`PgConnection` rewrites those spellings for
PostgreSQL once per distinct statement (cached) and otherwise passes the
statement through; where the two engines differ in kind — full-text search,
vector search, the schema, erasure — the store has a branch per dialect
(``con.dialect``), never a translation.

Parameters are bound on the client (psycopg's ``ClientCursor``): SQLite
infers nothing about a parameter's type and the store relies on that
(``? IS NULL OR channel_id = ?``), while a server-side bound parameter in
such a place is an error in PostgreSQL ("could not determine data type").

Errors come back as the SQLite driver's exception classes
(``IntegrityError`` for a constraint, ``OperationalError`` otherwise), so a
store function catches the same exceptions whichever backend runs it.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from memory.db.sqlite import driver as sqlite

DIALECT = "postgresql"
# The application name every guildlore connection reports (pg_stat_activity).
APPLICATION_NAME = "guildlore"


class Row(tuple[Any, ...]):
    """A result row read by position or by column name, like ``sqlite3.Row``."""

    _names: tuple[str, ...] = ()

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            try:
                return tuple.__getitem__(self, self._names.index(key))
            except ValueError:
                lowered = key.lower()
                for i, name in enumerate(self._names):
                    if name.lower() == lowered:
                        return tuple.__getitem__(self, i)
                raise IndexError(f"no such column: {key}") from None
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def row_factory(cursor: Any) -> Any:
    names = tuple(col.name for col in cursor.description or ())
    row_type = type("Row", (Row,), {"_names": names, "__slots__": ()})

    def make(values: Sequence[Any]) -> Row:
        return row_type(values)

    return make


# -- translation of SQLite spellings ---------------------------------------------

_STRING = re.compile(r"'(?:[^']|'')*'")
_MASK = re.compile(r"\x00(\d+)\x00")


def _mask_strings(sql: str) -> tuple[str, list[str]]:
    """``sql`` with each string literal replaced by a marker, so that rewriting
    never touches a literal's text, and the literals in order."""
    literals: list[str] = []

    def keep(m: re.Match[str]) -> str:
        literals.append(m.group(0))
        return f"\x00{len(literals) - 1}\x00"

    return _STRING.sub(keep, sql), literals


def _unmask(sql: str, literals: list[str]) -> str:
    return _MASK.sub(lambda m: literals[int(m.group(1))], sql)


def _two_arg_extrema(code: str) -> str:
    """``max(a, b)`` → ``greatest(a, b)``, ``min(a, b)`` → ``least(a, b)``: in
    SQLite the two-argument forms are scalar, in PostgreSQL only aggregates."""
    out: list[str] = []
    i = 0
    pattern = re.compile(r"\b(max|min)\s*\(", re.IGNORECASE)
    while True:
        m = pattern.search(code, i)
        if m is None:
            out.append(code[i:])
            return "".join(out)
        depth, j, comma = 1, m.end(), False
        while j < len(code) and depth:
            ch = code[j]
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif ch == "," and depth == 1:
                comma = True
            j += 1
        out.append(code[i : m.start()])
        if comma:
            out.append("greatest(" if m.group(1).lower() == "max" else "least(")
        else:
            out.append(code[m.start() : m.end()])
        i = m.end()


_INSERT_OR = re.compile(r"^\s*INSERT\s+OR\s+(IGNORE|REPLACE)\s+INTO\b", re.IGNORECASE)
_INSERT_TABLE = re.compile(r"^\s*INSERT\s+INTO\s+([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)
_RETURNING = re.compile(r"\bRETURNING\b", re.IGNORECASE)


@lru_cache(maxsize=4096)
def translate(sql: str) -> tuple[str, bool, str | None]:
    """(PostgreSQL statement, whether it was ``INSERT OR IGNORE``, the table an
    ``INSERT`` writes to)."""
    ignore = False
    m = _INSERT_OR.match(sql)
    if m:
        if m.group(1).upper() == "REPLACE":
            raise sqlite.OperationalError(
                "INSERT OR REPLACE has no PostgreSQL form: write INSERT ... ON CONFLICT"
            )
        ignore = True
        sql = sql[: m.start()] + "INSERT INTO" + sql[m.end() :]
    code, literals = _mask_strings(sql)
    # psycopg reads every % as the start of a placeholder, literals included.
    code = code.replace("%", "%%")
    code = re.sub(r"(?<![:\w]):([A-Za-z_]\w*)", r"%(\1)s", code)
    code = code.replace("?", "%s")
    code = re.sub(r"\bBEGIN\s+IMMEDIATE\b", "BEGIN", code, flags=re.IGNORECASE)
    # Index hints: PostgreSQL's planner picks its own.
    code = re.sub(r"\s+(?:INDEXED\s+BY\s+\w+|NOT\s+INDEXED)\b", "", code, flags=re.IGNORECASE)
    code = re.sub(r"\bLIMIT\s+-1\b", "LIMIT ALL", code, flags=re.IGNORECASE)
    code = re.sub(r"\bNOT\s+LIKE\b", "NOT ILIKE", code, flags=re.IGNORECASE)
    code = re.sub(r"(?<!NOT )\bLIKE\b", "ILIKE", code, flags=re.IGNORECASE)
    code = re.sub(r"\binstr\s*\(", "strpos(", code, flags=re.IGNORECASE)
    code = _two_arg_extrema(code)
    # A unary ``+`` before a column keeps SQLite off an index; PostgreSQL
    # has no such operator for text.
    code = re.sub(r"(?<=[\s(,])\+(?=[A-Za-z_])", "", code)
    out = _unmask(code, [lit.replace("%", "%%") for lit in literals])
    if ignore:
        tail = _RETURNING.search(out)
        if tail:
            out = out[: tail.start()] + "ON CONFLICT DO NOTHING " + out[tail.start() :]
        else:
            out = out.rstrip().rstrip(";") + " ON CONFLICT DO NOTHING"
    table = _INSERT_TABLE.match(out)
    return out, ignore, table.group(1).lower() if table else None


def _sqlite_error(exc: psycopg.Error) -> Exception:
    """The SQLite driver's exception class for a PostgreSQL error."""
    message = str(exc).strip()
    if isinstance(exc, pg_errors.IntegrityError):
        return sqlite.IntegrityError(message)
    return sqlite.OperationalError(message)


class PgCursor:
    """The result of one statement: rows, ``rowcount`` and ``lastrowid``."""

    def __init__(self, cur: Any, lastrowid: int | None) -> None:
        self._cur = cur
        self.lastrowid = lastrowid

    @property
    def rowcount(self) -> int:
        return int(self._cur.rowcount)

    @property
    def description(self) -> Any:
        return self._cur.description

    def fetchone(self) -> Any:
        if self._cur.description is None:
            return None
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        if self._cur.description is None:
            return []
        return list(self._cur.fetchall())

    def fetchmany(self, size: int = 1) -> list[Any]:
        if self._cur.description is None:
            return []
        return list(self._cur.fetchmany(size))

    def __iter__(self) -> Iterator[Any]:
        if self._cur.description is None:
            return iter(())
        return iter(self._cur)

    def close(self) -> None:
        self._cur.close()


class Lru:
    """A bounded, thread-safe map that forgets the least recently used key."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)


class Caches:
    """What the store's PostgreSQL full-text search learns from one database
    and may keep while the process runs (``memory.store.fts``): shared by the
    connections of one ``PgDatabase``, so a fresh database — a test's, or
    another server's — starts empty instead of relying on a process-wide key.

    ``lexemes``: a term's words as the index holds them (the word-splitting
    function is fixed by the schema, so a term reads the same words for as
    long as the process runs). ``phrase_rows``: how many rows match a phrase,
    keyed by the table's totals when counted."""

    def __init__(self) -> None:
        self.lexemes = Lru(8192)
        self.phrase_rows = Lru(4096)


class PgConnection:
    """A psycopg connection that takes the store's statements.

    Autocommit, like the SQLite connections: a transaction is the explicit
    ``BEGIN`` … ``COMMIT`` the database layer runs around a store function."""

    dialect = DIALECT

    def __init__(
        self,
        raw: psycopg.Connection[Any],
        identities: Mapping[str, str],
        caches: Caches | None = None,
    ) -> None:
        self.raw = raw
        # table → its identity column: what ``lastrowid`` reads back.
        self._identities = dict(identities)
        self.changes: list[Any] | None = None
        self.caches = caches or Caches()

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def execute(self, sql: str, params: Any = ()) -> PgCursor:
        statement, _ignore, table = translate(sql)
        ident = self._identities.get(table) if table else None
        returning = ident is not None and not _RETURNING.search(statement)
        if returning:
            statement = f"{statement.rstrip().rstrip(';')} RETURNING {ident}"
        cur = psycopg.ClientCursor(self.raw)
        try:
            cur.execute(statement, _params(params))
        except psycopg.Error as exc:
            raise _sqlite_error(exc) from exc
        lastrowid: int | None = None
        if returning:
            row = cur.fetchone()
            lastrowid = int(row[0]) if row is not None else None
        return PgCursor(cur, lastrowid)

    def executemany(self, sql: str, seq: Any) -> PgCursor:
        statement, _ignore, _table = translate(sql)
        cur = psycopg.ClientCursor(self.raw)
        try:
            cur.executemany(statement, [_params(p) for p in seq])
        except psycopg.Error as exc:
            raise _sqlite_error(exc) from exc
        return PgCursor(cur, None)

    def execute_native(self, sql: str, params: Any = ()) -> PgCursor:
        """A statement already in PostgreSQL's spelling (``%s`` parameters)."""
        cur = psycopg.ClientCursor(self.raw)
        try:
            cur.execute(sql, params)
        except psycopg.Error as exc:
            raise _sqlite_error(exc) from exc
        return PgCursor(cur, None)

    def commit(self) -> None:
        if self.in_transaction:
            self.raw.execute("COMMIT")

    def rollback(self) -> None:
        if self.in_transaction:
            self.raw.execute("ROLLBACK")

    def close(self) -> None:
        self.raw.close()


def _params(params: Any) -> Any:
    if isinstance(params, Mapping):
        return dict(params)
    return tuple(params) if params is not None else ()


def scalar(raw: Any, sql: str, params: Any = ()) -> Any:
    """The first column of the first row of a native statement on a raw
    connection (None when there is no row)."""
    row = raw.execute(sql, params).fetchone()
    return None if row is None else row[0]


def identity_columns(raw: psycopg.Connection[Any]) -> dict[str, str]:
    """Every table's identity column in the current schema."""
    rows = raw.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND is_identity = 'YES'"
    ).fetchall()
    return {str(t).lower(): str(c) for t, c in rows}


_identity_lock = threading.Lock()


def connect_raw(url: str) -> psycopg.Connection[Any]:
    """A plain psycopg connection in autocommit mode with guildlore's rows."""
    try:
        raw = psycopg.connect(
            url, autocommit=True, row_factory=row_factory, application_name=APPLICATION_NAME
        )
    except psycopg.Error as exc:
        raise sqlite.OperationalError(f"cannot connect to PostgreSQL: {exc}") from exc
    return raw


def connect(
    url: str, identities: Mapping[str, str] | None = None, caches: Caches | None = None
) -> PgConnection:
    """A store connection; ``identities`` saves the catalog look-up when known;
    ``caches``: those of the database the connection belongs to."""
    raw = connect_raw(url)
    if identities is None:
        with _identity_lock:
            identities = identity_columns(raw)
    return PgConnection(raw, identities, caches)
