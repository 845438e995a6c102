"""Middlewares, outermost first: errors → host guard → body limit → auth → CSRF.

Security headers are added in ``on_response_prepare`` so they reach every
response, redirects and static files included. The policy for auth and CSRF
is described in ``dashboard.security``.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import quote

from aiohttp import web
from aiohttp.typedefs import Handler
from yarl import URL

from memory import DatabaseUnavailable, InvalidInput, disk_problem

from . import render, security
from .config import is_loopback
from .keys import AUTH_VIA, CONFIG, LOGIN_THROTTLE, MEMORY, SECRET, SESSION_NONCE
from .params import MALFORMED_REQUEST, Problem, malformed_reason
from .rates import client_key

log = logging.getLogger(__name__)

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_PUBLIC_PREFIXES = ("/static/",)
_PUBLIC_PATHS = frozenset({"/login", "/favicon.ico"})
PRIVACY_PATH = "/privacy"

# No inline scripts or styles, nothing from elsewhere; the pages need no JavaScript.
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; script-src 'none'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


def _reason(exc: web.HTTPException, request: web.Request) -> str:
    if exc.status == 413:
        return f"request body too large (limit {request.app[CONFIG].max_body_bytes} bytes)"
    if exc.status == 404:
        return f"not found: {request.path[:200]}"
    if exc.status == 405:
        return f"method {request.method} not allowed here"
    return exc.reason or "error"


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except Problem as p:
        return await render.error(request, p.status, p.message, p.headers)
    except InvalidInput as exc:
        return await render.error(request, 400, str(exc))
    except MALFORMED_REQUEST as exc:
        # A body the HTTP parser refused while a handler read it: the
        # client's fault. aiohttp logs it (one line, see dashboard.server)
        # when it drains the rest of the body.
        reason = malformed_reason(exc)
        log.debug(
            "dashboard: malformed request body on %s %s: %s", request.method, request.path, reason
        )
        return await render.error(request, 400, f"malformed request: {reason}")
    except web.HTTPException as exc:
        if exc.status < 400:
            raise  # redirects
        keep = {k: exc.headers[k] for k in ("Allow", "WWW-Authenticate") if k in exc.headers}
        return await render.error(request, exc.status, _reason(exc, request), keep)
    except ConnectionResetError:
        # The client left while its body was being read: nothing to answer, no bug.
        log.info("dashboard: client left during %s %s", request.method, request.path[:200])
        return await render.error(request, 400, "the connection was lost mid-request")
    except asyncio.CancelledError:
        raise
    except DatabaseUnavailable as exc:
        # The process gave up on its database (damaged, or away past the
        # limit): not a bug; the health page says more, the process exits.
        what = "away" if exc.unreachable else "a damaged database file"
        text = f"the dashboard cannot read memory ({what}): {exc}"
        log.error("dashboard: %s %s failed: %s", request.method, request.path, text)
        return await render.error(request, 503, text)
    except Exception as exc:
        problem = disk_problem(exc)
        if problem is not None:
            # A full or read-only disk: not a bug, and the operator can fix
            # it. One log line, and the same sentence to the client.
            where = problem.path or str(request.app[MEMORY].config.db_path.parent)
            text = problem.line(where, then="try again")
            log.error("dashboard: %s %s failed: %s", request.method, request.path, text)
            return await render.error(request, 503, text)
        log.exception("dashboard: unhandled error on %s %s", request.method, request.path)
        return await render.error(request, 500, "internal error (details are in the server log)")


def _hostname(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


@web.middleware
async def host_guard_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """An open (token-less) dashboard answers only to loopback host names."""
    cfg = request.app[CONFIG]
    if cfg.token is None:
        name = _hostname(request.host)
        if not (is_loopback(name) or name in cfg.allowed_hosts):
            raise Problem(
                403,
                "this dashboard has no token and answers only on localhost; "
                "set DASHBOARD_TOKEN to serve it under other host names",
            )
    return await handler(request)


@web.middleware
async def body_limit_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    limit = request.app[CONFIG].max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise Problem(413, f"request body too large (limit {limit} bytes)")
    return await handler(request)


def _is_public(request: web.Request) -> bool:
    if request.path == PRIVACY_PATH and request.method in ("GET", "HEAD"):
        # Members may read the privacy notice, if the operator says so.
        return request.app[CONFIG].privacy_public
    return request.path in _PUBLIC_PATHS or request.path.startswith(_PUBLIC_PREFIXES)


_UNAUTHORIZED = {"WWW-Authenticate": 'Bearer realm="guildlore"'}


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    cfg = request.app[CONFIG]
    if cfg.token is None:
        request[AUTH_VIA] = "open"
        return await handler(request)
    presented = security.header_token(
        request.headers.get("Authorization"), request.headers.get(security.TOKEN_HEADER)
    )
    if presented is not None:
        throttle, client = request.app[LOGIN_THROTTLE], client_of(request)
        if throttle.blocked(client):
            raise too_many_guesses(throttle.retry_after(client))
        if security.token_matches(cfg.token, presented):
            request[AUTH_VIA] = "header"
            return await handler(request)
        throttle.failed(client)
        raise Problem(401, "invalid dashboard token", _UNAUTHORIZED)
    now = render.now_ts()
    nonce = security.session_nonce(
        request.app[SECRET],
        cfg.token,
        request.cookies.get(security.SESSION_COOKIE),
        now,
        cfg.session_max_age_s,
    )
    if nonce is not None and await request.app[MEMORY].sessions.active(nonce, now):
        request[AUTH_VIA] = "cookie"
        request[SESSION_NONCE] = nonce
        return await handler(request)
    if _is_public(request):
        request[AUTH_VIA] = "none"
        return await handler(request)
    if request.method in ("GET", "HEAD") and not render.is_api(request):
        if not render.wants_json(request):
            raise web.HTTPSeeOther("/login?next=" + quote(request.path_qs, safe=""))
    raise Problem(
        401,
        "authentication required: send 'Authorization: Bearer <token>' or log in at /login",
        _UNAUTHORIZED,
    )


def client_of(request: web.Request) -> str:
    """The key wrong tokens are counted under (see ``dashboard.rates.client_key``)."""
    return client_key(
        request.remote,
        request.headers.get("X-Forwarded-For"),
        request.app[CONFIG].trust_forwarded_for,
    )


def too_many_guesses(retry_after: int) -> Problem:
    return Problem(
        429,
        f"too many wrong tokens from this address; try again in {retry_after} s",
        {"Retry-After": str(retry_after)},
    )


def _cross_site(request: web.Request) -> bool:
    if request.headers.get("Sec-Fetch-Site", "").lower() == "cross-site":
        return True
    origin = request.headers.get("Origin")
    if origin is None:
        return False
    if origin == "null":
        return True
    try:
        authority = URL(origin).authority
    except ValueError:
        return True
    return authority.lower() != request.host.lower()


@web.middleware
async def csrf_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.method not in UNSAFE_METHODS or request.get(AUTH_VIA) == "header":
        return await handler(request)
    if _cross_site(request):
        raise Problem(403, "cross-site request refused")
    provided = request.headers.get(security.CSRF_HEADER)
    if provided is None and request.content_type in (
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    ):
        form = await request.post()  # cached: the handler reads the same form
        value = form.get(security.CSRF_FIELD)
        provided = value if isinstance(value, str) else None
    nonce = request.cookies.get(security.CSRF_COOKIE)
    if not security.csrf_valid(request.app[SECRET], nonce, provided):
        raise Problem(
            403,
            "missing or invalid CSRF token: reload the page and try again "
            "(API clients: send the token header, or X-CSRF-Token from GET /api/csrf)",
        )
    return await handler(request)


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    h = response.headers
    h.setdefault("Content-Security-Policy", CSP)
    h["X-Frame-Options"] = "DENY"
    h["X-Content-Type-Options"] = "nosniff"
    # Not "no-referrer": with it browsers send "Origin: null" on our own form
    # posts, and the CSRF check refuses null origins.
    h["Referrer-Policy"] = "same-origin"
    h["Cross-Origin-Opener-Policy"] = "same-origin"
    h["Cross-Origin-Resource-Policy"] = "same-origin"
    h["Permissions-Policy"] = "camera=(), microphone=(), geolocation=()"
    h["Server"] = "guildlore"
    if not request.path.startswith("/static/"):
        h["Cache-Control"] = "no-store"


MIDDLEWARES = (
    error_middleware,
    host_guard_middleware,
    body_limit_middleware,
    auth_middleware,
    csrf_middleware,
)
