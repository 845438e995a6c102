"""Numbered schema migrations, recorded in the database.

Each step is a module of memory/db/sqlite/schema/; append new ones to
``MIGRATIONS``; never edit one that has shipped.
Each runs in its own transaction on the writer connection at start-up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from memory.db.core import Connection
from memory.db.sqlite import driver as sqlite
from memory.db.sqlite.schema import (
    m001_core,
    m002_fts,
    m003_vectors_traces_settings,
    m004_fts_secure_delete,
    m005_operator_sessions,
    m006_message_retry,
    m007_fact_time,
    m008_bot_replies,
    m009_procedures,
    m010_member_lifecycle,
    m011_consent_pins,
    m012_traces,
    m013_decision,
    m014_episodes,
    m015_budgets,
    m016_relations_consolidation,
    m017_multilingual_fts,
    m018_job_leases,
    m019_journal_days,
    m020_budget_order,
    m021_review_queue,
    m022_journal_owed,
    m023_trust,
    m024_usage,
)
from memory.errors import MigrationError

log = logging.getLogger(__name__)

Migration = tuple[str, Callable[[Any], None]]


MIGRATIONS: list[Migration] = [
    ("m001_core", m001_core.apply),
    ("m002_fts", m002_fts.apply),
    ("m003_vectors_traces_settings", m003_vectors_traces_settings.apply),
    ("m004_fts_secure_delete", m004_fts_secure_delete.apply),
    ("m005_operator_sessions", m005_operator_sessions.apply),
    ("m006_message_retry", m006_message_retry.apply),
    ("m007_fact_time", m007_fact_time.apply),
    ("m008_bot_replies", m008_bot_replies.apply),
    ("m009_procedures", m009_procedures.apply),
    ("m010_member_lifecycle", m010_member_lifecycle.apply),
    ("m011_consent_pins", m011_consent_pins.apply),
    ("m012_traces", m012_traces.apply),
    ("m013_decision", m013_decision.apply),
    ("m014_episodes", m014_episodes.apply),
    ("m015_budgets", m015_budgets.apply),
    ("m016_relations_consolidation", m016_relations_consolidation.apply),
    ("m017_multilingual_fts", m017_multilingual_fts.apply),
    ("m018_job_leases", m018_job_leases.apply),
    ("m019_journal_days", m019_journal_days.apply),
    ("m020_budget_order", m020_budget_order.apply),
    ("m021_review_queue", m021_review_queue.apply),
    ("m022_journal_owed", m022_journal_owed.apply),
    ("m023_trust", m023_trust.apply),
    ("m024_usage", m024_usage.apply),
]


def applied(con: Connection) -> list[str]:
    con.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    return [row[0] for row in con.execute("SELECT name FROM _migrations ORDER BY rowid")]


def recorded(con: Connection) -> list[str]:
    """The migrations a database records, without creating the table (read-only
    connections; a file that is not guildlore's records none)."""
    try:
        return [row[0] for row in con.execute("SELECT name FROM _migrations ORDER BY rowid")]
    except sqlite.Error:
        return []


def migrate(con: Connection, *, upto: str | None = None) -> list[str]:
    """Apply pending migrations in order; returns the names applied now."""
    done = set(applied(con))
    names = [name for name, _ in MIGRATIONS]
    unknown = done - set(names)
    if unknown:
        raise MigrationError(
            f"database was written by a newer guildlore (unknown migrations: {sorted(unknown)})"
        )
    ran: list[str] = []
    for name, fn in MIGRATIONS:
        if name in done:
            continue
        log.info("applying migration %s", name)
        # executescript commits any open transaction, so each migration manages
        # its own: the DDL and the bookkeeping row land together.
        con.execute("BEGIN IMMEDIATE")
        try:
            _run_script_in_tx(con, fn)
            con.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                (name, datetime.now(UTC).isoformat()),
            )
            con.execute("COMMIT")
        except Exception as exc:
            con.execute("ROLLBACK")
            raise MigrationError(f"migration {name} failed: {exc}") from exc
        ran.append(name)
        if upto == name:
            break
    return ran


def _run_script_in_tx(con: Connection, fn: Callable[[Any], None]) -> None:
    """Run a migration whose body uses executescript without leaving the transaction."""

    class _Tx:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def executescript(self, script: str) -> None:
            for statement in _split_sql(script):
                self._inner.execute(statement)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    fn(_Tx(con))


def _split_sql(script: str) -> list[str]:
    """Split a script into statements; trigger bodies keep their inner semicolons."""
    out: list[str] = []
    buf: list[str] = []
    depth = 0
    for line in script.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        upper = stripped.upper()
        if upper.startswith("CREATE TRIGGER"):
            depth = 1
        buf.append(line)
        if depth and upper.startswith("END;"):
            depth = 0
            out.append("\n".join(buf))
            buf = []
        elif not depth and stripped.endswith(";"):
            out.append("\n".join(buf))
            buf = []
    if buf:
        out.append("\n".join(buf))
    return out
