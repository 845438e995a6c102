"""guildlore's memory engine: a library with no framework imports.

This facade is the only door: bot/, dashboard/ and evals/ import
``from memory import <name>`` for the names in ``__all__`` and nothing else
(tests/test_architecture.py checks it).

``Memory`` (memory/engine.py) is the engine. It composes the database
(``store``), the durable inbox and the ingest queue with its batch pipeline
(``ingest``), the extractor (``extract``), the embedding service (``embed``),
the retriever (``retrieval``), the journal and the ``MEMORY.md`` snapshot,
and exposes ingest, search, the prompt slice, lore, forget and the snapshot
as async methods. The rest is composed as attributes, one object per
concern: ``facts``, ``traces``, ``guilds``, ``procedures``, ``admin``, ``members``,
``lifecycle`` and ``retention`` (memory/roles/), ``sessions`` (dashboard
logins) and ``inbox`` (unfinished and failed messages).

Beside it the facade exports the configuration dataclasses, the value types
of ``memory.models``, the errors, the guild settings' declaration, the
importer's entry points, a member's export (``export_json``,
``export_markdown``), the reply flow (``compose_reply``, ``ChatModel``),
the offline ``RuleExtractor``, the installation checks behind
``guildlore doctor``, and the client, clock and throttle helpers.
"""

from memory.clients import Clients, build_clients
from memory.clock import Clock, iso, parse_iso, system_clock
from memory.config import (
    ActionLogConfig,
    EmbeddingConfig,
    IngestConfig,
    LLMConfig,
    MemoryConfig,
    RetrievalConfig,
    SnapshotConfig,
    UsageConfig,
)
from memory.db.sqlite.driver import capabilities as sqlite_capabilities
from memory.db.url import redact_url
from memory.diagnostics import (
    check_local_model,
    check_local_tokenizer,
    database_status,
    embedding_dims,
    inbox_status,
    list_models,
    postgres_status,
)
from memory.disk import TroubleLog, disk_problem
from memory.disk_status import disk_status
from memory.embed.base import provider_default_model
from memory.embed.local import LocalMiniLMEmbedder
from memory.engine import Memory
from memory.errors import (
    ConfigError,
    DatabaseUnavailable,
    GuildloreError,
    InvalidInput,
    LLMError,
    StorageError,
)
from memory.extract.rules.extractor import RuleExtractor
from memory.guild_setting_groups import CHOICE_LABELS, SETTING_GROUPS
from memory.guild_settings import GUILD_SETTINGS, GUILD_SETTINGS_BY_KEY, parse_guild_setting
from memory.importer.lock import ImportBusy, import_lock
from memory.importer.reader import check_export, iter_paths, read_header
from memory.importer.session import ImportReport, ImportStop, import_files, import_messages
from memory.ingest.write_caps import CapReached
from memory.llm import ChatModel
from memory.member_export import export_json, export_markdown
from memory.models import (
    DEFAULT_SEARCH_SCOPE,
    EPISODE_SUBJECT,
    FACT_TYPES,
    LORE_SUBJECT,
    ActionLogEntry,
    Episode,
    Fact,
    HistoryEntry,
    Hit,
    IncomingMessage,
    PendingFact,
    Procedure,
    RequestLogEntry,
    SearchScope,
    StoredMessage,
    Trace,
)
from memory.ownership import GuildOwnership
from memory.privacy import Deployment, deployment_of, privacy_notice
from memory.reply.conversation import ReplyRequest, ReplyResult, compose_reply
from memory.reply.record import record_reply_context
from memory.reply.window import record_bot_reply
from memory.retrieval.gate_calibration import load_calibration_file
from memory.review_policy import Queued, ReviewItem, Standing, may_decide
from memory.roles.catch_up import GuildCatchUp
from memory.roles.consolidation.llm import PairChecker
from memory.roles.members import (
    FactHidden,
    FactMissing,
    MemberFact,
    MemberRecord,
    NotYours,
)
from memory.roles.provenance import Explained
from memory.roles.review.decisions import ReviewClosed, ReviewResult
from memory.roles.review.role import ReviewCard
from memory.roles.usage import UsageWindow
from memory.store.copy_db import CopyReport, copy_sqlite_to_postgres
from memory.store.retention import RetentionTimer
from memory.throttle import Throttle
from memory.usage.series import ERROR_SERIES, REQUEST_KINDS, REQUEST_OUTCOMES, USAGE_SERIES

__all__ = [
    "disk_status",
    "TroubleLog",
    "ImportBusy",
    "import_lock",
    "disk_problem",
    "CHOICE_LABELS",
    "SETTING_GROUPS",
    "ERROR_SERIES",
    "REQUEST_KINDS",
    "REQUEST_OUTCOMES",
    "USAGE_SERIES",
    "RequestLogEntry",
    "UsageWindow",
    "postgres_status",
    "redact_url",
    "CapReached",
    "CopyReport",
    "Deployment",
    "Explained",
    "FactHidden",
    "FactMissing",
    "deployment_of",
    "privacy_notice",
    "copy_sqlite_to_postgres",
    "EPISODE_SUBJECT",
    "FACT_TYPES",
    "GUILD_SETTINGS",
    "GUILD_SETTINGS_BY_KEY",
    "LORE_SUBJECT",
    "ActionLogConfig",
    "ActionLogEntry",
    "ChatModel",
    "Clients",
    "Clock",
    "ConfigError",
    "DatabaseUnavailable",
    "EmbeddingConfig",
    "Episode",
    "Fact",
    "GuildCatchUp",
    "GuildOwnership",
    "GuildloreError",
    "HistoryEntry",
    "Hit",
    "ImportReport",
    "ImportStop",
    "IncomingMessage",
    "IngestConfig",
    "InvalidInput",
    "LLMConfig",
    "LLMError",
    "LocalMiniLMEmbedder",
    "StorageError",
    "MemberFact",
    "MemberRecord",
    "Memory",
    "MemoryConfig",
    "NotYours",
    "PairChecker",
    "Procedure",
    "PendingFact",
    "Queued",
    "ReviewCard",
    "ReviewClosed",
    "ReviewItem",
    "ReviewResult",
    "Standing",
    "may_decide",
    "ReplyRequest",
    "ReplyResult",
    "RetrievalConfig",
    "RetentionTimer",
    "RuleExtractor",
    "SearchScope",
    "DEFAULT_SEARCH_SCOPE",
    "SnapshotConfig",
    "UsageConfig",
    "StoredMessage",
    "Throttle",
    "Trace",
    "build_clients",
    "check_local_model",
    "check_local_tokenizer",
    "compose_reply",
    "database_status",
    "inbox_status",
    "embedding_dims",
    "export_json",
    "export_markdown",
    "import_files",
    "import_messages",
    "iso",
    "check_export",
    "iter_paths",
    "list_models",
    "load_calibration_file",
    "parse_guild_setting",
    "parse_iso",
    "provider_default_model",
    "read_header",
    "record_bot_reply",
    "record_reply_context",
    "sqlite_capabilities",
    "system_clock",
]
