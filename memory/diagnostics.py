"""Installation checks for ``guildlore doctor``: a database file's schema state,
the bundled embedding model, and an OpenAI-compatible endpoint.

Each returns plain values for the caller to explain; what SQLite itself can do
is ``memory.db.sqlite.driver.capabilities`` (exported by the facade as
``sqlite_capabilities``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory.config import LLMConfig
from memory.db.sqlite import driver as sqlite
from memory.db.sqlite.migrations import MIGRATIONS, recorded
from memory.embed.base import provider_default_model, resolve_embedding_model
from memory.embed.local import (
    LOCAL_MODEL_ID,
    LocalMiniLMEmbedder,
    default_tokenizer_path,
    load_tokenizer,
)
from memory.llm import make_openai_client
from memory.store import messages, ops


@dataclass(frozen=True)
class DatabaseStatus:
    path: Path
    size_bytes: int
    known_migrations: int
    pending: list[str]  # migrations the next start applies, in order
    messages: int | None  # None: the database has no tables yet
    facts: int | None


def database_status(path: Path) -> DatabaseStatus | None:
    """The schema state and size of the database at ``path`` (read-only); None
    when there is no file yet."""
    if not path.exists():
        return None
    con = sqlite.connect(path, read_only=True)
    try:
        done = set(recorded(con))
        # The first migration creates the tables counted here.
        counts = ops.message_and_fact_counts(con) if MIGRATIONS[0][0] in done else None
    finally:
        con.close()
    return DatabaseStatus(
        path=path,
        size_bytes=path.stat().st_size,
        known_migrations=len(MIGRATIONS),
        pending=[name for name, _ in MIGRATIONS if name not in done],
        messages=counts[0] if counts else None,
        facts=counts[1] if counts else None,
    )


@dataclass(frozen=True)
class PostgresStatus:
    """What ``guildlore doctor`` says about a PostgreSQL ``database_url``."""

    server_version: int  # e.g. 160002
    server_text: str
    vector_available: bool  # the pgvector extension can be (or is) created
    vector_version: str | None  # installed in this database
    known_migrations: int
    pending: list[str]
    messages: int | None
    facts: int | None


def postgres_status(url: str) -> PostgresStatus:
    """Connect to ``url`` (raises ``StorageError`` when that fails) and report
    the server, pgvector and the schema state. Blocking: run on a thread."""
    from memory.db.postgres import driver as postgres
    from memory.db.postgres import migrations as pg_migrations
    from memory.errors import StorageError

    try:
        raw = postgres.connect_raw(url)
    except sqlite.Error as exc:
        raise StorageError(str(exc)) from exc
    try:
        num = int(postgres.scalar(raw, "SHOW server_version_num"))
        text = str(postgres.scalar(raw, "SHOW server_version"))
        available = postgres.scalar(
            raw, "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')"
        )
        installed = postgres.scalar(
            raw, "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        )
        done = set(pg_migrations.recorded(raw))
        counts = None
        if done:
            con = postgres.PgConnection(raw, {})
            counts = ops.message_and_fact_counts(con)
    finally:
        raw.close()
    return PostgresStatus(
        server_version=num,
        server_text=text,
        vector_available=bool(available),
        vector_version=str(installed) if installed else None,
        known_migrations=len(pg_migrations.PG_MIGRATIONS),
        pending=[name for name, _ in pg_migrations.PG_MIGRATIONS if name not in done],
        messages=counts[0] if counts else None,
        facts=counts[1] if counts else None,
    )


@dataclass(frozen=True)
class InboxStatus:
    """Messages by unfinished state (``retry``, ``failed``, ``pending``, ``dropped``)
    and active facts without a vector for the default embedding model."""

    states: dict[str, int]
    facts_without_vector: int


def inbox_status(
    path: Path, provider: str, default_model: str | None, *, url: str | None = None
) -> InboxStatus | None:
    """What is waiting or failed in the database at ``path`` — or at the
    PostgreSQL ``url`` — (read-only); None when there is no database yet or its
    tables do not exist. ``provider`` and ``default_model``: the embedding
    settings, to count facts without a vector."""
    if url is None and not path.exists():
        return None
    model = None
    if provider != "none":
        model = resolve_embedding_model(None, default_model, provider_default_model(provider))
    if url is not None:
        from memory.db.postgres import driver as postgres
        from memory.db.postgres import migrations as pg_migrations

        con: Any = postgres.connect(url)
        known = bool(pg_migrations.recorded(con.raw))
    else:
        con = sqlite.connect(path, read_only=True)
        known = MIGRATIONS[0][0] in set(recorded(con))
    try:
        if not known:
            return None
        try:
            states = messages.unfinished_counts(con)
            missing = ops.facts_without_vector(con, model)
        except sqlite.Error:  # a database from before the retry columns: not migrated yet
            return None
    finally:
        con.close()
    return InboxStatus(states=dict(states), facts_without_vector=int(missing))


@dataclass(frozen=True)
class LocalModelCheck:
    """The bundled model embedding one sentence: ``error`` when it could not,
    else ``valid`` tells whether the vector has the model's size and unit length."""

    model: str
    error: str | None
    valid: bool = False
    dims: int = 0
    norm: float = 0.0
    seconds: float = 0.0


@dataclass(frozen=True)
class TokenizerCheck:
    """The bundled tokenizer verified and loaded: ``error`` when it could not,
    else its vocabulary size and the tokens of a test sentence."""

    path: Path
    error: str | None
    vocab: int = 0
    tokens: int = 0


def check_local_tokenizer() -> TokenizerCheck:
    """Verify and load the tokenizer shipped as package data (blocking, fast)."""
    path = default_tokenizer_path()
    try:
        tok = load_tokenizer(path)
        ids = tok.encode("guildlore doctor test sentence").ids
    except Exception as exc:  # a broken install must be reported, not crash the check
        return TokenizerCheck(path, str(exc))
    return TokenizerCheck(path, None, vocab=int(tok.get_vocab_size()), tokens=len(ids))


def check_local_model(threads: int) -> LocalModelCheck:
    """Load the bundled model and embed a test sentence (blocking; a fraction of a second)."""
    import numpy as np

    started = time.perf_counter()
    try:
        emb = LocalMiniLMEmbedder(threads=threads)
        emb.load()
        vec = emb.embed_sync(["guildlore doctor test sentence"])
    except Exception as exc:  # a broken install must be reported, not crash the check
        return LocalModelCheck(LOCAL_MODEL_ID, str(exc))
    took = time.perf_counter() - started
    norm = float(np.linalg.norm(vec[0]))
    return LocalModelCheck(
        LOCAL_MODEL_ID,
        None,
        valid=vec.shape == (1, emb.dims) and abs(norm - 1.0) < 1e-3,
        dims=int(vec.shape[1]),
        norm=norm,
        seconds=took,
    )


async def list_models(llm: LLMConfig, timeout_s: float) -> list[str]:
    """The model ids the LLM endpoint lists (raises on transport or auth errors)."""
    client = make_openai_client(llm)
    try:
        page = await asyncio.wait_for(client.models.list(), timeout_s)
        return [m.id for m in page.data]
    finally:
        await client.close()


async def embedding_dims(llm: LLMConfig, model: str, timeout_s: float) -> int:
    """Embed one short text with ``model`` at the LLM endpoint; its dimensions."""
    client = make_openai_client(llm)
    try:
        resp = await asyncio.wait_for(
            client.embeddings.create(model=model, input=["guildlore doctor"]), timeout_s
        )
        return len(resp.data[0].embedding)
    finally:
        await client.close()
