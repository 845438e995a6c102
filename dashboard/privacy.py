"""``/privacy``: the privacy notice, generated from the live configuration
(``memory.privacy_notice`` — the same text ``/memory privacy`` shows in
Discord), so it follows every settings change at once.

Operators see it for any guild (a picker), with what only they may see:
deletion receipts (look one up by id and check nothing of what it erased is
back), the writes the daily caps held back, and how many members opted out.
When the operator sets ``dashboard.privacy_public``, anyone may read the
notice without the token — for the guild whose id they give (its name is not
shown to them) or the defaults — and nothing else: no guild list, no
receipts, no navigation to the operator pages.
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web
from markupsafe import Markup, escape

from memory import Deployment, GuildloreError, deployment_of, privacy_notice

from . import context, params, render
from .keys import AUTH_VIA, CONFIG
from .serialize import action_json

HELD_SHOWN = 10
RECEIPTS_SHOWN = 10
_CODE = re.compile(r"`([^`]{1,80})`")


def with_code(text: str) -> Markup:
    """A notice item as HTML: escaped, its `commands` as ``<code>``."""
    escaped = str(escape(text))
    return Markup(_CODE.sub(lambda m: f"<code>{m.group(1)}</code>", escaped))


def deployment(request: web.Request) -> Deployment:
    cfg = request.app[CONFIG]
    if cfg.deployment is not None:
        return cfg.deployment
    mem = context.memory_of(request)
    return deployment_of(mem.config, chat=mem.config.llm.enabled, llm_extraction=False)


def public_view(request: web.Request) -> bool:
    """A reader without the operator's credentials (``privacy_public``)."""
    return request.get(AUTH_VIA) == "none"


async def privacy_page(request: web.Request) -> web.Response:
    mem = context.memory_of(request)
    public = public_view(request)
    asked = params.snowflake(request.query, "guildId")
    guild = asked if public else await context.default_guild(mem, request.query)
    settings = await mem.guilds.settings(guild) if guild else None
    names = (
        {} if public else {str(g["guild_id"]): g["label"] for g in await context.guild_rows(mem)}
    )
    notice = privacy_notice(settings, deployment(request))
    ctx: dict[str, Any] = {
        "public": public,
        "guildId": guild,
        "guildName": names.get(guild or ""),
        "sections": [
            {"key": s.key, "title": s.title, "items": list(s.items)} for s in notice.sections
        ],
        "offline": deployment(request).offline,
    }
    if not public:
        ctx["guilds"] = await context.guild_rows(mem)
        ctx.update(await _operator_context(request, guild))
    if render.wants_json(request):
        return render.json_ok(ctx)
    ctx["sections"] = [{**s, "items": [with_code(i) for i in s["items"]]} for s in ctx["sections"]]
    return await render.html(request, "privacy.html", ctx)


async def _operator_context(request: web.Request, guild: str | None) -> dict[str, Any]:
    mem = context.memory_of(request)
    receipts = await mem.receipts.recent(guild, RECEIPTS_SHOWN)
    held = await mem.admin.action_log(kind="memory_cap", guild_id=guild, limit=HELD_SHOWN)
    checked: dict[str, Any] | None = None
    raw = request.query.get("receipt", "").strip()
    if raw:
        try:
            found = await mem.receipts.verify(raw[:40])
        except GuildloreError:
            found = None
        checked = (
            {"id": raw[:40], "found": False}
            if found is None
            else {
                "id": found.receipt.id,
                "found": True,
                "clean": found.clean,
                "remaining": found.remaining,
                "receipt": _receipt_json(found.receipt),
            }
        )
    return {
        "receipts": [_receipt_json(r) for r in receipts],
        "held": [action_json(a) for a in held],
        "optedOut": await mem.opt_outs.count(guild) if guild else await mem.opt_outs.count(),
        "checked": checked,
    }


def _receipt_json(r: Any) -> dict[str, Any]:
    return {
        "id": r.id,
        "guild_id": r.guild_id,
        "user_id": r.user_id,
        "scope": r.scope,
        "actor": r.actor,
        "counts": r.counts,
        "created_at": r.created_at,
    }
