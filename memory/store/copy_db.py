"""Copy a SQLite memory into PostgreSQL: ``guildlore migrate-db``.

Streamed: each table is read in key order, ``BATCH`` rows at a time, and
written with ``COPY``. Resumable: the target keeps ``_copy_progress``
(table, last key copied, rows copied), updated in the transaction that writes
the batch, so a copy stopped anywhere — Ctrl-C, a crash, a lost connection —
starts again after the last batch that committed. Verified: at the end every
table's row count in the target must equal the source's.

The target gets the PostgreSQL schema first (its migrations). Its
triggers are off while the rows go in — the rows already carry what the
triggers would add (revisions, change log, archive dates) — and back on
afterwards; then the derived parts are built from the copied rows: the
full-text index (what the insert triggers write for a new row), the
per-model vector indexes (from the stored vectors: active facts, every
message), and the identity sequences (past the largest copied id).

A target that already holds guildlore rows without a copy in progress is
refused: the copy never merges two memories.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memory.db.core import Connection
from memory.db.postgres import driver as postgres
from memory.db.postgres.migrations import migrate as migrate_pg
from memory.db.postgres.migrations import reset_identities
from memory.db.sqlite import driver as sqlite
from memory.db.sqlite.driver import ordinary_tables
from memory.db.sqlite.migrations import migrate as migrate_sqlite
from memory.errors import StorageError
from memory.store.vectors import index_value

log = logging.getLogger(__name__)

BATCH = 2_000
PROGRESS = "_copy_progress"
# Tables the target's own migrations fill; never copied.
SKIP = {"_migrations", PROGRESS}
# The full-text index built from the copied rows: what the insert triggers
# write for each new row.
FTS_REBUILD: tuple[str, ...] = (
    "INSERT INTO memory_facts_fts (rowid, tsv) SELECT id, "
    "guildlore_fts_vector(fact) || guildlore_fts_vector(evidence_text) FROM memory_facts "
    "ON CONFLICT (rowid) DO UPDATE SET tsv = excluded.tsv",
    "INSERT INTO messages_fts (rowid, tsv) SELECT seq, guildlore_fts_vector(content) "
    "FROM messages ON CONFLICT (rowid) DO UPDATE SET tsv = excluded.tsv",
)

Progress = Callable[[str, int, int], None]  # table, rows copied so far, rows in all


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]  # the order rows are read in; ("rowid",) for rowid tables


@dataclass
class CopyReport:
    tables: dict[str, tuple[int, int]] = field(default_factory=dict)  # name → (source, target)
    vectors: dict[str, int] = field(default_factory=dict)  # vector index → rows
    resumed: bool = False

    @property
    def ok(self) -> bool:
        return all(s == t for s, t in self.tables.values())

    def mismatches(self) -> list[str]:
        return [
            f"{n}: {s} in the source, {t} in the target"
            for n, (s, t) in self.tables.items()
            if s != t
        ]


def source_tables(con: Connection) -> list[Table]:
    """The SQLite file's ordinary tables (not FTS5 or vec0 tables, nor their
    shadow tables, nor SQLite's own)."""
    out: list[Table] = []
    for name in ordinary_tables(con):
        if name in SKIP:
            continue
        ddl = str(
            con.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
        )
        info = con.execute(f'PRAGMA table_info("{name}")').fetchall()
        columns = tuple(str(c[1]) for c in info)
        if "WITHOUT ROWID" in ddl.upper():
            pk = sorted((int(c[5]), str(c[1])) for c in info if int(c[5]) > 0)
            key = tuple(n for _, n in pk)
        else:
            key = ("rowid",)
        out.append(Table(name, columns, key))
    return _parents_first(con, out)


def _parents_first(con: Connection, tables: list[Table]) -> list[Table]:
    """``tables`` ordered so a table comes after those its foreign keys name:
    the target checks every key as the rows go in."""
    names = {t.name for t in tables}
    parents = {
        t.name: {
            str(fk[2])
            for fk in con.execute(f'PRAGMA foreign_key_list("{t.name}")')
            if str(fk[2]) in names and str(fk[2]) != t.name
        }
        for t in tables
    }
    ordered: list[Table] = []
    placed: set[str] = set()
    pending = list(tables)
    while pending:
        ready = [t for t in pending if parents[t.name] <= placed]
        if not ready:  # a cycle: keep the rest in name order
            ready = pending[:1]
        for t in ready:
            ordered.append(t)
            placed.add(t.name)
        pending = [t for t in pending if t.name not in placed]
    return ordered


def _batches(
    con: Connection, table: Table, after: list[Any] | None, batch: int
) -> Iterator[list[Any]]:
    cols = ", ".join(f'"{c}"' for c in table.columns)
    keys = ", ".join(table.key)
    select = f'SELECT {keys}, {cols} FROM "{table.name}"'
    while True:
        if after is None:
            rows = con.execute(f"{select} ORDER BY {keys} LIMIT ?", (batch,)).fetchall()
        else:
            marks = ", ".join("?" * len(table.key))
            rows = con.execute(
                f"{select} WHERE ({keys}) > ({marks}) ORDER BY {keys} LIMIT ?",
                (*after, batch),
            ).fetchall()
        if not rows:
            return
        yield rows
        after = list(rows[-1][: len(table.key)])


def _target_columns(raw: Any, name: str) -> set[str]:
    rows = raw.execute(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = %s",
        (name,),
    ).fetchall()
    return {str(r[0]) for r in rows}


def _user_tables(raw: Any) -> list[str]:
    rows = raw.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"
    ).fetchall()
    return [str(r[0]) for r in rows]


def _prepare_target(raw: Any, tables: list[Table]) -> bool:
    """Schema and progress table; True when a copy is being resumed."""
    migrate_pg(raw)
    raw.execute(
        f"CREATE TABLE IF NOT EXISTS {PROGRESS} (table_name TEXT PRIMARY KEY, "
        "last_key TEXT, copied BIGINT NOT NULL DEFAULT 0, done BOOLEAN NOT NULL DEFAULT FALSE)"
    )
    started = int(postgres.scalar(raw, f"SELECT count(*) FROM {PROGRESS}")) > 0
    if not started:
        for t in tables:
            if postgres.scalar(raw, f'SELECT EXISTS (SELECT 1 FROM "{t.name}")'):
                raise StorageError(
                    f"the target database already holds guildlore data ({t.name}); "
                    "copy into an empty database"
                )
    return bool(started)


def _copy_table(
    src: Any, raw: Any, table: Table, total: int, progress: Progress | None, batch: int
) -> None:
    missing = set(table.columns) - _target_columns(raw, table.name)
    if missing:
        raise StorageError(f"the target has no column {sorted(missing)} in {table.name}")
    row = raw.execute(
        f"SELECT last_key, copied, done FROM {PROGRESS} WHERE table_name = %s", (table.name,)
    ).fetchone()
    if row is not None and row[2]:
        return
    after = json.loads(row[0]) if row is not None and row[0] else None
    copied = int(row[1]) if row is not None else 0
    cols = ", ".join(f'"{c}"' for c in table.columns)
    width = len(table.key)
    for rows in _batches(src, table, after, batch):
        with raw.transaction():
            with raw.cursor().copy(f'COPY "{table.name}" ({cols}) FROM STDIN') as cp:
                for r in rows:
                    cp.write_row(tuple(r)[width:])
            copied += len(rows)
            last = json.dumps(list(rows[-1][:width]))
            raw.execute(
                f"INSERT INTO {PROGRESS} (table_name, last_key, copied) VALUES (%s, %s, %s) "
                "ON CONFLICT (table_name) DO UPDATE SET last_key = excluded.last_key, "
                "copied = excluded.copied",
                (table.name, last, copied),
            )
        if progress is not None:
            progress(table.name, copied, total)
    raw.execute(
        f"INSERT INTO {PROGRESS} (table_name, copied, done) VALUES (%s, %s, TRUE) "
        "ON CONFLICT (table_name) DO UPDATE SET done = TRUE",
        (table.name, copied),
    )


def _set_triggers(raw: Any, enabled: bool) -> None:
    verb = "ENABLE" if enabled else "DISABLE"
    for name in _user_tables(raw):
        if name != PROGRESS:
            raw.execute(f'ALTER TABLE "{name}" {verb} TRIGGER USER')


def _build_vector_indexes(src: Any, raw: Any) -> dict[str, int]:
    """The per-model KNN tables, from the copied models and stored vectors."""
    con = postgres.PgConnection(raw, postgres.identity_columns(raw))
    out: dict[str, int] = {}
    for n, _model, dims in src.execute("SELECT id, model, dims FROM embedding_models"):
        for kind, id_col, truth, active in (
            ("facts", "fact_id", "memory_fact_vectors", True),
            ("messages", "message_seq", "message_vectors", False),
        ):
            table = f"vec_{kind}_{int(n)}"
            raw.execute(
                f"CREATE TABLE IF NOT EXISTS {table} ({id_col} BIGINT PRIMARY KEY, "
                f"guild_id TEXT NOT NULL, embedding vector({int(dims)}) NOT NULL)"
            )
            raw.execute(f"CREATE INDEX IF NOT EXISTS {table}_guild ON {table} (guild_id)")
            raw.execute(f"TRUNCATE {table}")
            join = " JOIN memory_facts f ON f.id = v.fact_id AND f.is_active = 1" if active else ""
            cur = src.execute(
                f"SELECT v.{id_col}, v.guild_id, v.embedding FROM {truth} v{join} "
                f"WHERE v.model = (SELECT model FROM embedding_models WHERE id = ?)",
                (int(n),),
            )
            count = 0
            while rows := cur.fetchmany(BATCH):
                with raw.transaction():
                    with raw.cursor().copy(
                        f"COPY {table} ({id_col}, guild_id, embedding) FROM STDIN"
                    ) as cp:
                        for r in rows:
                            cp.write_row((int(r[0]), r[1], index_value(con, bytes(r[2]))))
                count += len(rows)
            out[table] = count
    return out


def copy_sqlite_to_postgres(
    source: str, target_url: str, *, progress: Progress | None = None, batch: int = BATCH
) -> CopyReport:
    """Copy the SQLite file ``source`` into the PostgreSQL database at
    ``target_url`` (see the module docstring). Blocking: run it on a thread."""
    src = sqlite.connect(source)
    try:
        migrate_sqlite(src)  # what opening it would do: the copy reads the latest schema
        tables = source_tables(src)
        raw = postgres.connect_raw(target_url)
        try:
            report = CopyReport(resumed=_prepare_target(raw, tables))
            _set_triggers(raw, enabled=False)
            try:
                for t in tables:
                    total = int(src.execute(f'SELECT count(*) FROM "{t.name}"').fetchone()[0])
                    _copy_table(src, raw, t, total, progress, batch)
            finally:
                _set_triggers(raw, enabled=True)
            for statement in FTS_REBUILD:
                raw.execute(statement)
            report.vectors = _build_vector_indexes(src, raw)
            reset_identities(raw)
            for t in tables:
                s = int(src.execute(f'SELECT count(*) FROM "{t.name}"').fetchone()[0])
                d = int(postgres.scalar(raw, f'SELECT count(*) FROM "{t.name}"'))
                report.tables[t.name] = (s, d)
            if report.ok:
                raw.execute(f"DROP TABLE {PROGRESS}")
            return report
        finally:
            raw.close()
    finally:
        src.close()
