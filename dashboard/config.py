"""Dashboard settings: one frozen dataclass, checked when it is built.

The bot's settings layer reads the environment (``DASHBOARD_TOKEN`` …) and
builds a ``DashboardConfig``; nothing in ``dashboard/`` reads the environment.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from memory import ConfigError, Deployment

MIN_TOKEN_CHARS = 16
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost", "ip6-loopback"})


def is_loopback(host: str) -> bool:
    """True for names and addresses that only this machine can reach."""
    name = host.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class DashboardConfig:
    host: str = "127.0.0.1"
    port: int = 8765
    # Operator token. None: open dashboard, which is only allowed on loopback.
    token: str | None = field(default=None, repr=False)
    # HMAC key for session cookies and CSRF tokens. None: a random key per
    # process (logins then last until the bot restarts).
    secret: bytes | None = field(default=None, repr=False)
    max_body_bytes: int = 64 * 1024
    # The HTTP parser's request-line limit. Larger than anything useful, so an
    # over-long query string reaches the app and gets the JSON error shape
    # instead of the parser's bare 400.
    max_url_bytes: int = 128 * 1024
    page_size: int = 50
    max_page_size: int = 200
    search_limit_max: int = 50
    session_max_age_s: int = 7 * 24 * 3600
    cookie_secure: bool = False  # set when served behind HTTPS
    metrics_enabled: bool = True
    # Extra Host names accepted when no token is set (the loopback names
    # always are); a guard against DNS rebinding of an open dashboard.
    allowed_hosts: tuple[str, ...] = ()
    # Wrong tokens allowed per client address and minute (login form and headers).
    login_failures_per_minute: int = 10
    # Behind a reverse proxy every request comes from the proxy's address:
    # set this to count wrong tokens per the address it appends to
    # X-Forwarded-For instead. Never set it without such a proxy, or clients
    # could name any address they like.
    trust_forwarded_for: bool = False
    # ``/privacy`` without the token, for members (the operator's choice).
    privacy_public: bool = False
    # What the privacy page says about the deployment (None: derived from
    # the engine's configuration, which knows nothing of voice).
    deployment: Deployment | None = None

    def __post_init__(self) -> None:
        if self.token is not None:
            token = self.token.strip()
            if not token:
                object.__setattr__(self, "token", None)
            elif len(token) < MIN_TOKEN_CHARS:
                raise ConfigError(f"DASHBOARD_TOKEN must be at least {MIN_TOKEN_CHARS} characters")
            else:
                object.__setattr__(self, "token", token)
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"dashboard port {self.port} is out of range")
        if self.secret is not None and len(self.secret) < 16:
            raise ConfigError("dashboard secret must be at least 16 bytes")
        for name in (
            "max_body_bytes",
            "max_url_bytes",
            "page_size",
            "max_page_size",
            "search_limit_max",
            "session_max_age_s",
            "login_failures_per_minute",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"dashboard {name} must be positive")
        if self.page_size > self.max_page_size:
            raise ConfigError("dashboard page_size must not exceed max_page_size")
        object.__setattr__(
            self, "allowed_hosts", tuple(h.strip().lower() for h in self.allowed_hosts if h.strip())
        )

    @property
    def loopback_only(self) -> bool:
        return is_loopback(self.host)

    def check_bind(self) -> None:
        """Refuse to serve the dashboard beyond loopback without an operator token."""
        if self.token is None and not self.loopback_only:
            raise ConfigError(
                f"refusing to serve the dashboard on {self.host!r} without DASHBOARD_TOKEN: "
                "bind to 127.0.0.1 or set a token"
            )
