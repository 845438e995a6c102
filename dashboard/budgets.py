"""Budgets, pins and purges: the guild page's budget section and their JSON API.

- ``GET /api/guilds/{guild}/budgets`` → usage per scope against its budget,
  pins, archived/expired/purged counts, the TTLs and compaction counters;
- ``POST``/``DELETE /api/memory/facts/{id}/pin?guildId=`` → pin or unpin a fact;
- ``DELETE /api/guilds/{guild}/facts`` and
  ``DELETE /api/guilds/{guild}/members/{user}/facts`` → admin purge, every
  fact deleted for good (a member's messages stay):
  ``{"ok": true, "deletedCount": N}``.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aiohttp import web

from memory import Memory

from . import context, params, render
from .serialize import fact_json

PINS_SHOWN = 50


async def budgets_context(mem: Memory, guild: str) -> dict[str, Any]:
    usage = await mem.upkeep.usage(guild)
    names = await context.member_names(mem, guild)
    channels = await context.channel_names(mem, guild)
    scopes = []
    for s in usage.scopes:
        if s.kind == "member":
            label = names.get(s.key or "", s.key or "")
        elif s.kind == "episodes":
            label = "#" + channels.get(s.key or "", s.key or "")
        else:
            label = s.kind
        scopes.append(
            {
                "kind": s.kind,
                "key": s.key,
                "label": label,
                "used": s.used,
                "budget": s.budget,
                "full": s.used >= s.budget,
            }
        )
    pinned = await mem.upkeep.pinned(guild, PINS_SHOWN)
    return {
        "budgets": {
            "scopes": scopes,
            "pinned": usage.pinned,
            "archived": usage.archived,
            "expired": usage.expired,
            "purged": usage.purged,
            "purgeAfterDays": usage.purge_after_days,
            "ttlDays": usage.ttl_days,
            "compaction": asdict(usage.compaction),
        },
        "pinned_facts": [fact_json(f, names) for f in pinned],
    }


async def get_budgets(request: web.Request) -> web.Response:
    guild = params.required_snowflake(request.match_info, "guild_id")
    ctx = await budgets_context(context.memory_of(request), guild)
    return render.json_ok({"guildId": guild, **ctx})


def _target(request: web.Request) -> tuple[str, int]:
    return params.required_snowflake(request.query, "guildId"), params.path_int(request, "fact_id")


async def pin_fact(request: web.Request) -> web.Response:
    guild, fact_id = _target(request)
    mem = context.memory_of(request)
    fact = await mem.upkeep.pin(guild, fact_id, actor=context.OPERATOR)
    if fact is None:
        raise params.not_found(f"fact {fact_id} not found in guild {guild}")
    return render.json_ok({"guildId": guild, "factId": fact_id, "pinned": True})


async def unpin_fact(request: web.Request) -> web.Response:
    guild, fact_id = _target(request)
    mem = context.memory_of(request)
    if await mem.facts.get(guild, fact_id) is None:
        raise params.not_found(f"fact {fact_id} not found in guild {guild}")
    await mem.upkeep.unpin(guild, fact_id, actor=context.OPERATOR)
    return render.json_ok({"guildId": guild, "factId": fact_id, "pinned": False})


async def purge_guild_facts(request: web.Request) -> web.Response:
    guild = params.required_snowflake(request.match_info, "guild_id")
    n = await context.memory_of(request).upkeep.purge_facts(guild, actor=context.OPERATOR)
    return render.json_ok({"deletedCount": n})


async def purge_member_facts(request: web.Request) -> web.Response:
    guild = params.required_snowflake(request.match_info, "guild_id")
    user = request.match_info["user_id"]
    mem = context.memory_of(request)
    n = await mem.upkeep.purge_facts(guild, user, actor=context.OPERATOR)
    return render.json_ok({"deletedCount": n})
