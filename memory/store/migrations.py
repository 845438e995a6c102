"""Numbered schema migrations, recorded in the database.

Append new migrations to ``MIGRATIONS``; never edit one that has shipped.
Each runs in its own transaction on the writer connection at start-up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from memory.errors import MigrationError
from memory.store import sqlite

log = logging.getLogger(__name__)

Migration = tuple[str, Callable[[Any], None]]


def m001_core(con: Any) -> None:
    con.executescript(
        """
        CREATE TABLE messages (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            guild_id TEXT NOT NULL,
            channel_id TEXT NOT NULL,
            author_id TEXT NOT NULL,
            author_name TEXT NOT NULL,
            content TEXT NOT NULL,
            created_at TEXT NOT NULL,
            source TEXT NOT NULL CHECK (source IN ('text', 'voice', 'import')),
            is_bot INTEGER NOT NULL DEFAULT 0,
            reply_to_id TEXT,
            state TEXT NOT NULL DEFAULT 'pending',
            state_reason TEXT,
            journaled INTEGER NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 0,
            received_at TEXT NOT NULL,
            processed_at TEXT
        );
        CREATE INDEX messages_guild_channel_time ON messages (guild_id, channel_id, created_at);
        CREATE INDEX messages_guild_author ON messages (guild_id, author_id);
        CREATE INDEX messages_unfinished ON messages (state) WHERE state != 'done';

        CREATE TABLE memory_facts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            guild_id TEXT NOT NULL,
            channel_id TEXT,
            subject TEXT NOT NULL,
            fact TEXT NOT NULL,
            fact_type TEXT NOT NULL DEFAULT 'other',
            evidence_text TEXT,
            source_message_id TEXT,
            confidence REAL NOT NULL DEFAULT 0.5,
            is_active INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (guild_id, subject, fact)
        );
        CREATE INDEX facts_subject ON memory_facts (guild_id, subject, is_active, updated_at);
        CREATE INDEX facts_guild ON memory_facts (guild_id, is_active, updated_at);

        CREATE TABLE fact_history (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            guild_id TEXT NOT NULL,
            fact_id INTEGER,
            subject TEXT,
            event TEXT NOT NULL,
            old_text TEXT,
            new_text TEXT,
            actor TEXT NOT NULL,
            source_message_id TEXT,
            reason TEXT,
            created_at TEXT NOT NULL
        );
        CREATE INDEX history_fact ON fact_history (fact_id, id);

        CREATE TABLE action_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            guild_id TEXT,
            subject TEXT,
            kind TEXT NOT NULL,
            message TEXT NOT NULL,
            detail TEXT,
            created_at TEXT NOT NULL
        );
        CREATE INDEX action_log_kind ON action_log (kind, id);

        CREATE TABLE guilds (
            guild_id TEXT PRIMARY KEY,
            name TEXT,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE channels (
            guild_id TEXT NOT NULL,
            channel_id TEXT NOT NULL,
            name TEXT,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (guild_id, channel_id)
        );
        CREATE TABLE members (
            guild_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            display_name TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (guild_id, user_id)
        );
        """
    )


def m002_fts(con: Any) -> None:
    # External-content FTS5 tables kept in step by triggers, so a delete of a
    # base row (forget) removes its index entry in the same transaction.
    con.executescript(
        """
        CREATE VIRTUAL TABLE memory_facts_fts USING fts5(
            fact, evidence_text,
            content='memory_facts', content_rowid='id',
            tokenize='unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER memory_facts_ai AFTER INSERT ON memory_facts BEGIN
            INSERT INTO memory_facts_fts(rowid, fact, evidence_text)
            VALUES (new.id, new.fact, new.evidence_text);
        END;
        CREATE TRIGGER memory_facts_ad AFTER DELETE ON memory_facts BEGIN
            INSERT INTO memory_facts_fts(memory_facts_fts, rowid, fact, evidence_text)
            VALUES ('delete', old.id, old.fact, old.evidence_text);
        END;
        CREATE TRIGGER memory_facts_au AFTER UPDATE OF fact, evidence_text ON memory_facts BEGIN
            INSERT INTO memory_facts_fts(memory_facts_fts, rowid, fact, evidence_text)
            VALUES ('delete', old.id, old.fact, old.evidence_text);
            INSERT INTO memory_facts_fts(rowid, fact, evidence_text)
            VALUES (new.id, new.fact, new.evidence_text);
        END;

        CREATE VIRTUAL TABLE messages_fts USING fts5(
            content,
            content='messages', content_rowid='seq',
            tokenize='unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts(rowid, content) VALUES (new.seq, new.content);
        END;
        CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
            VALUES ('delete', old.seq, old.content);
        END;
        CREATE TRIGGER messages_au AFTER UPDATE OF content ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
            VALUES ('delete', old.seq, old.content);
            INSERT INTO messages_fts(rowid, content) VALUES (new.seq, new.content);
        END;

        INSERT INTO memory_facts_fts(memory_facts_fts) VALUES ('rebuild');
        INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
        """
    )


def m003_vectors_traces_settings(con: Any) -> None:
    # Vectors are stored as blobs per (row, model) — the source of truth — and
    # mirrored into one sqlite-vec vec0 index per model (created on demand by
    # the store, because its dimension depends on the model), partitioned by
    # guild. Different models never share an index.
    con.executescript(
        """
        CREATE TABLE embedding_models (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            model TEXT NOT NULL UNIQUE,
            dims INTEGER NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE TABLE memory_fact_vectors (
            fact_id INTEGER NOT NULL REFERENCES memory_facts (id) ON DELETE CASCADE,
            model TEXT NOT NULL,
            dims INTEGER NOT NULL,
            guild_id TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            embedding BLOB NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (fact_id, model)
        );
        CREATE INDEX fact_vectors_model ON memory_fact_vectors (model, guild_id);
        CREATE TABLE message_vectors (
            message_seq INTEGER NOT NULL REFERENCES messages (seq) ON DELETE CASCADE,
            model TEXT NOT NULL,
            dims INTEGER NOT NULL,
            guild_id TEXT NOT NULL,
            embedding BLOB NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (message_seq, model)
        );
        CREATE INDEX message_vectors_model ON message_vectors (model, guild_id);

        CREATE TABLE memory_traces (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            guild_id TEXT NOT NULL,
            channel_id TEXT,
            message_id TEXT,
            reply_id TEXT,
            fact_id INTEGER,
            action TEXT NOT NULL CHECK (action IN ('retrieved', 'stored', 'updated')),
            content TEXT NOT NULL,
            score REAL,
            score_parts TEXT,
            created_at TEXT NOT NULL
        );
        CREATE INDEX traces_message ON memory_traces (guild_id, message_id);
        CREATE INDEX traces_channel ON memory_traces (guild_id, channel_id, id);
        CREATE INDEX traces_fact ON memory_traces (fact_id);

        CREATE TABLE guild_settings (
            guild_id TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (guild_id, key)
        );
        CREATE TABLE voice_opt_outs (
            guild_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (guild_id, user_id)
        );
        """
    )


def m004_fts_secure_delete(con: Any) -> None:
    # FTS5's secure-delete (SQLite ≥ 3.42) removes a deleted row's terms from
    # the index b-trees at once; without it they linger as tombstoned entries
    # until a merge, and a forgotten member's words stay readable in the file.
    con.executescript(
        """
        INSERT INTO memory_facts_fts(memory_facts_fts, rank) VALUES ('secure-delete', 1);
        INSERT INTO messages_fts(messages_fts, rank) VALUES ('secure-delete', 1);
        INSERT INTO memory_facts_fts(memory_facts_fts) VALUES ('optimize');
        INSERT INTO messages_fts(messages_fts) VALUES ('optimize');
        """
    )


def m005_operator_sessions(con: Any) -> None:
    # Dashboard logins, so logging out (or out everywhere) revokes a session
    # for good. ``id`` is a hash of the session's cookie nonce, never the nonce.
    con.executescript(
        """
        CREATE TABLE operator_sessions (
            id TEXT PRIMARY KEY,
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL
        );
        CREATE INDEX operator_sessions_expiry ON operator_sessions (expires_at);
        """
    )


def m006_message_retry(con: Any) -> None:
    # A message whose processing failed waits in state 'retry' until
    # retry_at; failed_attempts counts the failures (processing attempts of
    # any outcome stay in ``attempts``).
    con.executescript(
        """
        ALTER TABLE messages ADD COLUMN failed_attempts INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE messages ADD COLUMN retry_at TEXT;
        CREATE INDEX messages_retry_due ON messages (retry_at) WHERE state = 'retry';
        """
    )


def m007_fact_time(con: Any) -> None:
    # Facts are dated by their source message, not by when a batch processed
    # it: observed_at is the first observation, last_observed_at the latest,
    # valid_from/valid_to the span the fact was true (valid_to NULL while
    # current). fact_sources links a fact to every message it was observed in.
    # Existing facts take their source message's time, else their created_at.
    con.executescript(
        """
        ALTER TABLE memory_facts ADD COLUMN observed_at TEXT;
        ALTER TABLE memory_facts ADD COLUMN valid_from TEXT;
        ALTER TABLE memory_facts ADD COLUMN valid_to TEXT;
        ALTER TABLE memory_facts ADD COLUMN last_observed_at TEXT;
        UPDATE memory_facts SET observed_at = coalesce((SELECT m.created_at FROM messages m WHERE m.id = memory_facts.source_message_id AND m.guild_id = memory_facts.guild_id), created_at);
        UPDATE memory_facts SET valid_from = observed_at, last_observed_at = observed_at;
        CREATE TABLE fact_sources (
            fact_id INTEGER NOT NULL,
            message_id TEXT NOT NULL,
            guild_id TEXT NOT NULL,
            observed_at TEXT NOT NULL,
            PRIMARY KEY (fact_id, message_id)
        );
        CREATE INDEX fact_sources_message ON fact_sources (guild_id, message_id);
        INSERT INTO fact_sources (fact_id, message_id, guild_id, observed_at) SELECT id, source_message_id, guild_id, observed_at FROM memory_facts WHERE source_message_id IS NOT NULL;
        CREATE TRIGGER fact_sources_fact_deleted AFTER DELETE ON memory_facts BEGIN
            DELETE FROM fact_sources WHERE fact_id = old.id;
        END;
        CREATE TRIGGER fact_sources_message_deleted AFTER DELETE ON messages BEGIN
            DELETE FROM fact_sources WHERE guild_id = old.guild_id AND message_id = old.id;
        END;
        """
    )


def m008_bot_replies(con: Any) -> None:
    # The bot's own posted replies, kept only as the conversation window's
    # assistant turns: a table of their own (no FTS, no vectors, no
    # extraction), so a reply can never come back as searchable memory.
    con.executescript(
        """
        CREATE TABLE bot_replies (
            message_id TEXT PRIMARY KEY,
            guild_id TEXT NOT NULL,
            channel_id TEXT NOT NULL,
            reply_to_id TEXT,
            to_user_id TEXT NOT NULL,
            content TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX bot_replies_channel ON bot_replies (guild_id, channel_id, created_at);
        CREATE INDEX bot_replies_user ON bot_replies (guild_id, to_user_id);
        """
    )


def m013_decision(con: Any) -> None:
    # A history row can name the other fact of the change: a supersede row
    # links the old fact and the new one, a historical row the fact that was
    # newer. Rows written before the column existed carry the other fact's id
    # only in their reason ("…: superseded by fact 12"); it is read back out.
    con.executescript(
        """
        ALTER TABLE fact_history ADD COLUMN linked_fact_id INTEGER;
        UPDATE fact_history SET linked_fact_id = CAST(substr(reason, instr(reason, 'superseded by fact ') + 19) AS INTEGER) WHERE event = 'supersede' AND instr(reason, 'superseded by fact ') > 0;
        UPDATE fact_history SET linked_fact_id = CAST(substr(reason, instr(reason, 'supersedes fact ') + 16) AS INTEGER) WHERE event = 'supersede' AND instr(reason, 'supersedes fact ') > 0;
        UPDATE fact_history SET linked_fact_id = CAST(substr(reason, instr(reason, ' than fact ') + 11) AS INTEGER) WHERE event = 'historical' AND instr(reason, ' than fact ') > 0;
        CREATE INDEX history_linked ON fact_history (linked_fact_id) WHERE linked_fact_id IS NOT NULL;
        """
    )


MIGRATIONS: list[Migration] = [
    ("m001_core", m001_core),
    ("m002_fts", m002_fts),
    ("m003_vectors_traces_settings", m003_vectors_traces_settings),
    ("m004_fts_secure_delete", m004_fts_secure_delete),
    ("m005_operator_sessions", m005_operator_sessions),
    ("m006_message_retry", m006_message_retry),
    ("m007_fact_time", m007_fact_time),
    ("m008_bot_replies", m008_bot_replies),
    ("m013_decision", m013_decision),
]


def applied(con: Any) -> list[str]:
    con.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    return [row[0] for row in con.execute("SELECT name FROM _migrations ORDER BY rowid")]


def recorded(con: Any) -> list[str]:
    """The migrations a database records, without creating the table (read-only
    connections; a file that is not guildlore's records none)."""
    try:
        return [row[0] for row in con.execute("SELECT name FROM _migrations ORDER BY rowid")]
    except sqlite.Error:
        return []


def migrate(con: Any, *, upto: str | None = None) -> list[str]:
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


def _run_script_in_tx(con: Any, fn: Callable[[Any], None]) -> None:
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
