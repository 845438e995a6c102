"""A real PostgreSQL (with pgvector) for tests: the ``pgserver`` wheel's server
on a temporary data directory, and one fresh database per test."""

from __future__ import annotations

import secrets
import shutil
import tempfile
import warnings
from collections.abc import Sequence
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
            f"the test PostgreSQL (pgserver, a dev dependency) is not installed ({exc}); "
            "run scripts/setup.sh --tests"
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


def create_database(server: Any, options: str = "") -> str:
    """A new empty database's name (``gl_<random>``); ``options`` are
    CREATE DATABASE options (encoding, locale)."""
    import psycopg

    name = f"gl_{secrets.token_hex(6)}"
    with psycopg.connect(url(server, "postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" {options}')
    return name


def drop_database(server: Any, name: str) -> None:
    import psycopg

    with psycopg.connect(url(server, "postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- the same statements on a SQLite reference and on PostgreSQL --------------------------


def both(lite: Any, conn: Any, statements: Sequence[tuple[str, tuple[Any, ...]]]) -> None:
    """Run each statement (SQLite placeholders) on both databases."""
    for sql, args in statements:
        lite.execute(sql, args)
        conn.execute(sql.replace("?", "%s"), args)


def dump(con: Any, table: str, order: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in con.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()]


def fact_row(
    fid: int, fact: str, evidence: str | None, fact_type: str = "other"
) -> tuple[str, tuple[Any, ...]]:
    return (
        "INSERT INTO memory_facts (id, guild_id, subject, fact, fact_type, evidence_text, "
        "created_at, updated_at) VALUES (?, 'g1', 'alice', ?, ?, ?, 't0', 't0')",
        (fid, fact, fact_type, evidence),
    )


def message_row(seq: int, mid: str, content: str) -> tuple[str, tuple[Any, ...]]:
    return (
        "INSERT INTO messages (seq, id, guild_id, channel_id, author_id, author_name, content, "
        "created_at, source, received_at) VALUES (?, ?, 'g1', 'c1', 'u1', 'Alice', ?, 't0', "
        "'text', 't0')",
        (seq, mid, content),
    )


def migrated_template(server: Any) -> str:
    """A database with guildlore's whole schema, made once per server, that
    engine tests copy (``CREATE DATABASE … TEMPLATE``: a file copy, much
    quicker than running every migration for each test). No one connects to
    it afterwards: PostgreSQL copies only a template nobody is connected to."""
    import psycopg

    from memory.db.postgres import migrations as pg_migrations

    name = create_database(server)
    with psycopg.connect(url(server, name), autocommit=True) as conn:
        pg_migrations.migrate(conn)
    return name
