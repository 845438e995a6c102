"""The moderators' review queue on the dashboard (``Memory.review``): the
same items the bot posts in a guild's review channel, decided here by the
operator.

- ``GET /review?guildId=`` → the waiting items (``?format=json``: the context);
- ``POST /review/{item}`` (form: ``guildId``, ``action`` approve · reject ·
  edit · merge, ``text``, ``note``, ``targetId``) → decides, then redirects;
- ``GET /api/review?guildId=`` → ``{"ok": true, "guildId", "policy", "items": [...]}``;
- ``POST /api/review/{item}?guildId=`` with ``{"action", "text"?, "note"?,
  "targetId"?}`` → ``{"ok": true, "result": {"itemId", "outcome", "fact", "message"}}``;
  an item no longer waiting is 409.

Forms carry the CSRF token as every other form does; the history names the
operator (``operator``) as the actor.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from memory import LORE_SUBJECT, InvalidInput, Memory, ReviewCard, ReviewClosed, ReviewResult

from . import context, params, render
from .serialize import fact_json, num, subject_name

ITEMS_SHOWN = 100
ACTIONS = ("approve", "reject", "edit", "merge")
NOTICES = {
    "approved": "Approved: the memory is stored.",
    "edited": "Stored with your text.",
    "merged": "Merged into the existing fact.",
    "rejected": "Rejected: nothing stored, its text deleted.",
    "withdrawn": "Withdrawn: the fact it corrected is gone; nothing changed.",
}
_BODY_FIELDS = frozenset({"guildId", "action", "text", "note", "targetId"})


def _jump(guild: str, channel: str | None, message: str | None) -> str | None:
    if not channel or not message:
        return None
    return f"https://discord.com/channels/{guild}/{channel}/{message}"


async def card_json(
    mem: Memory, card: ReviewCard, names: dict[str, str], channels: dict[str, str]
) -> dict[str, Any]:
    item = card.item
    source = (
        await mem.get_message(item.guild_id, item.source_message_id)
        if item.source_message_id
        else None
    )
    return {
        "id": item.id,
        "kind": item.kind,
        "subject": item.subject,
        "subjectName": subject_name(item.subject, names),
        "isLore": item.subject == LORE_SUBJECT,
        "authorId": item.author_id,
        "authorName": names.get(item.author_id or "", item.author_id),
        "channelId": item.channel_id,
        "channelName": channels.get(item.channel_id or ""),
        "text": item.fact,
        "factType": item.fact_type,
        "confidence": num(item.confidence),
        "flags": [{"code": f.code, "title": f.title, "why": f.why} for f in item.flags],
        "target": (
            {**fact_json(card.target, names), "pinned": card.target_pinned}
            if card.target is not None
            else None
        ),
        "contradiction": card.target is not None and card.target_pinned,
        "canMerge": card.target is not None and item.kind != "correction",
        "source": (
            {
                "messageId": source.id,
                "authorName": source.author_name,
                "content": source.content,
                "createdAt": source.created_at,
                "url": _jump(item.guild_id, source.channel_id, source.id),
            }
            if source is not None
            else None
        ),
        "createdAt": item.created_at,
        "expiresAt": item.expires_at,
        "posted": item.post_message_id is not None,
    }


async def review_context(mem: Memory, guild: str | None) -> dict[str, Any]:
    if guild is None:
        return {"guildId": None, "policy": "off", "items": [], "counts": {}}
    settings = await mem.guilds.settings(guild)
    names = await context.member_names(mem, guild)
    channels = await context.channel_names(mem, guild)
    items = [
        await card_json(mem, await mem.review.card(i), names, channels)
        for i in await mem.review.pending(guild, ITEMS_SHOWN)
    ]
    return {
        "guildId": guild,
        "policy": settings.review_policy,
        "reviewChannel": settings.review_channel,
        "reviewChannelName": channels.get(settings.review_channel or ""),
        "expireDays": settings.review_expire_days,
        "items": items,
        "counts": await mem.review.counts(),
    }


def result_json(result: ReviewResult, names: dict[str, str]) -> dict[str, Any]:
    return {
        "itemId": result.item.id,
        "outcome": result.outcome,
        "fact": fact_json(result.fact, names) if result.fact is not None else None,
        "message": result.message,
    }


def _text(source: Any, name: str, limit: int = 2000) -> str | None:
    value = source.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise params.bad_request(f"{name} must be text of at most {limit} characters")
    return value


def _target(source: Any) -> int | None:
    value = source.get("targetId")
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 19:
        return int(value)
    raise params.bad_request("targetId must be a fact id")


async def _decide(request: web.Request, guild: str, source: Any) -> ReviewResult:
    action = source.get("action")
    if action not in ACTIONS:
        raise params.bad_request(f"action must be one of: {', '.join(ACTIONS)}")
    item_id = params.path_int(request, "item_id")
    try:
        return await context.memory_of(request).review.decide(
            guild,
            item_id,
            action,
            actor=context.OPERATOR,
            note=_text(source, "note", 300),
            text=_text(source, "text"),
            target_id=_target(source),
        )
    except ReviewClosed as exc:
        raise params.Problem(409, str(exc)) from exc


# -- page ---------------------------------------------------------------------------------------


async def _page(
    request: web.Request, guild: str | None, error: str | None = None, status: int = 200
) -> web.Response:
    mem = context.memory_of(request)
    ctx = await review_context(mem, guild)
    ctx["guilds"] = await context.guild_rows(mem)
    ctx["notice"] = NOTICES.get(request.query.get("notice", ""))
    ctx["error"] = error
    return await render.page(request, "review.html", ctx, status=status)


async def review_page(request: web.Request) -> web.Response:
    guild = await context.default_guild(context.memory_of(request), request.query)
    return await _page(request, guild)


async def review_post(request: web.Request) -> web.Response:
    form = await request.post()
    guild = params.required_snowflake(form, "guildId")
    try:
        result = await _decide(request, guild, form)
    except (InvalidInput, params.Problem) as exc:
        status = exc.status if isinstance(exc, params.Problem) else 400
        message = exc.message if isinstance(exc, params.Problem) else str(exc)
        return await _page(request, guild, message, status)
    query = urlencode({"guildId": guild, "notice": result.outcome})
    raise web.HTTPSeeOther(f"/review?{query}")


# -- JSON API ---------------------------------------------------------------------------------------


async def api_list(request: web.Request) -> web.Response:
    guild = params.required_snowflake(request.query, "guildId")
    return render.json_ok(await review_context(context.memory_of(request), guild))


async def api_decide(request: web.Request) -> web.Response:
    body = await params.json_object(request)
    unknown = sorted(set(body) - _BODY_FIELDS)
    if unknown:
        raise params.bad_request(f"unknown field(s): {', '.join(k[:40] for k in unknown[:5])}")
    source: dict[str, Any] = dict(request.query)
    source.setdefault("guildId", body.get("guildId"))
    guild = params.required_snowflake(source, "guildId")
    result = await _decide(request, guild, body)
    names = await context.member_names(context.memory_of(request), guild)
    return render.json_ok({"result": result_json(result, names)})
