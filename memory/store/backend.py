"""Which database a configuration asks for: the SQLite file (the default and
the reference) or a PostgreSQL server (``database_url = "postgresql://…"``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory.store.db import Database

if TYPE_CHECKING:
    from memory.config import MemoryConfig


def open_database(config: MemoryConfig) -> Database:
    """The (not yet opened) database layer for ``config``."""
    if is_postgres_url(config.database_url):
        # Imported here: psycopg is only needed by deployments that use it.
        from memory.store.pg_database import PgDatabase

        return PgDatabase(str(config.database_url), readers=config.read_connections)
    return Database(config.db_path, readers=config.read_connections)


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
