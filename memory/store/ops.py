"""SQL for operations data: traces, the action log, guild settings, health."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memory.db.changes import SettingsChanged, record
from memory.db.core import Connection
from memory.db.sql import chunks, marks
from memory.models import ActionLogEntry, Trace
from memory.store.vectors import vector_counts


def add_traces(con: Connection, rows: Sequence[dict[str, Any]], now: str) -> int:
    con.executemany(
        "INSERT INTO memory_traces (guild_id, channel_id, message_id, reply_id, fact_id, action, "
        "content, score, score_parts, memory_type, source, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                r["guild_id"],
                r.get("channel_id"),
                r.get("message_id"),
                r.get("reply_id"),
                r.get("fact_id"),
                r["action"],
                (r.get("content") or "")[:300],
                r.get("score"),
                json.dumps(r["score_parts"]) if r.get("score_parts") is not None else None,
                r.get("memory_type"),
                r.get("source"),
                now,
            )
            for r in rows
        ],
    )
    return len(rows)


def _row_to_trace(r: Any) -> Trace:
    return Trace(
        id=int(r["id"]),
        guild_id=r["guild_id"],
        channel_id=r["channel_id"],
        message_id=r["message_id"],
        fact_id=r["fact_id"],
        action=r["action"],
        content=r["content"],
        score=r["score"],
        score_parts=json.loads(r["score_parts"]) if r["score_parts"] else None,
        created_at=r["created_at"],
        memory_type=r["memory_type"],
        source=r["source"],
    )


_TRACE_COLS = (
    "id, guild_id, channel_id, message_id, fact_id, action, content, score, score_parts, "
    "memory_type, source, created_at"
)


def _fact_source(fact_type: str, actor: str | None, message_source: str | None) -> str:
    if actor is not None and actor.startswith("operator"):
        return "operator"
    if fact_type == "lore":
        return "member" if actor is not None and actor.startswith("user:") else "lore"
    if message_source in ("voice", "import"):
        return message_source
    return "extractor"


def trace_sources(
    con: Connection, guild_id: str, fact_ids: Sequence[int], message_ids: Sequence[str]
) -> tuple[dict[int, str], dict[str, str]]:
    """Where each fact came from (extractor, lore, operator, member, import,
    voice: its first history row's actor, else its source message's kind),
    and each message's kind as a source (member, import, voice)."""
    facts: dict[int, str] = {}
    for ids in chunks(list(fact_ids)):
        rows = con.execute(
            "SELECT f.id, f.fact_type, m.source AS message_source, "
            " (SELECT h.actor FROM fact_history h WHERE h.fact_id = f.id ORDER BY h.id LIMIT 1)"
            "   AS actor "
            "FROM memory_facts f LEFT JOIN messages m ON m.id = f.source_message_id "
            f"WHERE f.guild_id = ? AND f.id IN ({marks(len(ids))})",
            [guild_id, *ids],
        ).fetchall()
        for r in rows:
            facts[int(r["id"])] = _fact_source(r["fact_type"], r["actor"], r["message_source"])
    messages: dict[str, str] = {}
    for chunk in chunks(list(message_ids)):
        for r in con.execute(
            f"SELECT id, source FROM messages WHERE guild_id = ? AND id IN ({marks(len(chunk))})",
            [guild_id, *chunk],
        ):
            messages[r["id"]] = "member" if r["source"] == "text" else r["source"]
    return facts, messages


def traces_for_message(con: Connection, guild_id: str, message_id: str) -> list[Trace]:
    rows = con.execute(
        f"SELECT {_TRACE_COLS} FROM memory_traces WHERE guild_id = ? "
        "AND (message_id = ? OR reply_id = ?) ORDER BY id",
        (guild_id, message_id, message_id),
    ).fetchall()
    return [_row_to_trace(r) for r in rows]


def last_traced_message(con: Connection, guild_id: str, channel_id: str) -> str | None:
    row = con.execute(
        "SELECT message_id FROM memory_traces WHERE guild_id = ? AND channel_id = ? "
        "ORDER BY id DESC LIMIT 1",
        (guild_id, channel_id),
    ).fetchone()
    return row["message_id"] if row else None


def traces_for_fact(con: Connection, guild_id: str, fact_id: int, limit: int = 50) -> list[Trace]:
    rows = con.execute(
        f"SELECT {_TRACE_COLS} FROM memory_traces WHERE guild_id = ? AND fact_id = ? "
        "ORDER BY id DESC LIMIT ?",
        (guild_id, fact_id, limit),
    ).fetchall()
    return [_row_to_trace(r) for r in rows]


def recent_traces(con: Connection, guild_id: str | None, limit: int) -> list[Trace]:
    if guild_id is None:
        rows = con.execute(
            f"SELECT {_TRACE_COLS} FROM memory_traces ORDER BY id DESC LIMIT ?", (limit,)
        ).fetchall()
    else:
        rows = con.execute(
            f"SELECT {_TRACE_COLS} FROM memory_traces WHERE guild_id = ? ORDER BY id DESC LIMIT ?",
            (guild_id, limit),
        ).fetchall()
    return [_row_to_trace(r) for r in rows]


# -- action log ------------------------------------------------------------------


def log_action(
    con: Connection,
    kind: str,
    message: str,
    now: str,
    *,
    guild_id: str | None = None,
    subject: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    con.execute(
        "INSERT INTO action_log (guild_id, subject, kind, message, detail, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (guild_id, subject, kind, message[:500], json.dumps(detail) if detail else None, now),
    )


def memory_reset_at(con: Connection, guild_id: str, keys: Sequence[str]) -> str | None:
    """When what this guild remembers last changed from outside (a purge of
    the guild, or a change of one of the setting ``keys``), as the action log
    remembers it (None: not within its retention)."""
    wanted = set(keys)
    rows = con.execute(
        "SELECT kind, created_at, detail FROM action_log WHERE guild_id = ? "
        "AND kind IN ('settings_change', 'guild_purged') ORDER BY id DESC",
        (guild_id,),
    )
    for r in rows:
        if r[0] == "guild_purged":
            return str(r[1])
        try:
            key = json.loads(r[2] or "{}").get("key")
        except (ValueError, AttributeError):
            continue
        if key in wanted:
            return str(r[1])
    return None


def log_actions(con: Connection, rows: Sequence[dict[str, Any]], now: str) -> None:
    for r in rows:
        log_action(
            con,
            r["kind"],
            r["message"],
            now,
            guild_id=r.get("guild_id"),
            subject=r.get("subject"),
            detail=r.get("detail"),
        )


def action_log(
    con: Connection,
    *,
    kind: str | None = None,
    guild_id: str | None = None,
    before_id: int | None = None,
    limit: int = 100,
) -> list[ActionLogEntry]:
    where: list[str] = []
    args: list[Any] = []
    if kind:
        where.append("kind = ?")
        args.append(kind)
    if guild_id:
        where.append("guild_id = ?")
        args.append(guild_id)
    if before_id:
        where.append("id < ?")
        args.append(before_id)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    args.append(limit)
    rows = con.execute(
        f"SELECT id, guild_id, kind, message, detail, created_at FROM action_log {clause} "
        "ORDER BY id DESC LIMIT ?",
        args,
    ).fetchall()
    return [
        ActionLogEntry(
            id=int(r["id"]),
            guild_id=r["guild_id"],
            kind=r["kind"],
            message=r["message"],
            detail=json.loads(r["detail"]) if r["detail"] else None,
            created_at=r["created_at"],
        )
        for r in rows
    ]


def prune_action_log(con: Connection, *, older_than: str | None, keep_rows: int, limit: int) -> int:
    """Delete at most ``limit`` of the oldest rows that are older than ``older_than``
    (ISO time; None: no age limit) or beyond the newest ``keep_rows`` (0: no cap)."""
    cutoff_id = 0
    if keep_rows > 0:
        row = con.execute(
            "SELECT id FROM action_log ORDER BY id DESC LIMIT 1 OFFSET ?", (keep_rows,)
        ).fetchone()
        cutoff_id = int(row["id"]) if row else 0
    return int(
        con.execute(
            "DELETE FROM action_log WHERE id IN (SELECT id FROM action_log "
            "WHERE id <= ? OR created_at < ? ORDER BY id LIMIT ?)",
            (cutoff_id, older_than or "", limit),
        ).rowcount
    )


# -- settings and opt-outs ---------------------------------------------------------------


def get_guild_settings(con: Connection, guild_id: str) -> dict[str, str]:
    return {
        r["key"]: r["value"]
        for r in con.execute(
            "SELECT key, value FROM guild_settings WHERE guild_id = ?", (guild_id,)
        )
    }


def all_guild_settings(con: Connection) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for r in con.execute("SELECT guild_id, key, value FROM guild_settings"):
        out.setdefault(r["guild_id"], {})[r["key"]] = r["value"]
    return out


def set_guild_setting(
    con: Connection, guild_id: str, key: str, value: str | None, now: str
) -> None:
    record(con, SettingsChanged(guild_id))
    if value is None:
        con.execute("DELETE FROM guild_settings WHERE guild_id = ? AND key = ?", (guild_id, key))
        return
    con.execute(
        "INSERT INTO guild_settings (guild_id, key, value, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (guild_id, key) DO UPDATE SET value = excluded.value, "
        "updated_at = excluded.updated_at",
        (guild_id, key, value, now),
    )


def set_voice_opt_out(
    con: Connection, guild_id: str, user_id: str, opted_out: bool, now: str
) -> None:
    if opted_out:
        con.execute(
            "INSERT OR IGNORE INTO voice_opt_outs (guild_id, user_id, created_at) VALUES (?, ?, ?)",
            (guild_id, user_id, now),
        )
    else:
        con.execute(
            "DELETE FROM voice_opt_outs WHERE guild_id = ? AND user_id = ?", (guild_id, user_id)
        )


def voice_opt_outs(con: Connection) -> set[tuple[str, str]]:
    return {(r["guild_id"], r["user_id"]) for r in con.execute("SELECT * FROM voice_opt_outs")}


# -- guilds and health -----------------------------------------------------------------


def guild_overview(con: Connection) -> list[dict[str, Any]]:
    rows = con.execute(
        "SELECT g.guild_id, g.name, "
        " (SELECT count(*) FROM memory_facts f WHERE f.guild_id = g.guild_id AND f.is_active = 1)"
        "   AS active_facts, "
        " (SELECT count(*) FROM memory_facts f WHERE f.guild_id = g.guild_id AND f.is_active = 0)"
        "   AS archived_facts, "
        " (SELECT count(*) FROM messages m WHERE m.guild_id = g.guild_id) AS messages, "
        " (SELECT count(*) FROM members u WHERE u.guild_id = g.guild_id) AS members, "
        " (SELECT max(created_at) FROM messages m WHERE m.guild_id = g.guild_id) AS last_message "
        "FROM guilds g ORDER BY g.guild_id"
    ).fetchall()
    return [dict(zip(r.keys(), tuple(r), strict=True)) for r in rows]


def members(con: Connection, guild_id: str) -> list[dict[str, Any]]:
    rows = con.execute(
        "SELECT u.user_id, u.display_name, "
        " (SELECT count(*) FROM memory_facts f WHERE f.guild_id = u.guild_id "
        "   AND f.subject = u.user_id AND f.is_active = 1) AS facts "
        "FROM members u WHERE u.guild_id = ? ORDER BY facts DESC, u.display_name",
        (guild_id,),
    ).fetchall()
    return [dict(zip(r.keys(), tuple(r), strict=True)) for r in rows]


def channels(con: Connection, guild_id: str) -> list[dict[str, Any]]:
    rows = con.execute(
        "SELECT channel_id, name FROM channels WHERE guild_id = ? ORDER BY name, channel_id",
        (guild_id,),
    ).fetchall()
    return [dict(zip(r.keys(), tuple(r), strict=True)) for r in rows]


def message_and_fact_counts(con: Connection) -> tuple[int, int]:
    messages = con.execute("SELECT count(*) FROM messages").fetchone()[0]
    facts = con.execute("SELECT count(*) FROM memory_facts").fetchone()[0]
    return int(messages), int(facts)


def health_counts(con: Connection) -> dict[str, Any]:
    active = con.execute("SELECT count(*) FROM memory_facts WHERE is_active = 1").fetchone()[0]
    total = con.execute("SELECT count(*) FROM memory_facts").fetchone()[0]
    fts_facts = con.execute("SELECT count(*) FROM memory_facts_fts").fetchone()[0]
    msgs = con.execute("SELECT count(*) FROM messages").fetchone()[0]
    fts_msgs = con.execute("SELECT count(*) FROM messages_fts").fetchone()[0]
    states = {
        r["state"]: r["n"]
        for r in con.execute("SELECT state, count(*) AS n FROM messages GROUP BY state")
    }
    return {
        "facts_active": active,
        "facts_total": total,
        "facts_fts_rows": fts_facts,
        "messages": msgs,
        "messages_fts_rows": fts_msgs,
        "message_states": states,
        "vectors": vector_counts(con),
    }


def facts_without_vector(con: Connection, default_model: str | None) -> int:
    """Active facts with no vector for their guild's embedding model (the
    guild's ``embedding_model`` setting, else ``default_model``; guilds with
    neither are not counted)."""
    row = con.execute(
        "SELECT count(*) FROM memory_facts f "
        "LEFT JOIN guild_settings s ON s.guild_id = f.guild_id AND s.key = 'embedding_model' "
        "WHERE f.is_active = 1 AND coalesce(nullif(trim(s.value), ''), ?) IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM memory_fact_vectors v WHERE v.fact_id = f.id "
        "AND v.model = coalesce(nullif(trim(s.value), ''), ?))",
        (default_model, default_model),
    ).fetchone()
    return int(row[0])
