"""Shared fixtures: isolated environment, a real engine on tmp_path, the fake OpenAI server."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

pytest_plugins = ["tests.fakeopenai"]

# Variables the program reads; a developer's shell must not leak into tests.
_ENV_PREFIXES = ("GUILDLORE_", "DISCORD_", "OPENAI_", "DASHBOARD_", "LLM_")
_ENV_NAMES = ("DEFAULT_MEMORY_EMBEDDING_MODEL",)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES) or name in _ENV_NAMES:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    yield


class FakeClock:
    """A clock tests move by hand (crossing midnight without sleeping)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 11, 22, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def local_embedder() -> Any:
    """One loaded offline MiniLM for the whole session (0.4 s to load)."""
    from memory.embed.local import LocalMiniLMEmbedder

    emb = LocalMiniLMEmbedder(threads=2)
    emb.load()
    return emb


# The engine's tests run on every backend: SQLite (the reference) and
# PostgreSQL. GUILDLORE_TEST_BACKENDS=sqlite narrows a local run; a test (or
# module) marked ``sqlite_only`` is about SQLite itself (its file, WAL, pragmas).
BACKENDS: tuple[str, ...] = tuple(
    b.strip()
    for b in os.environ.get("GUILDLORE_TEST_BACKENDS", "sqlite,postgresql").split(",")
    if b.strip()
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sqlite_only(reason): the test is about SQLite itself; not run on PostgreSQL"
    )
    config.addinivalue_line(
        "markers",
        "postgresql_only(reason): the test is about PostgreSQL itself; not run on SQLite",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_backend" in metafunc.fixturenames:
        definition = metafunc.definition
        if definition.get_closest_marker("postgresql_only") is not None:
            # Empty when the run is narrowed to SQLite: reported as skipped.
            metafunc.parametrize("store_backend", [b for b in BACKENDS if b == "postgresql"])
            return
        only = definition.get_closest_marker("sqlite_only") is not None
        backends = [b for b in BACKENDS if not only or b == "sqlite"] or ["sqlite"]
        metafunc.parametrize("store_backend", backends)


@pytest.fixture
def database_url_for(
    store_backend: str, request: pytest.FixtureRequest
) -> Callable[[Path], str | None]:
    """data dir → the database URL an engine on it uses: None on SQLite (the
    file in the data dir), on PostgreSQL one fresh database per data dir, so
    two engines on one data dir share their memory and two on different dirs
    do not, as with SQLite files."""
    if store_backend != "postgresql":
        return lambda _data_dir: None
    from tests import pg

    server = request.getfixturevalue("pg_server")
    template = request.getfixturevalue("pg_template")
    made: dict[Path, str] = {}

    def url_for(data_dir: Path) -> str:
        if data_dir not in made:
            name = pg.create_database(server, f'TEMPLATE "{template}"')
            request.addfinalizer(lambda: pg.drop_database(server, name))
            made[data_dir] = pg.url(server, name)
        return made[data_dir]

    return url_for


@pytest_asyncio.fixture
async def make_memory(
    tmp_path: Path, local_embedder: Any, database_url_for: Callable[[Path], str | None]
) -> AsyncIterator[Callable[..., Any]]:
    """Factory for started engines on tmp_path (on each backend); all are
    closed at teardown."""
    from memory.config import MemoryConfig
    from memory.engine import Memory

    opened: list[Memory] = []

    async def factory(
        *,
        extractor: Any = None,
        clock: Any = None,
        embeddings: str = "local",
        data_dir: Path | None = None,
        decider: Any = None,
        **overrides: Any,
    ) -> Memory:
        from dataclasses import replace

        from memory.clock import system_clock
        from memory.config import EmbeddingConfig

        if embeddings == "none":
            overrides.setdefault("embedding", EmbeddingConfig(provider="none"))
        data_dir = data_dir or tmp_path / "data"
        overrides.setdefault("database_url", database_url_for(data_dir))
        cfg = MemoryConfig.for_data_dir(data_dir, **overrides)
        if embeddings == "none":
            cfg = replace(cfg, embedding=replace(cfg.embedding, provider="none"))
        mem = Memory(
            cfg,
            extractor=extractor if extractor is not None else _rules(),
            clock=clock or system_clock,
            embedder=local_embedder if embeddings == "local" else None,
            decider=decider,
        )
        await mem.start()
        opened.append(mem)
        return mem

    yield factory
    for mem in opened:
        await mem.close()


def _rules() -> Any:
    from memory.extract.rules.extractor import RuleExtractor

    return RuleExtractor()


@pytest_asyncio.fixture
async def fake_llm_client(fake_openai: Any) -> AsyncIterator[Any]:
    """An ``openai`` client of the fake server, closed after the test (an
    unclosed one is finalised later on a closed loop)."""
    client = fake_openai.client()
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One real PostgreSQL with pgvector for the session (the pgserver wheel);
    a server that cannot start fails the tests that need it."""
    from tests import pg

    base = pg.data_parent()
    try:
        server = pg.start_server(base / "data")
    except pg.PgServerError as exc:
        pg.remove_data(base)
        pytest.fail(str(exc), pytrace=False)
    yield server
    pg.stop_server(server)
    pg.remove_data(base)


@pytest.fixture(scope="session")
def pg_template(pg_server: Any) -> str:
    """A migrated database the engine tests' databases are copied from."""
    from tests import pg

    return pg.migrated_template(pg_server)


@pytest.fixture
def pg_url(pg_server: Any) -> Iterator[str]:
    """A fresh empty database on the session's PostgreSQL, dropped afterwards."""
    from tests import pg

    name = pg.create_database(pg_server)
    yield pg.url(pg_server, name)
    pg.drop_database(pg_server, name)


@pytest.fixture
def pg_conn(pg_url: str) -> Iterator[Any]:
    """An autocommit psycopg connection to a fresh database with the schema."""
    import psycopg

    from memory.db.postgres import migrations as pg_migrations

    conn = psycopg.connect(pg_url, autocommit=True)
    pg_migrations.migrate(conn)
    yield conn
    conn.close()


@pytest.fixture
def sqlite_ref(tmp_path: Path) -> Iterator[Any]:
    """A migrated SQLite database to compare PostgreSQL with."""
    from memory.db.sqlite import driver as sqlite
    from memory.db.sqlite import migrations

    con = sqlite.connect(tmp_path / "reference.db")
    migrations.migrate(con)
    yield con
    con.close()
