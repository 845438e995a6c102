"""SQL for channel episodes: the messages waiting to be summarised, the
episode rows (a fact, its sources, its span), the per-channel mark and the
rebuild queue. Functions run inside the caller's transaction."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory.db.core import Connection
from memory.db.sql import chunks, marks
from memory.models import EPISODE_SUBJECT, Episode, Fact, StoredMessage
from memory.store.episode_sources import EPISODE_TYPE
from memory.store.fact_time import add_source
from memory.store.facts import add_history, get_fact
from memory.store.messages import MESSAGE_COLUMNS, row_to_message

# An episode is believed about as much as a fact the extractor was unsure of:
# a summary is a reading of the conversation, not something anyone said.
EPISODE_CONFIDENCE = 0.6


@dataclass(frozen=True)
class Rebuild:
    id: int
    guild_id: str
    channel_id: str
    message_ids: tuple[str, ...]


def channels_with_news(con: Connection) -> list[tuple[str, str]]:
    """(guild, channel) pairs holding a member's message newer than their mark."""
    out: list[tuple[str, str]] = []
    for r in con.execute(
        "SELECT c.guild_id, c.channel_id, k.last_created_at, k.last_seq FROM channels c "
        "LEFT JOIN episode_marks k ON k.guild_id = c.guild_id AND k.channel_id = c.channel_id"
    ).fetchall():
        after, seq = (r[2], r[3]) if r[2] is not None else ("", -1)
        row = con.execute(
            "SELECT 1 FROM messages WHERE guild_id = ? AND channel_id = ? AND is_bot = 0 "
            "AND (created_at > ? OR (created_at = ? AND seq > ?)) LIMIT 1",
            (r[0], r[1], after, after, seq),
        ).fetchone()
        if row is not None:
            out.append((str(r[0]), str(r[1])))
    return out


def new_messages(
    con: Connection, guild_id: str, channel_id: str, limit: int
) -> list[tuple[int, StoredMessage]]:
    """A channel's members' messages after its mark, oldest first, with their seq."""
    mark = con.execute(
        "SELECT last_created_at, last_seq FROM episode_marks WHERE guild_id = ? AND channel_id = ?",
        (guild_id, channel_id),
    ).fetchone()
    after, seq = (str(mark[0]), int(mark[1])) if mark is not None else ("", -1)
    rows = con.execute(
        f"SELECT seq, {MESSAGE_COLUMNS} FROM messages WHERE guild_id = ? AND channel_id = ? "
        "AND is_bot = 0 AND (created_at > ? OR (created_at = ? AND seq > ?)) "
        "ORDER BY created_at, seq LIMIT ?",
        (guild_id, channel_id, after, after, seq, limit),
    ).fetchall()
    return [(int(r["seq"]), row_to_message(r)) for r in rows]


def messages_by_ids(
    con: Connection, guild_id: str, message_ids: Sequence[str]
) -> list[tuple[int, StoredMessage]]:
    """Stored messages of ``message_ids`` (gone ones skipped), oldest first."""
    out: list[tuple[int, StoredMessage]] = []
    for chunk in chunks(list(message_ids)):
        rows = con.execute(
            f"SELECT seq, {MESSAGE_COLUMNS} FROM messages WHERE guild_id = ? "
            f"AND id IN ({marks(len(chunk))})",
            [guild_id, *chunk],
        ).fetchall()
        out.extend((int(r["seq"]), row_to_message(r)) for r in rows)
    out.sort(key=lambda p: (p[1].created_at, p[0]))
    return out


def set_mark(
    con: Connection, guild_id: str, channel_id: str, created_at: str, seq: int, now: str
) -> None:
    """The channel's messages up to (created_at, seq) are summarised or passed over."""
    con.execute(
        "INSERT INTO episode_marks (guild_id, channel_id, last_created_at, last_seq, updated_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (guild_id, channel_id) DO UPDATE SET "
        "last_created_at = excluded.last_created_at, last_seq = excluded.last_seq, "
        "updated_at = excluded.updated_at",
        (guild_id, channel_id, created_at, seq, now),
    )


def _episode_text_taken(con: Connection, guild_id: str, text: str) -> bool:
    row = con.execute(
        "SELECT 1 FROM memory_facts WHERE guild_id = ? AND subject = ? AND fact = ?",
        (guild_id, EPISODE_SUBJECT, text),
    ).fetchone()
    return row is not None


def insert_episode(
    con: Connection,
    guild_id: str,
    channel_id: str,
    text: str,
    messages: Sequence[StoredMessage],
    method: str,
    now: str,
    actor: str,
) -> Fact:
    """Store an episode written from ``messages`` (oldest first): a fact of
    type ``episode`` sourced by each of them, its span, an ``add`` history row."""
    first, last = messages[0], messages[-1]
    # Two stretches can summarise to the same words (a channel that repeats
    # itself); the text is unique per guild, so this one says when it ended
    # (and, if even that is taken, which one it is) rather than failing the
    # run again and again.
    ended = last.created_at[:16].replace("T", " ")
    base, n = text, 1
    while _episode_text_taken(con, guild_id, text):
        text = f"{base} (until {ended})" if n == 1 else f"{base} (until {ended}, #{n})"
        n += 1
    cur = con.execute(
        "INSERT INTO memory_facts (guild_id, channel_id, subject, fact, fact_type, "
        "evidence_text, source_message_id, confidence, is_active, created_at, updated_at, "
        "observed_at, last_observed_at, valid_from) "
        "VALUES (?, ?, ?, ?, ?, NULL, ?, ?, 1, ?, ?, ?, ?, ?)",
        (
            guild_id,
            channel_id,
            EPISODE_SUBJECT,
            text,
            EPISODE_TYPE,
            last.id,
            EPISODE_CONFIDENCE,
            now,
            now,
            first.created_at,
            last.created_at,
            first.created_at,
        ),
    )
    fact_id = int(cur.lastrowid)
    for m in messages:
        add_source(con, guild_id, fact_id, m.id, m.created_at)
    con.execute(
        "INSERT INTO episodes (fact_id, guild_id, channel_id, started_at, ended_at, "
        "message_count, method, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            fact_id,
            guild_id,
            channel_id,
            first.created_at,
            last.created_at,
            len(messages),
            method,
            now,
        ),
    )
    add_history(
        con,
        guild_id,
        fact_id,
        EPISODE_SUBJECT,
        "add",
        None,
        text,
        actor,
        last.id,
        f"episode of {len(messages)} messages ({method})",
        now=now,
        counted_on=last.created_at,
    )
    return get_fact(con, guild_id, fact_id)  # type: ignore[return-value]


def channel_name(con: Connection, guild_id: str, channel_id: str) -> str | None:
    row = con.execute(
        "SELECT name FROM channels WHERE guild_id = ? AND channel_id = ?", (guild_id, channel_id)
    ).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def pending_rebuilds(con: Connection, limit: int) -> list[Rebuild]:
    rows = con.execute(
        "SELECT id, guild_id, channel_id, message_ids FROM episode_rebuilds ORDER BY id LIMIT ?",
        (limit,),
    ).fetchall()
    out: list[Rebuild] = []
    for r in rows:
        try:
            ids = tuple(str(i) for i in json.loads(r["message_ids"]))
        except (ValueError, TypeError):
            ids = ()
        out.append(Rebuild(int(r["id"]), str(r["guild_id"]), str(r["channel_id"]), ids))
    return out


def finish_rebuild(con: Connection, rebuild_id: int) -> None:
    con.execute("DELETE FROM episode_rebuilds WHERE id = ?", (rebuild_id,))


_EPISODE_SELECT = (
    "SELECT e.fact_id, e.guild_id, e.channel_id, f.fact, e.started_at, e.ended_at, "
    "e.message_count, e.method, e.created_at FROM episodes e "
    "JOIN memory_facts f ON f.id = e.fact_id "
)


def _episode(con: Connection, r: Any, with_sources: bool) -> Episode:
    sources: tuple[str, ...] = ()
    if with_sources:
        sources = tuple(
            str(s[0])
            for s in con.execute(
                "SELECT message_id FROM fact_sources WHERE fact_id = ? ORDER BY observed_at, "
                "message_id",
                (int(r[0]),),
            )
        )
    return Episode(
        fact_id=int(r[0]),
        guild_id=str(r[1]),
        channel_id=str(r[2]),
        text=str(r[3]),
        started_at=str(r[4]),
        ended_at=str(r[5]),
        message_count=int(r[6]),
        method=str(r[7]),
        created_at=str(r[8]),
        source_ids=sources,
    )


def list_episodes(
    con: Connection,
    guild_id: str,
    channel_id: str | None,
    limit: int,
    *,
    with_sources: bool = False,
) -> list[Episode]:
    """A guild's (or one channel's) active episodes, newest first."""
    sql = _EPISODE_SELECT + "WHERE e.guild_id = ? AND f.is_active = 1"
    args: list[Any] = [guild_id]
    if channel_id is not None:
        sql += " AND e.channel_id = ?"
        args.append(channel_id)
    sql += " ORDER BY e.ended_at DESC, e.fact_id DESC LIMIT ?"
    args.append(limit)
    return [_episode(con, r, with_sources) for r in con.execute(sql, args).fetchall()]


def get_episode(con: Connection, guild_id: str, fact_id: int) -> Episode | None:
    row = con.execute(
        _EPISODE_SELECT + "WHERE e.guild_id = ? AND e.fact_id = ?", (guild_id, fact_id)
    ).fetchone()
    return None if row is None else _episode(con, row, True)


def channel_counts(con: Connection, guild_id: str) -> list[tuple[str, str | None, int, str | None]]:
    """(channel id, name, active episodes, latest end) per channel with episodes."""
    rows = con.execute(
        "SELECT e.channel_id, c.name, count(*), max(e.ended_at) FROM episodes e "
        "JOIN memory_facts f ON f.id = e.fact_id "
        "LEFT JOIN channels c ON c.guild_id = e.guild_id AND c.channel_id = e.channel_id "
        "WHERE e.guild_id = ? AND f.is_active = 1 GROUP BY e.channel_id, c.name "
        "ORDER BY max(e.ended_at) "
        "DESC",
        (guild_id,),
    ).fetchall()
    return [(str(r[0]), r[1], int(r[2]), r[3]) for r in rows]
