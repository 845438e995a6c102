"""Numbered schema migrations for PostgreSQL, recorded in the database.

The PostgreSQL counterpart of ``memory.db.sqlite.migrations``: each step is a
module of memory/db/postgres/schema/ (``apply(cur)``); append new ones to
``PG_MIGRATIONS``, never edit one that has shipped. Each runs in its own
transaction together with its ``_migrations`` row. Two processes may start at
once: every migration transaction first takes a transaction-scoped advisory
lock on one fixed key, then re-reads what is applied, so each step runs once
and the second process finds it done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from memory.db.postgres.schema import (
    p001_baseline,
    p002_bm25,
    p004_token_chars,
    p007_review_queue,
    p008_trust,
    p009_usage,
)
from memory.db.sqlite.schema import (
    m018_job_leases,
    m019_journal_days,
    m020_budget_order,
)
from memory.errors import MigrationError

log = logging.getLogger(__name__)

Migration = tuple[str, Callable[[Any], None]]

PG_MIGRATIONS: list[Migration] = [
    ("p001_baseline", p001_baseline.apply),
    ("p002_bm25", p002_bm25.apply),
    # SQLite's m018 is portable SQL: the same step on both.
    ("p003_job_leases", m018_job_leases.apply),
    ("p004_token_chars", p004_token_chars.apply),
    ("p005_journal_days", m019_journal_days.apply),
    ("p006_budget_order", m020_budget_order.apply),
    ("p007_review_queue", p007_review_queue.apply),
    ("p008_trust", p008_trust.apply),
    ("p009_usage", p009_usage.apply),
]

# pg_advisory_xact_lock key held by every migration transaction ("guildlor").
MIGRATION_LOCK_KEY = 0x6775696C646C6F72

_CREATE_TABLE = (
    "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
)


def _lock(conn: Any) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))


def _applied(conn: Any) -> list[str]:
    rows = conn.execute("SELECT name FROM _migrations ORDER BY applied_at, name").fetchall()
    return [str(r[0]) for r in rows]


def _check_known(done: list[str]) -> None:
    unknown = set(done) - {name for name, _ in PG_MIGRATIONS}
    if unknown:
        raise MigrationError(
            f"database was written by a newer guildlore (unknown migrations: {sorted(unknown)})"
        )


def recorded(conn: Any) -> list[str]:
    """The migrations a database records, without creating anything (a
    database that is not guildlore's records none)."""
    row = conn.execute("SELECT to_regclass('_migrations')").fetchone()
    if row is None or row[0] is None:
        return []
    return _applied(conn)


def migrate(conn: Any, *, upto: str | None = None) -> list[str]:
    """Apply pending migrations in order through ``conn`` (a psycopg 3
    connection in autocommit mode); returns the names applied now."""
    if not conn.autocommit:
        # Inside an open transaction each step would be a savepoint and the
        # advisory lock would outlive it: neither its own commit nor safe.
        raise ValueError("pg_migrations.migrate needs a connection in autocommit mode")
    with conn.transaction():
        # CREATE TABLE IF NOT EXISTS is not safe against a concurrent create.
        _lock(conn)
        conn.execute(_CREATE_TABLE)
        _check_known(_applied(conn))
    ran: list[str] = []
    for name, fn in PG_MIGRATIONS:
        try:
            with conn.transaction():
                _lock(conn)
                done = _applied(conn)
                _check_known(done)
                if name in done:
                    continue
                log.info("applying migration %s", name)
                with conn.cursor() as cur:
                    fn(cur)
                conn.execute(
                    "INSERT INTO _migrations (name, applied_at) VALUES (%s, %s)",
                    (name, datetime.now(UTC).isoformat()),
                )
        except MigrationError:
            raise
        except Exception as exc:
            raise MigrationError(f"migration {name} failed: {exc}") from exc
        ran.append(name)
        if upto == name:
            break
    return ran


def reset_identities(conn: Any) -> dict[str, int]:
    """Move every identity column's sequence past its table's largest id, so
    new rows get fresh ids after rows were inserted with explicit ids (a copy
    from SQLite); returns table → the next id it will hand out."""
    columns = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND is_identity = 'YES' ORDER BY table_name"
    ).fetchall()
    out: dict[str, int] = {}
    for table, column in columns:
        row = conn.execute(
            f'SELECT coalesce(max("{column}"), 0) + 1 FROM "{table}"'  # names from the catalog
        ).fetchone()
        nxt = int(row[0])
        conn.execute(
            "SELECT setval(pg_get_serial_sequence(%s, %s), %s, false)",
            (f'"{table}"', column, nxt),
        )
        out[str(table)] = nxt
    return out
