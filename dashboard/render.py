"""One context, two renderings: HTML through a template, or the same dict as JSON.

``page()`` is what every page handler returns: the context builder's dict
rendered with the page's template, or as JSON when the client asks for it
(``?format=json`` or an ``Accept`` that prefers JSON). ``error()`` renders the
one error shape ``{"ok": false, "error": …, "status": …}`` the same way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from aiohttp import web
from markdown_it import MarkdownIt

from memory import parse_iso

from . import charts, security
from .keys import AUTH_VIA, CONFIG, NEW_CSRF_NONCE, SECRET, TEMPLATES

log = logging.getLogger(__name__)

NAV: tuple[tuple[str, str, str], ...] = (
    ("overview", "Overview", "/"),
    ("search", "Search", "/search"),
    ("facts", "Facts", "/facts"),
    ("review", "Review", "/review"),
    ("consolidation", "Consolidation", "/consolidation"),
    ("snapshot", "Snapshot", "/snapshot"),
    ("journal", "Journal", "/journal"),
    ("traces", "Traces", "/traces"),
    ("activity", "Activity", "/activity"),
    ("requests", "Requests", "/requests"),
    ("settings", "Settings", "/settings"),
    ("privacy", "Privacy", "/privacy"),
)


def template_dir() -> Path:
    return Path(__file__).resolve().parent / "templates"


def static_dir() -> Path:
    return Path(__file__).resolve().parent / "static"


def _when(value: Any) -> str:
    """ISO time → "2026-11-22 12:00 UTC" (what people read); bad input passes through."""
    if not value:
        return "—"
    try:
        dt = parse_iso(str(value)).astimezone(UTC)
    except (ValueError, TypeError):
        return str(value)
    return dt.strftime("%Y-%m-%d %H:%M UTC")


def _score(value: Any, digits: int = 2) -> str:
    if value is None or isinstance(value, bool):
        return "—"
    try:
        return f"{float(value):.{digits}f}"
    except (TypeError, ValueError):
        return "—"


def _meter(value: Any) -> float:
    """A value for ``<meter min=0 max=1>``: clamped, 0 for missing."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, min(1.0, f)) if f == f else 0.0


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))


def _size(n: Any) -> str:
    try:
        b = float(n)
    except (TypeError, ValueError):
        return "—"
    for unit in ("B", "KB", "MB", "GB"):
        if b < 1024 or unit == "GB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024
    return f"{b:.1f} GB"


def link(query: Mapping[str, Any], **changes: Any) -> str:
    """``?…`` for the page's own query with ``changes`` (None or "" drops a
    key), so a form or a link keeps the other parts of the page as they are."""
    merged = {k: v for k, v in query.items() if k != "notice"}
    for key, value in changes.items():
        if value is None or value == "":
            merged.pop(key, None)
        else:
            merged[key] = str(value)
    return "?" + urlencode(merged) if merged else "?"


def create_environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir())),
        autoescape=True,  # every template is HTML; nothing is ever marked safe by hand
        enable_async=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        when=_when, score=_score, meter=_meter, compact_json=_compact_json, size=_size
    )
    env.globals["NAV"] = NAV
    env.globals["chart"] = charts.svg
    env.globals["link"] = link
    return env


def _shift_headings(state: Any) -> None:
    """MEMORY.md's headings one level down: the page keeps its own single <h1>."""
    for token in state.tokens:
        if token.type in ("heading_open", "heading_close") and token.tag != "h6":
            token.tag = f"h{int(token.tag[1]) + 1}"


def create_markdown() -> MarkdownIt:
    # html=False: raw HTML in MEMORY.md is shown as text, never interpreted.
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    md.core.ruler.push("shift_headings", _shift_headings)
    return md


def wants_json(request: web.Request) -> bool:
    fmt = request.query.get("format", "").lower()
    if fmt == "json":
        return True
    if fmt == "html":
        return False
    accept = request.headers.get("Accept", "")
    return "application/json" in accept and "text/html" not in accept


def json_ok(data: Mapping[str, Any], status: int = 200) -> web.Response:
    body = {"ok": True, **data}
    return web.json_response(body, status=status, dumps=_dumps)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, allow_nan=False)


def csrf_for(request: web.Request) -> str:
    """The CSRF token for this browser; mints the cookie's nonce on first sight."""
    nonce = request.cookies.get(security.CSRF_COOKIE)
    if not security.valid_nonce(nonce):
        nonce = request.get(NEW_CSRF_NONCE)
        if nonce is None:
            nonce = security.new_csrf_nonce()
            request[NEW_CSRF_NONCE] = nonce
    assert nonce is not None
    return security.csrf_token(request.app[SECRET], nonce)


def set_csrf_cookie(request: web.Request, response: web.StreamResponse) -> None:
    nonce = request.get(NEW_CSRF_NONCE)
    if nonce is not None:
        response.set_cookie(
            security.CSRF_COOKIE,
            nonce,
            httponly=True,
            samesite="Strict",
            secure=request.app[CONFIG].cookie_secure,
            path="/",
        )


async def html(
    request: web.Request, template: str, ctx: Mapping[str, Any], *, status: int = 200
) -> web.Response:
    env = request.app[TEMPLATES]
    token_set = request.app[CONFIG].token is not None
    req = {
        "path": request.path,
        "path_qs": request.path_qs,
        "csrf": csrf_for(request),
        "logout": token_set and request.get(AUTH_VIA) == "cookie",
        "token_set": token_set,
        "query": dict(request.query),
    }
    text = await env.get_template(template).render_async(**ctx, req=req)
    response = web.Response(text=text, status=status, content_type="text/html", charset="utf-8")
    set_csrf_cookie(request, response)
    return response


async def page(
    request: web.Request, template: str, ctx: Mapping[str, Any], *, status: int = 200
) -> web.Response:
    """Render a context builder's result as HTML or JSON, as the client asked."""
    if wants_json(request):
        return json_ok(ctx, status)
    return await html(request, template, ctx, status=status)


def is_api(request: web.Request) -> bool:
    return request.path.startswith("/api/") or request.path == "/metrics"


async def error(
    request: web.Request,
    status: int,
    message: str,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    """The one error shape, as JSON (API, or asked for) or as an HTML page."""
    body = {"ok": False, "error": message, "status": status}
    if not is_api(request) and not wants_json(request):
        try:
            response = await html(request, "error.html", {"problem": body}, status=status)
        except Exception:  # a broken template must not turn an error into a 500
            log.exception("dashboard: could not render the error page")
        else:
            response.headers.update(headers or {})
            return response
    response = web.json_response(body, status=status, dumps=_dumps)
    response.headers.update(headers or {})
    return response


def now_ts() -> int:
    return int(datetime.now(UTC).timestamp())
