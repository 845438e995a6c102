"""Operator authentication and CSRF protection (pure functions; middlewares.py applies them).

Authentication — only when a token is configured; then every page and API
call needs one of:

* the token in a header: ``Authorization: Bearer <token>`` or
  ``X-Guildlore-Token: <token>`` (scripts, curl, monitoring);
* the session cookie ``guildlore_session`` set by the login form
  (``POST /login``): ``<nonce>.<issued>.<mac>``, an HMAC over the nonce, the
  issue time and a hash of the current token. The signature makes it
  unforgeable (a forged cookie is refused without a database read); it
  expires after ``session_max_age_s`` and stops working when the token or the
  secret changes. It must also name a session the engine still holds
  (``memory.sessions``): logging out deletes that session, "log out
  everywhere" deletes them all, so a copied cookie dies with its session.
  HttpOnly, SameSite=Strict, Path=/.

Wrong tokens — in the login form or in a header — are counted per client
address (``dashboard.rates.LoginThrottle``); after too many in a minute that
address gets 429 for every token, the right one included, while other
addresses are unaffected.

Without a token the dashboard is open but only served on loopback, and only
to requests whose ``Host`` is a loopback name (so a DNS-rebinding page cannot
reach it through its own host name).

CSRF — every state-changing request (POST, PUT, PATCH, DELETE) must show it
did not come from another site:

* requests authenticated by the header token pass: a browser on another site
  cannot attach that header (it would need a CORS preflight we never grant);
* everything else (the cookie session, or the open dashboard) must carry a
  CSRF token, in the ``csrf_token`` form field (every form the pages render
  has it) or the ``X-CSRF-Token`` header (JSON clients: read it from
  ``GET /api/csrf``). The token is an HMAC of a random nonce kept in the
  ``guildlore_csrf`` cookie (HttpOnly, SameSite=Strict): another site can
  neither read the cookie nor compute the HMAC, and SameSite=Strict keeps the
  cookie off cross-site requests altogether;
* in addition, a request whose ``Origin`` names another host, or whose
  ``Sec-Fetch-Site`` says ``cross-site``, is refused outright.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

SESSION_COOKIE = "guildlore_session"
CSRF_COOKIE = "guildlore_csrf"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
TOKEN_HEADER = "X-Guildlore-Token"

_NONCE = re.compile(r"[A-Za-z0-9_-]{16,64}")
_ISSUED = re.compile(r"[0-9]{1,12}")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _mac(secret: bytes, *parts: str) -> str:
    msg = "\x1f".join(parts).encode("utf-8", "replace")
    return _b64(hmac.new(secret, msg, hashlib.sha256).digest())


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "replace")).digest()


def token_matches(expected: str | None, provided: str | None) -> bool:
    """Constant-time comparison that does not leak the token's length either."""
    if expected is None or provided is None:
        return False
    return hmac.compare_digest(_digest(expected), _digest(provided))


def header_token(authorization: str | None, explicit: str | None) -> str | None:
    """The token a request presents in a header, if any."""
    if explicit is not None:
        return explicit.strip()
    if authorization:
        scheme, _, value = authorization.strip().partition(" ")
        if scheme.lower() == "bearer":
            return value.strip()
        return ""  # some other scheme: presented, and wrong
    return None


def _token_tag(token: str) -> str:
    return _digest(token).hex()


def new_session(secret: bytes, token: str, now: int) -> tuple[str, str]:
    """(nonce, cookie value) of a new session; the caller records the nonce."""
    nonce = secrets.token_urlsafe(18)
    issued = str(int(now))
    mac = _mac(secret, "session", _token_tag(token), nonce, issued)
    return nonce, f"{nonce}.{issued}.{mac}"


def session_nonce(
    secret: bytes, token: str | None, value: str | None, now: int, max_age_s: int
) -> str | None:
    """The nonce of a correctly signed, unexpired session cookie, else None.

    A valid signature is necessary, not sufficient: the session must also
    still be open (``memory.sessions``)."""
    if token is None or not value:
        return None
    parts = value.split(".")
    if len(parts) != 3:
        return None
    nonce, issued, mac = parts
    if not _NONCE.fullmatch(nonce) or not _ISSUED.fullmatch(issued):
        return None
    if not 0 <= now - int(issued) <= max_age_s:
        return None
    expected = _mac(secret, "session", _token_tag(token), nonce, issued)
    return nonce if hmac.compare_digest(mac, expected) else None


def new_csrf_nonce() -> str:
    return secrets.token_urlsafe(24)


def valid_nonce(nonce: str | None) -> bool:
    return bool(nonce) and _NONCE.fullmatch(nonce or "") is not None


def csrf_token(secret: bytes, nonce: str) -> str:
    return _mac(secret, "csrf", nonce)


def csrf_valid(secret: bytes, nonce: str | None, provided: str | None) -> bool:
    if not valid_nonce(nonce) or not provided:
        return False
    assert nonce is not None
    return hmac.compare_digest(_digest(provided.strip()), _digest(csrf_token(secret, nonce)))


def safe_next(target: str | None) -> str:
    """A local path to go to after login; anything else (other hosts, ``//x``) → ``/``."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return "/"
    if "\\" in target or any(ord(c) < 0x20 or ord(c) == 0x7F for c in target):
        return "/"
    return target[:2000]
