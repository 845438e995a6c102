"""The benches' PostgreSQL: the ``pgserver`` wheel's server (PostgreSQL with
pgvector, the test server of ``tests/pg.py``) on a fresh data directory, one
new database per measured engine, stopped at the end.

The data directory is made with ``mkdtemp`` and opened to every user: the
server runs as a user of its own, which must reach it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests import pg

BACKENDS = ("sqlite", "postgresql")


def parse_backends(text: str) -> list[str]:
    """``"sqlite,postgresql"`` → the backends in that order; an unknown name is
    an ``ArgumentTypeError`` (argparse shows it as a usage error)."""
    import argparse

    names = [b.strip() for b in text.split(",") if b.strip()]
    unknown = [b for b in names if b not in BACKENDS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"backends are a comma-separated subset of {', '.join(BACKENDS)}; got {text!r}"
        )
    return list(dict.fromkeys(names))


class PgServer:
    """A running test PostgreSQL; ``new_url()`` makes an empty database."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def new_url(self) -> str:
        return pg.url(self.server, pg.create_database(self.server))

    def version(self) -> str:
        import psycopg

        with psycopg.connect(pg.url(self.server, "postgres")) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return str(row[0]) if row else "?"

    def database_bytes(self, url: str) -> int:
        import psycopg

        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        return int(row[0]) if row else 0


@contextmanager
def postgres_if(backends: Sequence[str]) -> Iterator[PgServer | None]:
    """A started server when ``backends`` names PostgreSQL, else None."""
    if "postgresql" not in backends:
        yield None
        return
    base = Path(tempfile.mkdtemp(prefix="guildlore-pg-"))
    base.chmod(0o755)
    try:
        server = pg.start_server(base / "data")
        try:
            yield PgServer(server)
        finally:
            pg.stop_server(server)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def database_url(backend: str, server: PgServer | None) -> str | None:
    """The ``MemoryConfig.database_url`` of a new engine on ``backend``: None
    (the SQLite file in the data dir) or a new PostgreSQL database."""
    if backend == "sqlite":
        return None
    if server is None:
        raise RuntimeError("PostgreSQL was asked for but no server is running")
    return server.new_url()
