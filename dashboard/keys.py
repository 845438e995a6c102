"""Typed keys for what the app and each request carry (``web.AppKey``/``RequestKey``)."""

from __future__ import annotations

from typing import Literal

import jinja2
from aiohttp import web
from markdown_it import MarkdownIt

from memory import Memory

from .config import DashboardConfig
from .rates import LoginThrottle, RateMeter

AuthVia = Literal["open", "header", "cookie", "none"]

MEMORY = web.AppKey("memory", Memory)
CONFIG = web.AppKey("config", DashboardConfig)
SECRET = web.AppKey("secret", bytes)
TEMPLATES = web.AppKey("templates", jinja2.Environment)
MARKDOWN = web.AppKey("markdown", MarkdownIt)
RATES = web.AppKey("rates", RateMeter)
LOGIN_THROTTLE = web.AppKey("login_throttle", LoginThrottle)

# How this request was authenticated ("none": a public path without credentials).
AUTH_VIA: web.RequestKey[str] = web.RequestKey("auth_via", str)
# The nonce of the session a cookie-authenticated request belongs to (for logout).
SESSION_NONCE: web.RequestKey[str] = web.RequestKey("session_nonce", str)
# A CSRF nonce minted while rendering this request, to be set as a cookie.
NEW_CSRF_NONCE: web.RequestKey[str] = web.RequestKey("new_csrf_nonce", str)
