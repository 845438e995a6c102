"""Which facts and messages still need a vector for a model: the reads behind
background embedding and re-index."""

from __future__ import annotations

from collections.abc import Callable

from memory.db.core import Connection


def facts_needing(
    con: Connection,
    guild_id: str,
    model: str,
    ids: list[int],
    text_hash: Callable[[str, str, str | None], str],
) -> list[tuple[int, str, str, str | None]]:
    """Active facts among ``ids`` whose vector for ``model`` is missing or stale:
    ``text_hash(type, fact, evidence)`` differs from the hash stored with it."""
    marks = ",".join("?" * len(ids))
    rows = con.execute(
        "SELECT f.id, f.fact_type, f.fact, f.evidence_text, v.content_hash FROM memory_facts f "
        "LEFT JOIN memory_fact_vectors v ON v.fact_id = f.id AND v.model = ? "
        f"WHERE f.guild_id = ? AND f.id IN ({marks}) AND f.is_active = 1",
        [model, guild_id, *ids],
    ).fetchall()
    # Hash before you pay: a fact whose text did not change keeps its vector.
    return [
        (int(r[0]), r[1], r[2], r[3])
        for r in rows
        if r[4] is None or r[4] != text_hash(r[1], r[2], r[3])
    ]


def messages_without_vector(
    con: Connection, guild_id: str, model: str, ids: list[str]
) -> list[tuple[int, str]]:
    """(seq, content) of the messages among ``ids`` with no vector for ``model``."""
    marks = ",".join("?" * len(ids))
    rows = con.execute(
        "SELECT m.seq, m.content FROM messages m "
        "LEFT JOIN message_vectors v ON v.message_seq = m.seq AND v.model = ? "
        f"WHERE m.guild_id = ? AND m.id IN ({marks}) AND v.message_seq IS NULL "
        "AND length(trim(m.content)) >= 2",
        [model, guild_id, *ids],
    ).fetchall()
    return [(int(r[0]), r[1]) for r in rows]


def guild_messages_without_vector(
    con: Connection, guild_id: str, model: str, limit: int, after_seq: int = 0
) -> list[tuple[int, str]]:
    """The next ``limit`` messages of a guild after ``after_seq`` with no vector."""
    rows = con.execute(
        "SELECT m.seq, m.content FROM messages m "
        "LEFT JOIN message_vectors v ON v.message_seq = m.seq AND v.model = ? "
        "WHERE m.seq > ? AND m.guild_id = ? AND v.message_seq IS NULL "
        "AND length(trim(m.content)) >= 2 "
        "ORDER BY m.seq LIMIT ?",
        (model, after_seq, guild_id, limit),
    ).fetchall()
    return [(int(r[0]), r[1]) for r in rows]
