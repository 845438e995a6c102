"""Context builders: read a request's parameters, ask the engine, return JSON-able dicts.

API handlers return these dicts as JSON; page handlers render the same dicts
with a template (or as JSON for ``?format=json``). Nothing here renders.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, cast

from aiohttp import web

from memory import (
    DEFAULT_SEARCH_SCOPE,
    FACT_TYPES,
    GUILD_SETTINGS,
    GUILD_SETTINGS_BY_KEY,
    Fact,
    InvalidInput,
    Memory,
    SearchScope,
    iso,
    parse_guild_setting,
)

from . import params
from .keys import CONFIG, MEMORY, RATES
from .serialize import (
    action_json,
    fact_json,
    history_json,
    hit_json,
    message_json,
    num,
    procedure_json,
    trace_json,
)
from .timeline import fact_timeline

SCOPES = ("facts", "messages", "all")
ACTION_KINDS = (
    "memory_fact",
    "memory_extract_call",
    "memory_extract_error",
    "memory_guard_reject",
    "memory_sensitive",
    "memory_consent",
    "memory_cap",
    "memory_canon",
    "memory_embedding_call",
    "memory_embedding_error",
    "memory_trace",
    "settings_change",
    "procedure_change",
    "reply",
    "bot_error",
    "voice_error",
)
OPERATOR = "operator"
# The engine's limit on a fact's text: it would cut longer text; an operator edit
# is refused instead.
MAX_FACT_CHARS = 190


def memory_of(request: web.Request) -> Memory:
    return request.app[MEMORY]


async def member_names(mem: Memory, guild_id: str | None) -> dict[str, str]:
    if not guild_id:
        return {}
    return {str(m["user_id"]): str(m["display_name"]) for m in await mem.guilds.members(guild_id)}


async def channel_names(mem: Memory, guild_id: str | None) -> dict[str, str]:
    if not guild_id:
        return {}
    return {
        str(c["channel_id"]): str(c["name"])
        for c in await mem.guilds.channels(guild_id)
        if c["name"]
    }


def guild_label(row: Mapping[str, Any]) -> str:
    return str(row.get("name") or f"Guild {row['guild_id']}")


async def guild_rows(mem: Memory) -> list[dict[str, Any]]:
    """Each guild's counts, with its consent queue as numbers per category
    (the pending texts are the members' own, never shown here)."""
    rows = []
    consent = await mem.consent.counts()
    review = await mem.review.counts()
    for g in await mem.guilds.overview():
        pending = consent.get(str(g["guild_id"]), {})
        rows.append(
            {
                **g,
                "label": guild_label(g),
                "consent_pending": sum(pending.values()),
                "consent_by_category": dict(sorted(pending.items())),
                "review_pending": review.get(str(g["guild_id"]), 0),
            }
        )
    return rows


async def guilds_context(request: web.Request) -> dict[str, Any]:
    return {"guilds": await guild_rows(memory_of(request))}


async def default_guild(mem: Memory, query: Mapping[str, Any], name: str = "guildId") -> str | None:
    """The guild a page shows: the one asked for, else the only/first known guild."""
    asked = params.snowflake(query, name)
    if asked is not None:
        return asked
    guilds = await mem.guilds.overview()
    return str(guilds[0]["guild_id"]) if guilds else None


# -- search --------------------------------------------------------------------------------


async def search_context(request: web.Request) -> dict[str, Any]:
    """Strict hybrid search (only hits that pass the relevance gate). Missing ``q`` or
    ``guildId``: an empty result, not an error."""
    q = request.query
    cfg = request.app[CONFIG]
    guild = params.snowflake(q, "guildId")
    channel = params.snowflake(q, "channelId")
    text = params.query_text(q, "q")
    limit = params.integer(q, "limit", default=10, lo=1, hi=cfg.search_limit_max)
    as_of = params.as_of(q, "asOf")
    # Memory types to narrow to (comma separated); the guild's api allowlist binds.
    types = [t for t in (q.get("types") or "").split(",") if t.strip()] or None
    # Past messages have no memory type: a request naming types asks for facts.
    scope = params.choice(q, "scope", SCOPES, "facts" if types else DEFAULT_SEARCH_SCOPE)
    results: list[dict[str, Any]] = []
    took_ms: float | None = None
    if text and guild:
        mem = memory_of(request)
        started = time.perf_counter()
        hits = await mem.search(
            guild,
            text,
            channel_id=channel,
            limit=limit,
            scope=cast(SearchScope, scope),
            as_of=as_of,
            consumer="api",
            types=types,
        )
        took_ms = round((time.perf_counter() - started) * 1000, 1)
        names = await member_names(mem, guild)
        results = [hit_json(h, names) for h in hits]
    return {
        "query": text,
        "guildId": guild,
        "channelId": channel,
        "scope": scope,
        "limit": limit,
        "asOf": None if as_of is None else iso(as_of),
        "types": types,
        "count": len(results),
        "tookMs": took_ms,
        "results": results,
    }


# -- facts -----------------------------------------------------------------------------------


async def facts_context(request: web.Request, *, guild: str | None) -> dict[str, Any]:
    """One page of facts, newest first, with a cursor for the next page."""
    q = request.query
    cfg = request.app[CONFIG]
    subject = params.subject(q, "subject")
    fact_type = params.fact_type(q, "type")
    active, active_text = params.active(q, "active")
    before = params.cursor(q, "before")
    limit = params.integer(q, "limit", default=cfg.page_size, lo=1, hi=cfg.max_page_size)
    facts: list[dict[str, Any]] = []
    next_before: int | None = None
    if guild is not None:
        mem = memory_of(request)
        rows = await mem.facts.find(
            guild,
            subject=subject,
            fact_type=fact_type,
            active=active,
            before_id=before,
            limit=limit + 1,
        )
        if len(rows) > limit:
            rows = rows[:limit]
            next_before = rows[-1].id
        names = await member_names(mem, guild)
        facts = [fact_json(f, names) for f in rows]
    return {
        "guildId": guild,
        "subject": subject,
        "type": fact_type,
        "active": active_text,
        "before": before,
        "limit": limit,
        "facts": facts,
        "nextBefore": next_before,
    }


async def fact_or_404(mem: Memory, guild: str, fact_id: int) -> Fact:
    fact = await mem.facts.get(guild, fact_id)
    if fact is None:
        raise params.not_found(f"fact {fact_id} not found in guild {guild}")
    return fact


async def fact_detail_context(request: web.Request, guild: str, fact_id: int) -> dict[str, Any]:
    """A fact with its history, its timeline (observations and decisions),
    its source message and the replies that used it."""
    mem = memory_of(request)
    fact = await fact_or_404(mem, guild, fact_id)
    names = await member_names(mem, guild)
    channels = await channel_names(mem, guild)
    source = None
    if fact.source_message_id:
        found = await mem.get_message(guild, fact.source_message_id)
        source = message_json(found) if found else None
    history = await mem.facts.history(guild, fact_id)
    return {
        "guildId": guild,
        "fact": fact_json(fact, names),
        "channel_name": channels.get(fact.channel_id or ""),
        "history": [history_json(h) for h in history],
        "related": [
            {"fact": fact_json(f, names), "strength": s}
            for f, s in await mem.facts.related(guild, fact_id)
        ],
        "timeline": await fact_timeline(mem, guild, fact, history),
        "traces": [trace_json(t) for t in await mem.traces.for_fact(guild, fact_id)],
        "source_message": source,
        "fact_types": list(FACT_TYPES),
        "pinned": bool(await mem.upkeep.pinned_ids(guild, [fact_id])),
    }


async def change_fact(
    mem: Memory,
    guild: str,
    fact_id: int,
    *,
    text: str | None = None,
    fact_type: str | None = None,
    active: bool | None = None,
) -> Fact:
    """Edit, archive or restore; the engine writes a history row for each change."""
    if text is not None and len(" ".join(text.split())) > MAX_FACT_CHARS:
        raise InvalidInput(f"fact text must be 4 to {MAX_FACT_CHARS} characters")
    fact = await fact_or_404(mem, guild, fact_id)
    if text is not None or fact_type is not None:
        edited = await mem.facts.edit(
            guild, fact_id, text=text, fact_type=fact_type, actor=OPERATOR
        )
        fact = edited or fact
    if active is not None:
        changed = await mem.facts.set_active(guild, fact_id, active, actor=OPERATOR)
        fact = changed or fact
    return fact


# -- traces ----------------------------------------------------------------------------------


def _trace_groups(traces: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recent traces grouped by the message that triggered the reply."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for t in traces:
        key = (t["guild_id"], t["message_id"] or "")
        g = groups.get(key)
        if g is None:
            g = groups[key] = {
                "guild_id": t["guild_id"],
                "channel_id": t["channel_id"],
                "message_id": t["message_id"],
                "created_at": t["created_at"],
                "retrieved": 0,
                "stored": 0,
                "updated": 0,
            }
        if t["action"] in ("retrieved", "stored", "updated"):
            g[t["action"]] += 1
    return list(groups.values())


async def traces_context(request: web.Request) -> dict[str, Any]:
    """ "Show context" for one message (``messageId`` + ``guildId``), else recent traces."""
    q = request.query
    cfg = request.app[CONFIG]
    mem = memory_of(request)
    guild = params.snowflake(q, "guildId")
    message = params.message_id(q, "messageId")
    limit = params.integer(q, "limit", default=cfg.page_size, lo=1, hi=cfg.max_page_size)
    if message is not None:
        if guild is None:
            raise params.bad_request("guildId is required with messageId")
        traces = [trace_json(t) for t in await mem.traces.for_message(guild, message)]
        found = await mem.get_message(guild, message)
        return {
            "guildId": guild,
            "messageId": message,
            "message": message_json(found) if found else None,
            "traces": traces,
            "groups": [],
            "context": await mem.traces.context(guild, message),
        }
    traces = [trace_json(t) for t in await mem.traces.recent(guild, limit)]
    return {
        "guildId": guild,
        "messageId": None,
        "message": None,
        "traces": traces,
        "groups": _trace_groups(traces),
        "context": None,
    }


# -- health ----------------------------------------------------------------------------------


async def health_context(request: web.Request) -> dict[str, Any]:
    """Row-count invariants, queue, drops, sqlite-vec and the embedding model."""
    mem = memory_of(request)
    h = await mem.admin.health()
    c = h.get("counters", {})
    sqlite = h.get("sqlite", {})
    return {
        "healthy": bool(h.get("ok")),
        "warnings": list(h.get("warnings", [])),
        "notices": list(h.get("notices", [])),
        "facts": {
            "active": h.get("facts_active"),
            "total": h.get("facts_total"),
            "fts_rows": h.get("facts_fts_rows"),
        },
        "messages": {
            "total": h.get("messages"),
            "fts_rows": h.get("messages_fts_rows"),
            "states": h.get("message_states", {}),
            "waiting_retry": h.get("messages_retry", 0),
            "failed": h.get("messages_failed", 0),
        },
        "vectors": h.get("vectors", {}),
        "embedding_model": h.get("embedding_model"),
        "sqlite": sqlite,
        "database": "postgresql" if "postgresql" in sqlite else "sqlite",
        # Whether it answers, since when not, reconnect attempts (memory.db.status).
        "database_connection": h.get("database_connection", {}),
        # The KNN extension of whichever database: sqlite-vec, or pgvector.
        "sqlite_vec_loaded": bool(sqlite.get("sqlite_vec") or sqlite.get("pgvector")),
        "queue": {
            "depth": c.get("queue_depth"),
            "in_flight": c.get("queue_in_flight"),
            "capacity": c.get("queue_capacity"),
            "dropped": c.get("ingest_dropped"),
            "last_drop_id": c.get("last_drop_id"),
        },
        "counters": {k: (num(v) if isinstance(v, float) else v) for k, v in c.items()},
        # Journal lines owed, the database file replaced or deleted under the
        # process, PRAGMA quick_check (``memory.roles.storage_health``).
        "storage": h.get("storage"),
    }


def ingest_rates(request: web.Request) -> dict[str, float | None]:
    return request.app[RATES].rates(memory_of(request).admin.counters())


# -- activity ----------------------------------------------------------------------------------


async def activity_context(request: web.Request) -> dict[str, Any]:
    q = request.query
    cfg = request.app[CONFIG]
    kind = params.kind(q, "kind")
    guild = params.snowflake(q, "guildId")
    before = params.cursor(q, "before")
    limit = params.integer(q, "limit", default=cfg.page_size, lo=1, hi=cfg.max_page_size)
    rows = await memory_of(request).admin.action_log(
        kind=kind, guild_id=guild, before_id=before, limit=limit + 1
    )
    next_before = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_before = rows[-1].id
    return {
        "kind": kind,
        "guildId": guild,
        "before": before,
        "limit": limit,
        "kinds": list(ACTION_KINDS),
        "entries": [action_json(a) for a in rows],
        "nextBefore": next_before,
    }


# -- settings ----------------------------------------------------------------------------------


def _shown(value: Any) -> Any:
    if isinstance(value, frozenset | set | tuple | list):
        return sorted(str(v) for v in value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def check_setting(key: str, value: str | None) -> str | None:
    """The engine's validation, plus: channel ids must be Discord ids."""
    checked = parse_guild_setting(key, value)
    kind = GUILD_SETTINGS_BY_KEY[key].kind
    if checked is not None and kind in ("ids", "roles", "channel"):
        bad = [v for v in checked.split(",") if not params.is_snowflake(v)]
        if bad:
            what = "role" if kind == "roles" else "channel"
            raise InvalidInput(
                f"{key}: not Discord {what} ids: {', '.join(b[:30] for b in bad[:3])}"
            )
    return checked


async def settings_context(mem: Memory, guild: str | None) -> dict[str, Any]:
    """Per-guild runtime settings (memory/guild_settings.py) and their recent changes."""
    items: list[dict[str, Any]] = []
    changes: list[dict[str, Any]] = []
    if guild is not None:
        raw = await mem.guilds.raw_settings(guild)
        resolved = await mem.guilds.settings(guild)
        # What applies now, blank settings included (a budget's number in force).
        in_force = await mem.admin.settings_in_force(guild)
        for spec in GUILD_SETTINGS:
            items.append(
                {
                    "key": spec.key,
                    "kind": spec.kind,
                    "help": spec.help,
                    "choices": list(spec.choices),
                    "default": _shown(spec.default),
                    "stored": raw.get(spec.key),
                    "effective": _shown(getattr(resolved, spec.key, None)),
                    "in_force": _shown(in_force.get(spec.key)),
                }
            )
        log = await mem.admin.action_log(kind="settings_change", guild_id=guild, limit=20)
        changes = [action_json(a) for a in log]
    return {"guildId": guild, "settings": items, "changes": changes}


async def procedures_context(mem: Memory, guild: str) -> dict[str, Any]:
    """The guild's procedures (guild-wide first) and their recent changes, newest first."""
    channels = await channel_names(mem, guild)
    found = await mem.procedures.list(guild)
    log = await mem.admin.action_log(kind="procedure_change", guild_id=guild, limit=20)
    return {
        "guildId": guild,
        "procedures": [procedure_json(p, channels) for p in found],
        "changes": [action_json(a) for a in log],
    }
