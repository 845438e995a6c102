"""A real PostgreSQL (with pgvector) for tests: the ``pgserver`` wheel's server
on a temporary data directory, and one fresh database per test."""

from __future__ import annotations

import secrets
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any


class PgServerError(RuntimeError):
    """The test PostgreSQL could not be started or reached."""


def data_parent() -> Path:
    """A new directory for one server's data, outside pytest's temporary
    tree: the server runs as another user (pgserver's, when tests run as
    root) and needs the path open to it, while every pytest start resets its
    own tree to owner-only, which would cut a running server off its files."""
    return Path(tempfile.mkdtemp(prefix="guildlore-pg-test-"))


def remove_data(parent: Path) -> None:
    shutil.rmtree(parent, ignore_errors=True)


def start_server(data_dir: Path) -> Any:
    """Start (or join) the server on ``data_dir``; stopped by ``stop_server``."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns that XDG_RUNTIME_DIR is unset (root in a container).
            warnings.simplefilter("ignore")
            import pgserver
        import psycopg
    except ImportError as exc:
        raise PgServerError(
            f"the postgres extra is not installed ({exc}); run scripts/setup.sh --tests"
        ) from exc
    try:
        server = pgserver.get_server(data_dir, cleanup_mode="stop")
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        raise PgServerError(f"pgserver could not start PostgreSQL in {data_dir}: {exc}") from exc
    return server


def stop_server(server: Any) -> None:
    server.cleanup()


def url(server: Any, database: str) -> str:
    """A ``postgresql://`` URL for psycopg (over the server's unix socket,
    or its TCP port when the socket path would be too long)."""
    return str(server.get_uri(database))


def create_database(server: Any) -> str:
    """A new empty database's name (``gl_<random>``)."""
    import psycopg

    name = f"gl_{secrets.token_hex(6)}"
    with psycopg.connect(url(server, "postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(server: Any, name: str) -> None:
    import psycopg

    with psycopg.connect(url(server, "postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
