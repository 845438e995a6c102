"""The operator's view over time: daily charts and the request log.

- the overview and each guild page show charts of the daily series over 30
  or 90 days (``days``), ending on a chosen day (``end``; default today,
  UTC), with links a window back and forth and, when the messages lie
  outside the window (an imported history), to the window that shows them;
- ``GET /requests`` (``?format=json``) and ``GET /api/usage/requests``: the
  request log, newest first, filtered by guild, kind, outcome and time
  range (``since``/``until``: a day or an ISO time), paged with ``before``;
- ``GET /api/usage/series?guildId=&days=&end=``: the series as numbers.

The series and the log live in the database (``Memory.usage``): a restart
resets nothing, and every process on one database shows the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from aiohttp import web

from memory import (
    ERROR_SERIES,
    REQUEST_KINDS,
    REQUEST_OUTCOMES,
    Memory,
    RequestLogEntry,
    UsageWindow,
    iso,
)

from . import context, params, render
from .keys import CONFIG
from .serialize import num

WINDOWS = ("30", "90")
ERROR_LABELS = {
    "extraction_errors": "extraction",
    "reply_errors": "replies",
    "search_errors": "searches",
    "messages_failed": "messages failed",
    "embedding_errors": "embeddings",
}


def _mean(total: Sequence[float], count: Sequence[float]) -> list[float | None]:
    return [round(t / c, 1) if c else None for t, c in zip(total, count, strict=True)]


def _minus(a: Sequence[float], b: Sequence[float]) -> list[float]:
    return [max(0.0, x - y) for x, y in zip(a, b, strict=True)]


def _chart(
    key: str, title: str, days: Sequence[str], parts: Sequence[tuple[str, Sequence[Any], int]],
    summary: str, kind: str = "bars", unit: str = "",
) -> dict[str, Any]:  # fmt: skip
    return {
        "key": key,
        "title": title,
        "kind": kind,
        "unit": unit,
        "days": list(days),
        "summary": summary,
        "series": [
            {"label": label, "values": list(values), "tone": tone} for label, values, tone in parts
        ],
    }


def _n(value: float) -> str:
    return f"{value:,.0f}"


def charts(w: UsageWindow) -> list[dict[str, Any]]:
    """The chart specs of a window (``dashboard.charts.svg`` draws them)."""
    s, d = w.series, w.days
    mean_search = w.total("search_ms") / w.total("searches") if w.total("searches") else None
    mean_extract = (
        w.total("extraction_ms") / w.total("extractions") if w.total("extractions") else None
    )
    errors = [(ERROR_LABELS[name], s[name], tone) for tone, name in enumerate(ERROR_SERIES, 5)]
    return [
        _chart(
            "messages",
            "Messages",
            d,
            [("messages", s["messages"], 1)],
            f"{_n(w.total('messages'))} stored, counted on the day they were written",
        ),
        _chart(
            "facts",
            "Facts",
            d,
            [
                ("added", s["facts_added"], 2),
                ("superseded", s["facts_superseded"], 3),
                ("archived", s["facts_archived"], 4),
            ],
            f"{_n(w.total('facts_added'))} added · {_n(w.total('facts_superseded'))} "
            f"superseded · {_n(w.total('facts_archived'))} archived",
        ),
        _chart(
            "searches",
            "Searches",
            d,
            [
                ("answered", _minus(s["searches"], s["search_errors"]), 1),
                ("failed", s["search_errors"], 10),
            ],
            f"{_n(w.total('searches'))} searches, the memory of each reply included",
        ),
        _chart(
            "search_latency",
            "Search time",
            d,
            [("mean", _mean(s["search_ms"], s["searches"]), 1)],
            "mean per day"
            + ("" if mean_search is None else f"; {mean_search:,.1f} ms over the window"),
            kind="line",
            unit="ms",
        ),
        _chart(
            "extractions",
            "Extraction calls",
            d,
            [
                ("done", _minus(s["extractions"], s["extraction_errors"]), 2),
                ("failed", s["extraction_errors"], 10),
            ],
            f"{_n(w.total('extractions'))} calls"
            + ("" if mean_extract is None else f", {mean_extract:,.1f} ms on average"),
        ),
        _chart(
            "replies",
            "Replies",
            d,
            [
                ("sent", _minus(s["replies"], s["reply_errors"]), 1),
                ("failed", s["reply_errors"], 10),
            ],
            f"{_n(w.total('replies'))} replies",
        ),
        _chart(
            "errors",
            "Errors",
            d,
            errors,
            f"{_n(sum(w.total(name) for name in ERROR_SERIES))} in all",
        ),
        _chart(
            "tokens",
            "Tokens",
            d,
            [("prompt", s["tokens_prompt"], 1), ("completion", s["tokens_completion"], 2)],
            f"{_n(w.total('tokens_prompt'))} prompt · {_n(w.total('tokens_completion'))} "
            "completion, as the chat model reported them",
        ),
    ]


async def _window(
    request: web.Request, mem: Memory, guild: str | None
) -> tuple[int, date | None, UsageWindow]:
    """(days, end — None for a window ending today — and the window) asked for."""
    days = int(params.choice(request.query, "days", WINDOWS, WINDOWS[0]))
    end = params.day(request.query, "end")
    if end is not None and end >= mem.clock().date():
        end = None  # "today" follows the clock
    return days, end, await mem.usage.window(guild, days, end)


async def usage_context(request: web.Request, guild: str | None) -> dict[str, Any]:
    """``{"usage": …}``: the window asked for (``days``, ``end``), its charts,
    and the links around it."""
    mem = context.memory_of(request)
    days, end, w = await _window(request, mem, guild)
    today = mem.clock().date()
    first, last = date.fromisoformat(w.days[0]), date.fromisoformat(w.days[-1])
    later = last + timedelta(days=days)
    outside = w.message_days is not None and (
        w.message_days[1] < w.days[0] or w.message_days[0] > w.days[-1]
    )
    return {
        "usage": {
            "days": days,
            "first": w.days[0],
            "last": w.days[-1],
            "end": None if end is None else str(end),
            "earlier": str(first - timedelta(days=1)),
            # The next window's end: "" for the window ending today, None from it.
            "later": None if end is None else ("" if later >= today else str(later)),
            "messageDays": list(w.message_days) if w.message_days else None,
            "messagesOutside": outside,
            "charts": charts(w),
        }
    }


# -- the request log --------------------------------------------------------------------------


def request_json(r: RequestLogEntry, guilds: Mapping[str, str]) -> dict[str, Any]:
    return {
        "id": r.id,
        "at": r.at,
        "guild_id": r.guild_id,
        "guild": guilds.get(r.guild_id, r.guild_id or "—"),
        "kind": r.kind,
        "outcome": r.outcome,
        "latency_ms": num(r.latency_ms, 1),
        "model": r.model,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "detail": r.detail,
    }


def _bound(source: Mapping[str, Any], name: str, *, end: bool) -> tuple[str | None, str | None]:
    """(the ISO bound, the text to show back) of ``since``/``until``: a day
    (``until``'s day is included) or an ISO time."""
    raw = (source.get(name) or "").strip() if isinstance(source.get(name), str) else None
    if not raw:
        return None, None
    if len(raw) == 10:
        day = params.day(source, name)
        assert day is not None
        start = datetime.combine(day + timedelta(days=1 if end else 0), time(0), UTC)
        return iso(start), raw
    when = params.timestamp(source, name)
    return (None, None) if when is None else (iso(when), raw)


async def requests_context(request: web.Request) -> dict[str, Any]:
    q = request.query
    cfg = request.app[CONFIG]
    mem = context.memory_of(request)
    guild = params.snowflake(q, "guildId")
    kind = params.choice(q, "kind", ("", *REQUEST_KINDS), "") or None
    outcome = params.choice(q, "outcome", ("", *REQUEST_OUTCOMES), "") or None
    since, since_text = _bound(q, "since", end=False)
    until, until_text = _bound(q, "until", end=True)
    before = params.cursor(q, "before")
    limit = params.integer(q, "limit", default=cfg.page_size, lo=1, hi=cfg.max_page_size)
    rows = await mem.usage.requests(
        guild_id=guild,
        kind=kind,
        outcome=outcome,
        since=since,
        until=until,
        before_id=before,
        limit=limit + 1,
    )
    next_before = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_before = rows[-1].id
    guilds = await context.guild_rows(mem)
    labels = {str(g["guild_id"]): str(g["label"]) for g in guilds}
    keep = mem.config.usage
    return {
        "guildId": guild,
        "kind": kind,
        "outcome": outcome,
        "since": since_text,
        "until": until_text,
        "before": before,
        "limit": limit,
        "kinds": list(REQUEST_KINDS),
        "outcomes": list(REQUEST_OUTCOMES),
        "entries": [request_json(r, labels) for r in rows],
        "nextBefore": next_before,
        "keepDays": num(keep.request_log_keep_days, 2),
        "keepRows": keep.request_log_max_rows,
        "flushS": num(keep.flush_s, 2),
        "guilds": guilds,
    }


async def requests_page(request: web.Request) -> web.Response:
    return await render.page(request, "requests.html", await requests_context(request))


async def requests_api(request: web.Request) -> web.Response:
    ctx = await requests_context(request)
    ctx.pop("guilds")
    return render.json_ok(ctx)


async def series_api(request: web.Request) -> web.Response:
    """``GET /api/usage/series?guildId=&days=&end=`` → the window's days and
    every series as numbers (all guilds without ``guildId``)."""
    guild = params.snowflake(request.query, "guildId")
    _, _, w = await _window(request, context.memory_of(request), guild)
    return render.json_ok(
        {
            "guildId": guild,
            "days": list(w.days),
            "series": {name: [num(v, 3) for v in values] for name, values in w.series.items()},
            "messageDays": list(w.message_days) if w.message_days else None,
        }
    )
