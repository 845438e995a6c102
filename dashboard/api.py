"""JSON API handlers: snapshot, search, facts (read, edit, delete, history),
procedures, episodes, traces, health, guilds and members, settings, CSRF token and metrics.

Every success is ``{"ok": true, …}``; every error is ``{"ok": false, "error",
"status"}`` (middlewares.py). Facts are guild-scoped: each fact route needs
``guildId``, and a fact of another guild is "not found".
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory import FACT_TYPES, GUILD_SETTINGS_BY_KEY

from . import context, params, render, security
from .episodes import episodes_context
from .keys import CONFIG
from .metrics import CONTENT_TYPE, render_metrics
from .serialize import fact_json, history_json


async def get_snapshot(request: web.Request) -> web.Response:
    """``GET /api/memory`` → ``{"markdown": "<MEMORY.md>"}``."""
    return render.json_ok({"markdown": await context.memory_of(request).snapshot_markdown()})


async def refresh_snapshot(request: web.Request) -> web.Response:
    """``POST /api/memory/refresh`` → regenerates; ``{"ok": true, "markdown": …}``."""
    return render.json_ok({"markdown": await context.memory_of(request).refresh_snapshot()})


async def search(request: web.Request) -> web.Response:
    """``GET /api/memory/search?q=&guildId=&channelId=&limit=&scope=``."""
    return render.json_ok(await context.search_context(request))


async def guilds(request: web.Request) -> web.Response:
    return render.json_ok(await context.guilds_context(request))


async def members(request: web.Request) -> web.Response:
    guild = params.required_snowflake(request.match_info, "guild_id")
    mem = context.memory_of(request)
    return render.json_ok({"guildId": guild, "members": await mem.guilds.members(guild)})


async def list_facts(request: web.Request) -> web.Response:
    """``GET /api/memory/facts?guildId=&subject=&type=&active=&before=&limit=``."""
    guild = params.required_snowflake(request.query, "guildId")
    return render.json_ok(await context.facts_context(request, guild=guild))


def _fact_target(request: web.Request, body: dict[str, Any] | None = None) -> tuple[str, int]:
    source: dict[str, Any] = dict(request.query)
    if body is not None and "guildId" in body and "guildId" not in source:
        source["guildId"] = body["guildId"]
    return params.required_snowflake(source, "guildId"), params.path_int(request, "fact_id")


async def get_fact(request: web.Request) -> web.Response:
    guild, fact_id = _fact_target(request)
    mem = context.memory_of(request)
    fact = await context.fact_or_404(mem, guild, fact_id)
    return render.json_ok({"fact": fact_json(fact, await context.member_names(mem, guild))})


_PATCH_FIELDS = frozenset({"guildId", "text", "fact", "fact_type", "type", "active"})


async def patch_fact(request: web.Request) -> web.Response:
    """Edit ``text``/``fact_type``, or archive/restore with ``active``; each writes history."""
    body = await params.json_object(request)
    unknown = sorted(set(body) - _PATCH_FIELDS)
    if unknown:
        raise params.bad_request(f"unknown field(s): {', '.join(k[:40] for k in unknown[:5])}")
    guild, fact_id = _fact_target(request, body)
    text = body.get("text", body.get("fact"))
    fact_type = body.get("fact_type", body.get("type"))
    active = body.get("active")
    if text is not None and (not isinstance(text, str) or len(text) > 2000):
        raise params.bad_request("text must be a string (4 to 190 characters)")
    if fact_type is not None and fact_type not in FACT_TYPES:
        raise params.bad_request(f"fact_type must be one of: {', '.join(FACT_TYPES)}")
    if active is not None and not isinstance(active, bool):
        raise params.bad_request("active must be true or false")
    if text is None and fact_type is None and active is None:
        raise params.bad_request("nothing to change: send text, fact_type or active")
    mem = context.memory_of(request)
    fact = await context.change_fact(
        mem, guild, fact_id, text=text, fact_type=fact_type, active=active
    )
    return render.json_ok({"fact": fact_json(fact, await context.member_names(mem, guild))})


async def delete_fact(request: web.Request) -> web.Response:
    guild, fact_id = _fact_target(request)
    if not await context.memory_of(request).facts.delete(guild, fact_id, actor=context.OPERATOR):
        raise params.not_found(f"fact {fact_id} not found in guild {guild}")
    return render.json_ok({"deleted": fact_id, "guildId": guild})


async def fact_history(request: web.Request) -> web.Response:
    """History outlives the fact: a deleted fact still shows its (content-free) audit rows."""
    guild, fact_id = _fact_target(request)
    mem = context.memory_of(request)
    history = await mem.facts.history(guild, fact_id)
    if not history and await mem.facts.get(guild, fact_id) is None:
        raise params.not_found(f"fact {fact_id} not found in guild {guild}")
    return render.json_ok(
        {"guildId": guild, "factId": fact_id, "history": [history_json(h) for h in history]}
    )


async def procedures(request: web.Request) -> web.Response:
    """``GET /api/memory/procedures?guildId=`` → the guild's procedures and recent changes."""
    guild = params.required_snowflake(request.query, "guildId")
    return render.json_ok(await context.procedures_context(context.memory_of(request), guild))


async def episodes(request: web.Request) -> web.Response:
    """``GET /api/memory/episodes?guildId=&channelId=&limit=`` → episodes per
    channel and the latest episodes (of one channel with ``channelId``)."""
    guild = params.required_snowflake(request.query, "guildId")
    channel = params.snowflake(request.query, "channelId")
    limit = params.integer(request.query, "limit", default=50, lo=1, hi=500)
    mem = context.memory_of(request)
    return render.json_ok(await episodes_context(mem, guild, channel, limit))


async def traces(request: web.Request) -> web.Response:
    """``GET /api/memory/traces?messageId=&guildId=`` (without messageId: recent traces)."""
    return render.json_ok(await context.traces_context(request))


async def health(request: web.Request) -> web.Response:
    ctx = await context.health_context(request)
    return render.json_ok({**ctx, "rates": context.ingest_rates(request)})


async def csrf(request: web.Request) -> web.Response:
    """A CSRF token (and its cookie) for JSON clients that authenticate by cookie."""
    response = render.json_ok(
        {"csrfToken": render.csrf_for(request), "header": security.CSRF_HEADER}
    )
    render.set_csrf_cookie(request, response)
    return response


async def get_settings(request: web.Request) -> web.Response:
    guild = params.required_snowflake(request.query, "guildId")
    return render.json_ok(await context.settings_context(context.memory_of(request), guild))


async def patch_settings(request: web.Request) -> web.Response:
    """``PATCH /api/settings?guildId=`` with ``{"key": value | null}``; all-or-nothing."""
    guild = params.required_snowflake(request.query, "guildId")
    body = await params.json_object(request)
    if not body:
        raise params.bad_request("nothing to change")
    checked: dict[str, str | None] = {}
    for key, value in body.items():
        if key not in GUILD_SETTINGS_BY_KEY:
            raise params.bad_request(f"unknown setting {key[:40]!r}")
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, list):
            value = ",".join(str(v) for v in value)
        elif value is not None and not isinstance(value, str | int):
            raise params.bad_request(f"{key} must be text, a boolean, a list of ids or null")
        checked[key] = context.check_setting(key, None if value is None else str(value))
    mem = context.memory_of(request)
    # Checked before anything is stored: the request is all or nothing.
    await mem.guilds.check_settings(checked)
    for key, value in checked.items():
        await mem.guilds.set_setting(guild, key, value, actor=context.OPERATOR)
    return render.json_ok(await context.settings_context(mem, guild))


async def metrics(request: web.Request) -> web.Response:
    if not request.app[CONFIG].metrics_enabled:
        raise params.not_found("metrics are disabled")
    mem = context.memory_of(request)
    ctx = await context.health_context(request)
    # Per-guild figures need the database; while it is away, the rest still answers.
    connection = ctx["database_connection"]
    reachable = connection.get("reachable", True) and not connection.get("failure")
    text = render_metrics(
        mem.admin.counters(),
        ctx,
        await mem.guilds.overview() if reachable else [],
        await mem.usage.totals() if reachable else {},
        await mem.usage.today() if reachable else {},
    )
    response = web.Response(text=text)
    response.headers["Content-Type"] = CONTENT_TYPE
    return response
