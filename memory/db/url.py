"""Database URLs: which ones name a PostgreSQL server, and how one is shown."""

from __future__ import annotations


def is_postgres_url(url: str | None) -> bool:
    return bool(url) and str(url).split(":", 1)[0] in {"postgresql", "postgres"}


def redact_url(url: str) -> str:
    """``url`` without its password, for logs, errors and messages."""
    head, sep, tail = url.partition("@")
    if not sep or ":" not in head.split("//", 1)[-1]:
        return url
    scheme, _, cred = head.partition("//")
    user = cred.split(":", 1)[0]
    return f"{scheme}//{user}:***@{tail}"
