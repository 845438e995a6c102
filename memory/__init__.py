"""guildlore's memory engine: a library with no framework imports.

bot/ and dashboard/ use ``Memory`` (memory.service) and the value types below.
"""

from memory.config import (
    EmbeddingConfig,
    IngestConfig,
    LLMConfig,
    MemoryConfig,
    RetrievalConfig,
    SnapshotConfig,
)
from memory.conversation import ReplyRequest, ReplyResult, compose_reply
from memory.engine import Memory
from memory.errors import (
    ConfigError,
    EmbeddingError,
    ExtractionError,
    ImportFormatError,
    InvalidInput,
    LLMError,
    MalformedReply,
    MemoryError_,
    MigrationError,
    StorageError,
)
from memory.guild_settings import GuildSettings
from memory.models import (
    LORE_SUBJECT,
    ActionLogEntry,
    Candidate,
    Fact,
    ForgetReport,
    HistoryEntry,
    Hit,
    IncomingMessage,
    IngestOutcome,
    PromptSlice,
    Remembered,
    ScoreParts,
    StoredMessage,
    Trace,
)

__all__ = [
    "LORE_SUBJECT",
    "ActionLogEntry",
    "Candidate",
    "ConfigError",
    "EmbeddingConfig",
    "EmbeddingError",
    "ExtractionError",
    "Fact",
    "ForgetReport",
    "GuildSettings",
    "HistoryEntry",
    "Hit",
    "ImportFormatError",
    "IncomingMessage",
    "IngestConfig",
    "IngestOutcome",
    "InvalidInput",
    "LLMConfig",
    "LLMError",
    "MalformedReply",
    "Memory",
    "MemoryConfig",
    "MemoryError_",
    "MigrationError",
    "PromptSlice",
    "Remembered",
    "ReplyRequest",
    "ReplyResult",
    "RetrievalConfig",
    "ScoreParts",
    "SnapshotConfig",
    "StorageError",
    "StoredMessage",
    "Trace",
    "compose_reply",
]
