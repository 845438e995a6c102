"""Engine settings: frozen dataclasses holding every default the engine uses.

The bot's settings declaration (bot/settings.py) validates user input and
builds a ``MemoryConfig``; the engine itself never reads the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memory.ownership import GuildOwnership

if TYPE_CHECKING:
    from memory.retrieval.gate_calibration import GateCalibration


@dataclass(frozen=True)
class IngestConfig:
    queue_capacity: int = 400
    workers: int = 4  # concurrent extraction calls
    batch_size: int = 16  # messages of one channel per extraction call
    batch_wait_s: float = 0.05  # how long a worker waits to fill a batch
    drain_timeout_s: float = 5.0
    clean_max_chars: int = 320
    max_facts_per_message: int = 4
    keep_facts_per_subject: int = 80
    keep_lore_per_guild: int = 120
    # Budget defaults for guilds that set none (memory/guild_settings.py).
    keep_episodes_per_channel: int = 50
    keep_facts_per_guild: int = 20_000
    # Compaction (memory/ingest/budgets.py): the whole LLM decision's time,
    # and the LLM decisions one compaction may ask before archiving by value.
    compaction_timeout_s: float = 30.0
    compaction_llm_calls: int = 3
    # With an LLM extractor, the write decision is also the LLM's (one call
    # per batch); off, the offline rules decide.
    llm_decision: bool = True
    ingest_bot_messages: bool = True
    message_max_chars: int = 2000
    persist_batch_max: int = 256  # group commit size for the durable inbox
    # A message whose processing failed (the extraction call, or its batch) is
    # tried again after retry_base_s, doubling each time up to
    # retry_max_delay_s; the retry_max_attempts-th failure marks it failed.
    retry_max_attempts: int = 6
    retry_base_s: float = 30.0
    retry_max_delay_s: float = 3600.0
    # Longest sleep of the retry loop between looks at the table (it also
    # wakes when a retry is scheduled in this process).
    retry_poll_s: float = 60.0


@dataclass(frozen=True)
class SnapshotConfig:
    max_bytes: int = 16_384
    debounce_s: float = 1.0
    interval_s: float = 300.0
    facts_per_person: int = 6
    highlight_files: int = 3
    highlight_items: int = 24
    highlight_per_author: int = 8
    source_files: int = 5


@dataclass(frozen=True)
class RetrievalConfig:
    user_facts: int = 8
    relevant_facts: int = 10
    relevant_messages: int = 8
    slice_episodes: int = 2  # channel episodes in a reply's memory
    search_limit_max: int = 50
    knn_candidates: int = 64
    fts_candidates: int = 64
    subject_recent: int = 24
    backfill_per_query: int = 8
    recency_half_days: float = 45.0
    # Relevance-gate thresholds by embedding model name, on top of the ones
    # shipped with the package (``memory.retrieval.gate_calibration``).
    gate_calibration: Mapping[str, GateCalibration] = field(default_factory=dict)


@dataclass(frozen=True)
class EmbeddingConfig:
    provider: str = "local"  # "local" | "openai" | "none"
    model: str | None = None  # None → provider default
    batch_size: int = 64  # most texts per local run; runs also stop at BATCH_TOKENS
    threads: int = 2


@dataclass(frozen=True)
class LLMConfig:
    """An OpenAI-compatible endpoint. ``base_url`` None means no LLM."""

    base_url: str | None = None
    api_key: str | None = None
    chat_model: str = "gpt-4o-mini"
    extract_model: str | None = None  # None → chat_model
    timeout_s: float = 30.0
    max_retries: int = 1

    @property
    def enabled(self) -> bool:
        return bool(self.base_url or self.api_key)


@dataclass(frozen=True)
class ActionLogConfig:
    """How long the action log keeps its rows; a 0 turns that limit off."""

    keep_days: float = 30.0
    max_rows: int = 100_000
    prune_chunk: int = 5_000  # rows per write transaction, so a backlog never holds the writer


@dataclass(frozen=True)
class UsageConfig:
    """The operator's view over time: how often the buffered part of the daily
    series and the request log (searches, extraction calls, replies) is
    written, and how long the request log keeps its rows (a 0 turns that
    limit off). The daily series are a few rows per guild and day and are
    kept."""

    flush_s: float = 5.0
    request_log_keep_days: float = 30.0
    request_log_max_rows: int = 200_000
    prune_chunk: int = 5_000  # rows per write transaction, so a backlog never holds the writer
    # Request rows held in memory while the database cannot take them; the
    # oldest go first beyond this (counted).
    buffer_max_rows: int = 10_000


@dataclass(frozen=True)
class MemoryConfig:
    db_path: Path
    journal_dir: Path
    timezone: str = "UTC"
    ingest: IngestConfig = field(default_factory=IngestConfig)
    snapshot: SnapshotConfig = field(default_factory=SnapshotConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    action_log: ActionLogConfig = field(default_factory=ActionLogConfig)
    usage: UsageConfig = field(default_factory=UsageConfig)
    read_connections: int = 2
    # Seconds from an erase (a Discord delete or edit, a timed forget) to the
    # rewrite of the database file that drops its freed bytes: a burst of
    # deletes costs one rewrite. The erase itself is durable at once.
    compaction_delay_s: float = 30.0
    # ``postgresql://…``: the memory lives in that PostgreSQL database instead
    # of the SQLite file at ``db_path`` (the journal folder stays local).
    database_url: str | None = None
    # The guilds this process ingests, replays and runs per-guild jobs for
    # (its Discord shards); the default owns every guild.
    ownership: GuildOwnership = field(default_factory=GuildOwnership)
    # While the database cannot be reached, work waits for it; past this many
    # seconds the process gives up (``memory.db.status``; 0: never).
    database_unreachable_exit_s: float = 300.0

    @classmethod
    def for_data_dir(cls, data_dir: Path, **overrides: object) -> MemoryConfig:
        """A data dir holds the database and the journal folder (CLI ``--data-dir``)."""
        return cls(
            db_path=data_dir / "guildlore.sqlite3",
            journal_dir=data_dir / "memory_journal",
            **overrides,  # type: ignore[arg-type]
        )
