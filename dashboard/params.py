"""Reading request parameters: every value is checked here, so handlers only see good input.

Bad input raises ``Problem`` (rendered in the one error shape); numbers out of
range are clamped rather than refused, so ``limit=-5`` gives one row and
``limit=10000`` the maximum page.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import date, datetime, timedelta
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from memory import FACT_TYPES, LORE_SUBJECT, parse_iso

# Discord snowflakes: ASCII digits only (``int()`` would also take "١٢٣").
_SNOWFLAKE = re.compile(r"[0-9]{1,20}")
_INT = re.compile(r"[+-]?[0-9]{1,18}")
# Message ids may be synthetic (voice, imports, benchmarks); same rule as the engine.
_MESSAGE_ID = re.compile(r"[0-9A-Za-z_:.\-]{1,64}")
_KIND = re.compile(r"[a-z0-9_]{1,40}")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")

MAX_QUERY_CHARS = 2000


class Problem(Exception):
    """An error the client should see, with its HTTP status and a clear message."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


def bad_request(message: str) -> Problem:
    return Problem(400, message)


def not_found(message: str) -> Problem:
    return Problem(404, message)


def _raw(source: Mapping[str, Any], name: str, max_len: int = 200) -> str | None:
    value = source.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad_request(f"{name} must be text")
    value = value.strip()
    if not value:
        return None
    if len(value) > max_len:
        raise bad_request(f"{name} is too long")
    return value


def is_snowflake(value: str) -> bool:
    return _SNOWFLAKE.fullmatch(value) is not None


def snowflake(
    source: Mapping[str, Any], name: str, *, required: bool = False, what: str | None = None
) -> str | None:
    """A Discord id (guild, channel, member); ``None`` when absent and not required."""
    value = _raw(source, name, 64)
    if value is None:
        if required:
            raise bad_request(f"{name} is required")
        return None
    if not _SNOWFLAKE.fullmatch(value):
        raise bad_request(f"{name} must be a Discord id (digits only), not {value[:30]!r}")
    return value


def required_snowflake(source: Mapping[str, Any], name: str) -> str:
    value = snowflake(source, name, required=True)
    assert value is not None
    return value


def subject(source: Mapping[str, Any], name: str = "subject") -> str | None:
    value = _raw(source, name, 64)
    if value is None:
        return None
    if value != LORE_SUBJECT and not _SNOWFLAKE.fullmatch(value):
        raise bad_request(f"{name} must be a member id or {LORE_SUBJECT}")
    return value


def message_id(source: Mapping[str, Any], name: str = "messageId") -> str | None:
    value = _raw(source, name, 64)
    if value is not None and not _MESSAGE_ID.fullmatch(value):
        raise bad_request(f"{name} is not a message id")
    return value


def integer(source: Mapping[str, Any], name: str, *, default: int, lo: int, hi: int) -> int:
    """An integer clamped to ``lo..hi``; text that is not an integer is refused."""
    value = _raw(source, name, 24)
    if value is None:
        return default
    if not _INT.fullmatch(value):
        raise bad_request(f"{name} must be an integer")
    return max(lo, min(hi, int(value)))


def cursor(source: Mapping[str, Any], name: str = "before") -> int | None:
    """A pagination cursor (an id to page below); absent → first page."""
    value = _raw(source, name, 24)
    if value is None:
        return None
    if not _INT.fullmatch(value) or int(value) < 1:
        raise bad_request(f"{name} must be a positive integer")
    return min(int(value), 2**63 - 1)


def choice(source: Mapping[str, Any], name: str, choices: Iterable[str], default: str) -> str:
    options = tuple(choices)
    value = _raw(source, name, 40)
    if value is None:
        return default
    if value not in options:
        raise bad_request(f"{name} must be one of: {', '.join(options)}")
    return value


def fact_type(source: Mapping[str, Any], name: str = "type") -> str | None:
    value = _raw(source, name, 40)
    if value is None:
        return None
    if value not in FACT_TYPES:
        raise bad_request(f"{name} must be one of: {', '.join(FACT_TYPES)}")
    return value


def active(source: Mapping[str, Any], name: str = "active") -> tuple[bool | None, str]:
    """``true`` (default) / ``false`` / ``all`` → (filter value, canonical text)."""
    value = (_raw(source, name, 10) or "true").lower()
    if value in ("true", "1", "yes", "active"):
        return True, "true"
    if value in ("false", "0", "no", "archived"):
        return False, "false"
    if value == "all":
        return None, "all"
    raise bad_request(f"{name} must be true, false or all")


def query_text(source: Mapping[str, Any], name: str = "q") -> str:
    value = source.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise bad_request(f"{name} must be text")
    if len(value) > MAX_QUERY_CHARS:
        raise bad_request(f"{name} is too long (at most {MAX_QUERY_CHARS} characters)")
    return value.strip()


def timestamp(source: Mapping[str, Any], name: str) -> datetime | None:
    """An ISO-8601 time (``Z`` or an offset; without one, UTC), or None when absent."""
    value = _raw(source, name, 40)
    if value is None:
        return None
    try:
        return parse_iso(value)
    except ValueError:
        raise bad_request(
            f"{name} must be an ISO-8601 time such as 2024-05-01T12:00:00Z, not {value[:40]!r}"
        ) from None


def as_of(source: Mapping[str, Any], name: str = "asOf") -> datetime | None:
    """``timestamp``, where a date alone (the search page's date field) means
    the end of that day in UTC: what memory held once the day was over."""
    value = timestamp(source, name)
    raw = str(source.get(name) or "").strip()
    if value is not None and _DATE.fullmatch(raw):
        value += timedelta(days=1) - timedelta(milliseconds=1)
    return value


def day(source: Mapping[str, Any], name: str) -> date | None:
    """A calendar day ``YYYY-MM-DD`` (the date fields of the pages), or None when absent."""
    value = _raw(source, name, 10)
    if value is None:
        return None
    try:
        if not _DATE.fullmatch(value):
            raise ValueError(value)
        return date.fromisoformat(value)
    except ValueError:
        raise bad_request(f"{name} must be a day such as 2024-05-01, not {value[:10]!r}") from None


def kind(source: Mapping[str, Any], name: str = "kind") -> str | None:
    value = _raw(source, name, 40)
    if value is not None and not _KIND.fullmatch(value):
        raise bad_request(f"{name} must be an action kind such as memory_fact")
    return value


def path_int(request: web.Request, name: str) -> int:
    """A numeric path segment (the route pattern already limits it to digits)."""
    raw = request.match_info.get(name, "")
    if not _INT.fullmatch(raw):
        raise not_found(f"no such {name.replace('_', ' ')}")
    return int(raw)


async def json_object(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object, or a 400.

    JSON travels as UTF-8 (RFC 8259): a body in another charset, or bytes
    that are not UTF-8, are refused rather than guessed at.
    """
    charset = request.charset
    if charset is not None and charset.lower().replace("-", "").replace("_", "") != "utf8":
        raise bad_request(f"JSON bodies must be UTF-8, not charset={charset[:40]!r}")
    raw = await request.read()
    try:
        body = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise bad_request(f"the request body is not valid UTF-8 (byte {exc.start})") from None
    except RecursionError:
        # The C decoder recurses once per level: a body of nested brackets
        # must not reach the 500 handler.
        raise bad_request("the request body is nested too deeply") from None
    except ValueError as exc:
        raise bad_request("the request body must be a JSON object") from exc
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    return body


# What aiohttp raises for a request its HTTP parser refuses: in the request
# line or headers (answered 400 by aiohttp itself), or in a body a handler
# reads (a bad chunk, an undecodable Content-Encoding).
MALFORMED_REQUEST = (HttpProcessingError, web.RequestPayloadError)


def malformed_reason(exc: BaseException) -> str:
    """One line for a ``MALFORMED_REQUEST`` error (aiohttp's messages span lines)."""
    if isinstance(exc, web.RequestPayloadError) and isinstance(exc.__cause__, HttpProcessingError):
        exc = exc.__cause__
    if isinstance(exc, HttpProcessingError):
        code, text = exc.code, exc.message or ""
    else:
        code, text = 400, str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0].rstrip(":").strip() if lines else type(exc).__name__
    return f"{code}, {first[:200]}"
