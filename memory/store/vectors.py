"""SQL for vectors: blobs per (row, model) plus one sqlite-vec index per model.

``memory_fact_vectors`` / ``message_vectors`` hold every vector (source of
truth). ``vec_facts_<n>`` / ``vec_messages_<n>`` are vec0 indexes, one per
embedding model, partitioned by guild so a KNN scans only that guild. The fact
index holds active facts only, so archived facts never take KNN slots.

Every change to a vec0 index is also recorded as a change event
(``memory.db.changes``): the in-memory matrices of ``memory.retrieval``
mirror the vec0 indexes through these events, which the database delivers
once the transaction has committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from memory.db.changes import VectorKind, VectorsPut, VectorsRemoved, record
from memory.db.core import Connection
from memory.db.sql import dialect_of, rows_in

# Per kind: the blob table, its id column (also the vec0 index's), the vec0 index's prefix.
_TABLES: dict[VectorKind, tuple[str, str, str]] = {
    "facts": ("memory_fact_vectors", "fact_id", "vec_facts"),
    "messages": ("message_vectors", "message_seq", "vec_messages"),
}


def _put(
    con: Connection,
    kind: VectorKind,
    model: str,
    by_guild: dict[str, tuple[list[int], list[bytes]]],
) -> None:
    for guild_id, (ids, blobs) in by_guild.items():
        if ids:
            record(con, VectorsPut(kind, model, guild_id, tuple(ids), tuple(blobs)))


def _removed(con: Connection, kind: VectorKind, ids: Sequence[int]) -> None:
    if ids:
        record(con, VectorsRemoved(kind, tuple(int(i) for i in ids)))


def _model_row(con: Connection, model: str) -> tuple[int, int] | None:
    row = con.execute("SELECT id, dims FROM embedding_models WHERE model = ?", (model,)).fetchone()
    return (int(row["id"]), int(row["dims"])) if row else None


def ensure_model(con: Connection, model: str, dims: int, now: str) -> int:
    """Register a model and create its vec0 indexes; returns the model's number."""
    found = _model_row(con, model)
    if found is None and dialect_of(con) == "postgresql":
        # Another process may be registering the same model in a transaction
        # of its own: wait for it (the lock is held to our commit), then look
        # again, so the second process finds the row instead of colliding.
        cast(Any, con).execute_native("LOCK TABLE embedding_models IN SHARE ROW EXCLUSIVE MODE")
        found = _model_row(con, model)
    if found is not None:
        if found[1] != dims:
            raise ValueError(f"model {model!r} is registered with {found[1]} dims, not {dims}")
        return found[0]
    cur = con.execute(
        "INSERT INTO embedding_models (model, dims, created_at) VALUES (?, ?, ?)",
        (model, dims, now),
    )
    n = int(cur.lastrowid)
    if dialect_of(con) == "postgresql":
        _create_pg_indexes(con, n, dims)
        return n
    con.execute(
        f"CREATE VIRTUAL TABLE vec_facts_{n} USING vec0("
        f"fact_id INTEGER PRIMARY KEY, guild_id TEXT PARTITION KEY, "
        f"embedding float[{dims}] distance_metric=cosine)"
    )
    con.execute(
        f"CREATE VIRTUAL TABLE vec_messages_{n} USING vec0("
        f"message_seq INTEGER PRIMARY KEY, guild_id TEXT PARTITION KEY, "
        f"embedding float[{dims}] distance_metric=cosine)"
    )
    return n


def _create_pg_indexes(con: Connection, n: int, dims: int) -> None:
    """PostgreSQL's counterpart of the two vec0 indexes: pgvector columns of the
    model's width, with a B-tree on the guild, so a KNN is an exact scan of one
    guild's rows (no approximate index: recall stays 1)."""
    for table, id_col in ((f"vec_facts_{n}", "fact_id"), (f"vec_messages_{n}", "message_seq")):
        con.execute(
            f"CREATE TABLE {table} ({id_col} BIGINT PRIMARY KEY, guild_id TEXT NOT NULL, "
            f"embedding vector({int(dims)}) NOT NULL)"
        )
        con.execute(f"CREATE INDEX {table}_guild ON {table} (guild_id)")


def index_value(con: Connection, blob: bytes) -> Any:
    """A float32 blob as the index column takes it: the blob for vec0, pgvector's
    text form for PostgreSQL."""
    if dialect_of(con) != "postgresql":
        return blob
    values = np.frombuffer(bytes(blob), dtype=np.float32)
    return "[" + ",".join(format(float(v), ".9g") for v in values) + "]"


def model_number(con: Connection, model: str) -> int | None:
    found = _model_row(con, model)
    return found[0] if found else None


def all_models(con: Connection) -> list[tuple[int, str, int]]:
    return [
        (int(r["id"]), r["model"], int(r["dims"]))
        for r in con.execute("SELECT id, model, dims FROM embedding_models ORDER BY id")
    ]


def put_fact_vectors(
    con: Connection, model: str, dims: int, rows: Sequence[tuple[int, str, str, bytes]], now: str
) -> int:
    """rows: (fact_id, guild_id, content_hash, float32 blob). Skips facts that no
    longer exist (deleted while the embedding was computed)."""
    n = ensure_model(con, model, dims, now)
    written = 0
    indexed: dict[str, tuple[list[int], list[bytes]]] = {}
    unindexed: list[int] = []
    for fact_id, guild_id, content_hash, blob in rows:
        fact = con.execute(
            "SELECT is_active FROM memory_facts WHERE id = ? AND guild_id = ?", (fact_id, guild_id)
        ).fetchone()
        if fact is None:
            continue
        con.execute(
            "INSERT INTO memory_fact_vectors (fact_id, model, dims, guild_id, content_hash, "
            "embedding, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (fact_id, model) DO UPDATE SET embedding = excluded.embedding, "
            "content_hash = excluded.content_hash, created_at = excluded.created_at",
            (fact_id, model, dims, guild_id, content_hash, blob, now),
        )
        con.execute(f"DELETE FROM vec_facts_{n} WHERE fact_id = ?", (fact_id,))
        if fact["is_active"]:
            con.execute(
                f"INSERT INTO vec_facts_{n} (fact_id, guild_id, embedding) VALUES (?, ?, ?)",
                (fact_id, guild_id, index_value(con, blob)),
            )
            ids, blobs = indexed.setdefault(guild_id, ([], []))
            ids.append(fact_id)
            blobs.append(blob)
        else:
            unindexed.append(fact_id)
        written += 1
    _put(con, "facts", model, indexed)
    _removed(con, "facts", unindexed)
    return written


def put_message_vectors(
    con: Connection, model: str, dims: int, rows: Sequence[tuple[int, str, bytes]], now: str
) -> int:
    """rows: (message seq, guild_id, float32 blob)."""
    n = ensure_model(con, model, dims, now)
    written = 0
    indexed: dict[str, tuple[list[int], list[bytes]]] = {}
    for seq, guild_id, blob in rows:
        exists = con.execute(
            "SELECT 1 FROM messages WHERE seq = ? AND guild_id = ?", (seq, guild_id)
        ).fetchone()
        if exists is None:
            continue
        con.execute(
            "INSERT INTO message_vectors (message_seq, model, dims, guild_id, embedding, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (message_seq, model) DO UPDATE SET "
            "embedding = excluded.embedding, created_at = excluded.created_at",
            (seq, model, dims, guild_id, blob, now),
        )
        con.execute(f"DELETE FROM vec_messages_{n} WHERE message_seq = ?", (seq,))
        con.execute(
            f"INSERT INTO vec_messages_{n} (message_seq, guild_id, embedding) VALUES (?, ?, ?)",
            (seq, guild_id, index_value(con, blob)),
        )
        ids, blobs = indexed.setdefault(guild_id, ([], []))
        ids.append(seq)
        blobs.append(blob)
        written += 1
    _put(con, "messages", model, indexed)
    return written


def index_fact_vector_if_present(con: Connection, fact_id: int) -> None:
    """Put a re-activated fact's stored vectors back into the KNN indexes."""
    for r in con.execute(
        "SELECT v.model, v.guild_id, v.embedding, m.id AS n FROM memory_fact_vectors v "
        "JOIN embedding_models m ON m.model = v.model WHERE v.fact_id = ?",
        (fact_id,),
    ).fetchall():
        n = int(r["n"])
        con.execute(f"DELETE FROM vec_facts_{n} WHERE fact_id = ?", (fact_id,))
        con.execute(
            f"INSERT INTO vec_facts_{n} (fact_id, guild_id, embedding) VALUES (?, ?, ?)",
            (fact_id, r["guild_id"], index_value(con, r["embedding"])),
        )
        _put(con, "facts", r["model"], {r["guild_id"]: ([fact_id], [bytes(r["embedding"])])})


def delete_fact_vectors_index(con: Connection, fact_ids: Sequence[int]) -> None:
    if not fact_ids:
        return
    for n, _model, _dims in all_models(con):
        con.executemany(f"DELETE FROM vec_facts_{n} WHERE fact_id = ?", [(i,) for i in fact_ids])
    _removed(con, "facts", fact_ids)


def delete_message_vectors_index(con: Connection, seqs: Sequence[int]) -> None:
    if not seqs:
        return
    for n, _model, _dims in all_models(con):
        con.executemany(f"DELETE FROM vec_messages_{n} WHERE message_seq = ?", [(s,) for s in seqs])
    _removed(con, "messages", seqs)


def knn(
    con: Connection, kind: VectorKind, model: str, guild_id: str, query: bytes, k: int
) -> list[tuple[int, float]]:
    """(id, cosine distance) of the k nearest vectors of one guild in the vec0
    index of ``kind`` (active facts, or messages), nearest first."""
    n = model_number(con, model)
    if n is None:
        return []
    _, id_col, index = _TABLES[kind]
    if dialect_of(con) == "postgresql":
        rows = con.execute(
            f"SELECT {id_col}, embedding <=> ? AS distance FROM {index}_{n} "
            "WHERE guild_id = ? ORDER BY distance LIMIT ?",
            (index_value(con, query), guild_id, k),
        ).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]
    rows = con.execute(
        f"SELECT {id_col}, distance FROM {index}_{n} "
        "WHERE embedding MATCH ? AND k = ? AND guild_id = ?",
        (query, k, guild_id),
    ).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


def model_dims(con: Connection, model: str) -> int | None:
    found = _model_row(con, model)
    return found[1] if found else None


def count_vectors(con: Connection, kind: VectorKind, model: str, guild_id: str) -> int:
    """How many vectors the vec0 index of ``kind`` holds for one guild (its
    partition): active facts with a vector, or messages with a vector."""
    if kind == "facts":
        sql = (
            "SELECT count(*) FROM memory_fact_vectors v JOIN memory_facts f ON f.id = v.fact_id "
            "WHERE v.model = ? AND v.guild_id = ? AND f.is_active = 1"
        )
    else:
        sql = "SELECT count(*) FROM message_vectors WHERE model = ? AND guild_id = ?"
    return int(con.execute(sql, (model, guild_id)).fetchone()[0])


def load_vectors(
    con: Connection, kind: VectorKind, model: str, guild_id: str, dims: int
) -> tuple[np.ndarray, np.ndarray]:
    """(ids, float32 matrix) of one guild's vectors — what its vec0 partition holds."""
    if kind == "facts":
        sql = (
            "SELECT v.fact_id, v.embedding FROM memory_fact_vectors v "
            "JOIN memory_facts f ON f.id = v.fact_id "
            "WHERE v.model = ? AND v.guild_id = ? AND f.is_active = 1"
        )
    else:
        sql = "SELECT message_seq, embedding FROM message_vectors WHERE model = ? AND guild_id = ?"
    ids: list[int] = []
    blobs: list[bytes] = []
    width = dims * 4
    for r in con.execute(sql, (model, guild_id)):
        blob = r[1]
        if len(blob) != width:
            continue
        ids.append(int(r[0]))
        blobs.append(blob)
    if not ids:
        return np.zeros(0, dtype=np.int64), np.zeros((0, dims), dtype=np.float32)
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(ids), dims)
    return np.asarray(ids, dtype=np.int64), matrix


def stored_vectors(
    con: Connection, kind: VectorKind, model: str, ids: Sequence[int]
) -> dict[int, bytes]:
    """id → stored vector blob, for the ids of ``kind`` that have one for ``model``."""
    table, id_col, _ = _TABLES[kind]
    sql = f"SELECT {id_col}, embedding FROM {table} WHERE model = ? AND {id_col} IN ({{in}})"
    return {int(r[0]): bytes(r[1]) for r in rows_in(con, sql, list(ids), before=[model])}


def facts_missing_vectors(
    con: Connection, model: str, limit: int, guild_id: str | None = None
) -> list[tuple[int, str, str, str | None, str]]:
    """(fact_id, fact_type, fact, evidence, guild_id) of active facts with no vector."""
    args: list[Any] = [model]
    extra = ""
    if guild_id is not None:
        extra = " AND f.guild_id = ?"
        args.append(guild_id)
    args.append(limit)
    rows = con.execute(
        "SELECT f.id, f.fact_type, f.fact, f.evidence_text, f.guild_id FROM memory_facts f "
        "LEFT JOIN memory_fact_vectors v ON v.fact_id = f.id AND v.model = ? "
        f"WHERE f.is_active = 1 AND v.fact_id IS NULL{extra} ORDER BY f.id LIMIT ?",
        args,
    ).fetchall()
    return [
        (int(r["id"]), r["fact_type"], r["fact"], r["evidence_text"], r["guild_id"]) for r in rows
    ]


def messages_missing_vectors(con: Connection, model: str, limit: int) -> list[tuple[int, str, str]]:
    """(seq, guild_id, content) of messages with no vector for this model."""
    rows = con.execute(
        "SELECT m.seq, m.guild_id, m.content FROM messages m "
        "LEFT JOIN message_vectors v ON v.message_seq = m.seq AND v.model = ? "
        "WHERE v.message_seq IS NULL ORDER BY m.seq LIMIT ?",
        (model, limit),
    ).fetchall()
    return [(int(r["seq"]), r["guild_id"], r["content"]) for r in rows]


def vector_counts(con: Connection) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for n, model, _dims in all_models(con):
        facts = con.execute(
            "SELECT count(*) FROM memory_fact_vectors WHERE model = ?", (model,)
        ).fetchone()[0]
        indexed = con.execute(f"SELECT count(*) FROM vec_facts_{n}").fetchone()[0]
        msgs = con.execute(
            "SELECT count(*) FROM message_vectors WHERE model = ?", (model,)
        ).fetchone()[0]
        out[model] = {"fact_vectors": facts, "fact_index": indexed, "message_vectors": msgs}
    return out
