"""Which database a configuration asks for: the SQLite file (the default and
the reference) or a PostgreSQL server (``database_url = "postgresql://…"``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory.db.url import is_postgres_url

if TYPE_CHECKING:
    from memory.config import MemoryConfig
    from memory.db.core import Database


def open_database(config: MemoryConfig) -> Database:
    """The (not yet opened) database layer for ``config``."""
    if is_postgres_url(config.database_url):
        # Imported here: psycopg is only needed by deployments that use it.
        from memory.db.postgres.database import PgDatabase

        return PgDatabase(
            str(config.database_url),
            readers=config.read_connections,
            unreachable_exit_s=config.database_unreachable_exit_s,
        )
    from memory.db.sqlite.database import SqliteDatabase

    return SqliteDatabase(config.db_path, readers=config.read_connections)
