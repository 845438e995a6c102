"""Server-rendered pages. Each handler builds one context and hands it to ``render.page``.

Forms post back to the page they came from and redirect (303) on success,
with a ``notice`` code the next page turns into a fixed message; errors
re-render the page with status 400.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from markupsafe import Markup

from memory import FACT_TYPES, LORE_SUBJECT, InvalidInput

from . import budgets, context, params, render, security
from .episodes import episodes_context
from .keys import AUTH_VIA, CONFIG, LOGIN_THROTTLE, MARKDOWN, SECRET, SESSION_NONCE
from .members import members_context
from .middlewares import client_of
from .serialize import fact_json
from .settings_view import save_group, settings_groups
from .usage import usage_context

log = logging.getLogger(__name__)

NOTICES = {
    "saved": "Setting saved. It applies at once.",
    "edited": "Fact updated.",
    "archived": "Fact archived: it no longer appears in search or replies.",
    "restored": "Fact restored.",
    "deleted": "Fact deleted.",
    "refreshed": "Snapshot regenerated.",
    "unchanged": "Nothing to change.",
    "undone": "Consolidation run undone: its facts are as they were before it.",
}
TYPE_ORDER = ("profile", "preference", "relationship", "project", "canon", "lore", "other")
TYPE_LABELS = {
    "profile": "Profile",
    "preference": "Preferences",
    "relationship": "Relationships",
    "project": "Projects",
    "canon": "Canon (pinned)",
    "lore": "Lore",
    "other": "Other",
}
JOURNAL_PAGE_LINES = 500


def _flash(request: web.Request, ctx: dict[str, Any], error: str | None = None) -> dict[str, Any]:
    code = request.query.get("notice", "")
    return {**ctx, "notice": NOTICES.get(code), "error": error}


def _go(path: str, **query: Any) -> web.HTTPSeeOther:
    clean = {k: v for k, v in query.items() if v is not None and v != ""}
    return web.HTTPSeeOther(path + ("?" + urlencode(clean) if clean else ""))


# -- overview, guilds, members ---------------------------------------------------------------


async def overview(request: web.Request) -> web.Response:
    mem = context.memory_of(request)
    guilds = await context.guild_rows(mem)
    for g in guilds[:10]:  # "who the bot knows most about", for the busiest guilds
        members = await mem.guilds.members(str(g["guild_id"]))
        g["top_members"] = [m for m in members if m["facts"]][:6]
    for g in guilds[10:]:
        g["top_members"] = []
    ctx = {
        "guilds": guilds,
        "counters": mem.admin.counters(),
        "rates": context.ingest_rates(request),
        "health": await context.health_context(request),
        **await usage_context(request, None),
    }
    return await render.page(request, "overview.html", _flash(request, ctx))


async def _guild_row(request: web.Request, guild: str) -> dict[str, Any]:
    for g in await context.guild_rows(context.memory_of(request)):
        if str(g["guild_id"]) == guild:
            return g
    raise params.not_found(f"guild {guild} is not known to the bot")


async def guild_page(request: web.Request) -> web.Response:
    guild = params.required_snowflake(request.match_info, "guild_id")
    row = await _guild_row(request, guild)
    mem = context.memory_of(request)
    lore = await mem.facts.find(guild, subject=LORE_SUBJECT, active=True, limit=500)
    ctx = {
        "guild": row,
        **await members_context(request, guild),
        **await usage_context(request, guild),
        "lore_count": len(lore),
        "channels": await mem.guilds.channels(guild),
        **await context.procedures_context(mem, guild),
        **await budgets.budgets_context(mem, guild),
        **await episodes_context(mem, guild),
    }
    return await render.page(request, "guild.html", _flash(request, ctx))


async def member_page(request: web.Request) -> web.Response:
    """What the bot knows about one member (or the guild's lore)."""
    guild = params.required_snowflake(request.match_info, "guild_id")
    user = params.subject(request.match_info, "user_id")
    assert user is not None
    row = await _guild_row(request, guild)
    mem = context.memory_of(request)
    names = await context.member_names(mem, guild)
    active = await mem.facts.find(guild, subject=user, active=True, limit=200)
    archived = await mem.facts.find(guild, subject=user, active=False, limit=51)
    if user != LORE_SUBJECT and user not in names and not active and not archived:
        raise params.not_found(f"member {user} is not known in this guild")
    facts = [fact_json(f, names) for f in active]
    groups = []
    for t in (*TYPE_ORDER, *sorted({f["fact_type"] for f in facts} - set(TYPE_ORDER))):
        items = [f for f in facts if f["fact_type"] == t]
        if items:
            groups.append({"type": t, "label": TYPE_LABELS.get(t, t.title()), "facts": items})
    ctx = {
        "guild": row,
        "member": {
            "user_id": user,
            "name": "Guild lore" if user == LORE_SUBJECT else names.get(user, user),
            "is_lore": user == LORE_SUBJECT,
        },
        "facts": facts,
        "groups": groups,
        "archived": [fact_json(f, names) for f in archived[:50]],
        "archived_more": len(archived) > 50,
    }
    return await render.page(request, "member.html", _flash(request, ctx))


# -- search ------------------------------------------------------------------------------------------


async def search_page(request: web.Request) -> web.Response:
    mem = context.memory_of(request)
    ctx = await context.search_context(request)
    picked = ctx["guildId"] or await context.default_guild(mem, request.query)
    ctx.update(
        {
            "picked_guild": picked,
            "guilds": await context.guild_rows(mem),
            "channels": await mem.guilds.channels(picked) if picked else [],
            "scopes": list(context.SCOPES),
        }
    )
    return await render.page(request, "search.html", _flash(request, ctx))


# -- facts -------------------------------------------------------------------------------------------


async def facts_page(request: web.Request) -> web.Response:
    mem = context.memory_of(request)
    guild = await context.default_guild(mem, request.query)
    ctx = await context.facts_context(request, guild=guild)
    members = await mem.guilds.members(guild) if guild else []
    ctx.update(
        {
            "guilds": await context.guild_rows(mem),
            "subjects": [m for m in members if m["facts"]],
            "fact_types": list(FACT_TYPES),
        }
    )
    return await render.page(request, "facts.html", _flash(request, ctx))


async def fact_page(request: web.Request) -> web.Response:
    guild = params.required_snowflake(request.query, "guildId")
    fact_id = params.path_int(request, "fact_id")
    ctx = await context.fact_detail_context(request, guild, fact_id)
    return await render.page(request, "fact.html", _flash(request, ctx))


async def fact_post(request: web.Request) -> web.Response:
    form = await request.post()
    guild = params.required_snowflake(form, "guildId")
    fact_id = params.path_int(request, "fact_id")
    actions = ("edit", "archive", "restore", "delete", "pin", "unpin")
    action = params.choice(form, "action", actions, "edit")
    mem = context.memory_of(request)
    try:
        if action == "delete":
            if form.get("confirm") != "yes":
                raise InvalidInput("tick the box to confirm the deletion")
            if not await mem.facts.delete(guild, fact_id, actor=context.OPERATOR):
                raise params.not_found(f"fact {fact_id} not found in guild {guild}")
            raise _go("/facts", guildId=guild, notice="deleted")
        if action == "pin" and await mem.upkeep.pin(guild, fact_id, actor=context.OPERATOR):
            raise _go(f"/facts/{fact_id}", guildId=guild, notice="pinned")
        if action == "unpin" and await mem.upkeep.unpin(guild, fact_id, actor=context.OPERATOR):
            raise _go(f"/facts/{fact_id}", guildId=guild, notice="unpinned")
        if action in ("pin", "unpin"):
            raise params.not_found(f"fact {fact_id} not found in guild {guild}")
        if action in ("archive", "restore"):
            await context.change_fact(mem, guild, fact_id, active=action == "restore")
            raise _go(f"/facts/{fact_id}", guildId=guild, notice=action + "d")
        text = form.get("text")
        if not isinstance(text, str) or len(text) > 2000:
            raise InvalidInput("fact text must be 4 to 190 characters")
        before = await context.fact_or_404(mem, guild, fact_id)
        new_type = params.fact_type(form, "type")
        after = await context.change_fact(mem, guild, fact_id, text=text, fact_type=new_type)
        notice = "unchanged" if after == before else "edited"
        raise _go(f"/facts/{fact_id}", guildId=guild, notice=notice)
    except InvalidInput as exc:
        ctx = await context.fact_detail_context(request, guild, fact_id)
        return await render.page(request, "fact.html", _flash(request, ctx, str(exc)), status=400)


# -- consolidation -------------------------------------------------------------------------------


async def _consolidation_ctx(request: web.Request, guild: str | None) -> dict[str, Any]:
    mem = context.memory_of(request)
    runs = await mem.consolidation.runs(guild) if guild else []
    # The facts a run names, as they read now (reports keep ids, not text).
    texts: dict[int, str] = {}
    for r in runs[:20]:
        for a in [*r.report.get("proposed", []), *r.report.get("applied", [])]:
            for fid in (a["keep"], a["drop"]):
                if guild and fid not in texts and (f := await mem.facts.get(guild, fid)):
                    texts[fid] = f.fact
    return {
        "guildId": guild,
        "texts": texts,
        "guilds": await context.guild_rows(mem),
        "runs": [
            {
                "id": r.id,
                "mode": r.mode,
                "dry_run": r.dry_run,
                "started_at": r.started_at,
                "undone_at": r.undone_at,
                "report": {k: v for k, v in r.report.items() if k != "after"},
            }
            for r in runs
        ],
    }


async def consolidation_page(request: web.Request) -> web.Response:
    guild = await context.default_guild(context.memory_of(request), request.query)
    ctx = await _consolidation_ctx(request, guild)
    return await render.page(request, "consolidation.html", _flash(request, ctx))


async def consolidation_undo(request: web.Request) -> web.Response:
    form = await request.post()
    guild = params.required_snowflake(form, "guildId")
    run_id = params.path_int(request, "run_id")
    try:
        await context.memory_of(request).consolidation.undo(guild, run_id, actor=context.OPERATOR)
    except InvalidInput as exc:
        ctx = await _consolidation_ctx(request, guild)
        return await render.page(
            request, "consolidation.html", _flash(request, ctx, str(exc)), status=400
        )
    raise _go("/consolidation", guildId=guild, notice="undone")


# -- snapshot ------------------------------------------------------------------------------------------


async def snapshot_page(request: web.Request) -> web.Response:
    markdown = await context.memory_of(request).snapshot_markdown()
    # markdown-it with html disabled escapes every piece of text it emits.
    rendered = Markup(request.app[MARKDOWN].render(markdown))
    ctx = {"markdown": markdown, "html": rendered}
    return await render.page(request, "snapshot.html", _flash(request, ctx))


async def snapshot_refresh(request: web.Request) -> web.Response:
    await context.memory_of(request).refresh_snapshot()
    raise _go("/snapshot", notice="refreshed")


# -- journal ---------------------------------------------------------------------------------------------


async def journal_index(request: web.Request) -> web.Response:
    days = await context.memory_of(request).journal_days()
    files = [{"day": d.day, "size": d.size} for d in days]
    return await render.page(request, "journal.html", _flash(request, {"files": files}))


async def journal_day(request: web.Request) -> web.Response:
    day = request.match_info["day"]
    guild = params.snowflake(request.query, "guildId")
    page_no = params.integer(request.query, "page", default=1, lo=1, hi=100_000)
    mem = context.memory_of(request)
    found = await mem.journal_entries(day)
    if found is None:
        raise params.not_found(f"no journal for {day}")
    # Lines are appended as messages are processed, an import's out of
    # time order: the page reads them in the order they were written.
    ordered = sorted(found, key=lambda e: e.time)
    guild_names = {str(g["guild_id"]): str(g["label"]) for g in await context.guild_rows(mem)}
    day_guilds = sorted({e.guild_id for e in ordered})
    channels: dict[str, dict[str, str]] = {
        g: await context.channel_names(mem, g) for g in day_guilds if g
    }
    entries = [
        {
            "time": e.time,
            "author_name": e.author_name,
            "author_id": e.author_id,
            "guild_id": e.guild_id,
            "guild_name": guild_names.get(e.guild_id),
            "channel_id": e.channel_id,
            "channel_name": channels.get(e.guild_id, {}).get(e.channel_id),
            "content": e.content,
        }
        for e in ordered
        if guild is None or e.guild_id == guild
    ]
    start = (page_no - 1) * JOURNAL_PAGE_LINES
    pages = max(1, -(-len(entries) // JOURNAL_PAGE_LINES))
    ctx = {
        "day": day,
        "guildId": guild,
        "page": page_no,
        "pages": pages,
        "total": len(entries),
        "entries": entries[start : start + JOURNAL_PAGE_LINES],
        "guild_ids": day_guilds if guild is None else [guild],
        "guild_names": {g: guild_names.get(g, g) for g in day_guilds},
    }
    return await render.page(request, "journal_day.html", _flash(request, ctx))


# -- traces, activity -------------------------------------------------------------------------------------


async def traces_page(request: web.Request) -> web.Response:
    ctx = await context.traces_context(request)
    ctx["guilds"] = await context.guild_rows(context.memory_of(request))
    return await render.page(request, "traces.html", _flash(request, ctx))


async def activity_page(request: web.Request) -> web.Response:
    ctx = await context.activity_context(request)
    ctx["guilds"] = await context.guild_rows(context.memory_of(request))
    return await render.page(request, "activity.html", _flash(request, ctx))


# -- settings --------------------------------------------------------------------------------------------------


async def _settings_ctx(request: web.Request, guild: str | None) -> dict[str, Any]:
    mem = context.memory_of(request)
    ctx = await context.settings_context(mem, guild)
    ctx["guilds"] = await context.guild_rows(mem)
    ctx["groups"] = await settings_groups(mem, guild, ctx["settings"]) if guild else []
    return ctx


async def settings_page(request: web.Request) -> web.Response:
    guild = await context.default_guild(context.memory_of(request), request.query)
    ctx = await _settings_ctx(request, guild)
    return await render.page(request, "settings.html", _flash(request, ctx))


async def settings_post(request: web.Request) -> web.Response:
    form = await request.post()
    guild = params.required_snowflake(form, "guildId")
    key = form.get("key")
    value = form.get("value")
    if "group" not in form and (
        not isinstance(key, str) or (value is not None and not isinstance(value, str))
    ):
        raise params.bad_request("key and value must be text")
    try:
        if "group" in form:  # a whole group's form (settings_view.py)
            if not await save_group(context.memory_of(request), guild, form):
                raise _go("/settings", guildId=guild, notice="unchanged")
        else:
            assert isinstance(key, str)
            checked = context.check_setting(key, value if isinstance(value, str) else None)
            await context.memory_of(request).guilds.set_setting(
                guild, key, checked, actor=context.OPERATOR
            )
    except InvalidInput as exc:
        ctx = await _settings_ctx(request, guild)
        return await render.page(
            request, "settings.html", _flash(request, ctx, str(exc)), status=400
        )
    raise _go("/settings", guildId=guild, notice="saved")


# -- login ------------------------------------------------------------------------------------------------------


async def login_page(request: web.Request) -> web.Response:
    if request.app[CONFIG].token is None:
        raise _go("/")
    ctx = {"next": security.safe_next(request.query.get("next"))}
    return await render.html(request, "login.html", _flash(request, ctx))


async def login_post(request: web.Request) -> web.Response:
    cfg = request.app[CONFIG]
    if cfg.token is None:
        raise _go("/")
    form = await request.post()
    raw_next = form.get("next")
    target = security.safe_next(raw_next if isinstance(raw_next, str) else None)
    throttle, client = request.app[LOGIN_THROTTLE], client_of(request)
    if throttle.blocked(client):
        wait = throttle.retry_after(client)
        response = await render.html(
            request,
            "login.html",
            _flash(request, {"next": target}, f"too many wrong tokens; wait {wait} s"),
            status=429,
        )
        response.headers["Retry-After"] = str(wait)
        return response
    token = form.get("token")
    if not isinstance(token, str) or not security.token_matches(cfg.token, token):
        throttle.failed(client)
        return await render.html(
            request, "login.html", _flash(request, {"next": target}, "wrong token"), status=401
        )
    now = render.now_ts()
    nonce, cookie = security.new_session(request.app[SECRET], cfg.token, now)
    await context.memory_of(request).sessions.open(nonce, now, cfg.session_max_age_s)
    response = web.HTTPSeeOther(target)
    response.set_cookie(
        security.SESSION_COOKIE,
        cookie,
        max_age=cfg.session_max_age_s,
        httponly=True,
        samesite="Strict",
        secure=cfg.cookie_secure,
        path="/",
    )
    raise response


async def logout(request: web.Request) -> web.Response:
    """End this browser's session: the cookie is dropped and the session revoked."""
    nonce = request.get(SESSION_NONCE)
    if nonce is not None:
        await context.memory_of(request).sessions.revoke(nonce)
    response = web.HTTPSeeOther("/login" if request.app[CONFIG].token else "/")
    response.del_cookie(security.SESSION_COOKIE, path="/")
    raise response


async def logout_everywhere(request: web.Request) -> web.Response:
    """Revoke every operator session (say, after a cookie may have leaked).

    Header-token clients get ``{"ok": true, "revoked": n}``; a browser is
    logged out too and sent to the login page."""
    revoked = await context.memory_of(request).sessions.revoke_all(render.now_ts())
    log.info("dashboard: every operator session revoked (%d were open)", revoked)
    if request.get(AUTH_VIA) == "header" or render.wants_json(request):
        return render.json_ok({"revoked": revoked})
    response = web.HTTPSeeOther("/login" if request.app[CONFIG].token else "/")
    response.del_cookie(security.SESSION_COOKIE, path="/")
    raise response
