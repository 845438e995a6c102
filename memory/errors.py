"""One exception tree for the engine, and where the adapters' errors hang.

GuildloreError
├── ConfigError          bad settings, refused at start-up
├── StorageError         the database (SQLite or PostgreSQL) could not do what was asked
│   ├── MigrationError
│   └── DatabaseUnavailable  unreachable past the limit, or damaged: the process gives up
├── ExtractionError      an extractor's transport or parse failure
├── DecisionError        the LLM write decision failed (the offline rules decide)
├── EmbeddingError       an embedding provider failure
├── LLMError             chat-model transport or parse failure
│   ├── MalformedReply   the model answered, but with nothing usable
│   └── ToolsRejected    the endpoint refused a request because it offered tools
├── ImportFormatError    an export file that cannot be read (with position)
│   └── NotRegularFile   a FIFO, device or socket where a file was expected: skipped
└── InvalidInput         caller passed something we refuse (clear message)

Outside the tree on purpose, because each is handled inside its own adapter
and says nothing about the engine: ``bot.settings.SettingsError`` (every
settings problem at once), ``bot.commands._common.CliError`` (a message and an
exit status), ``bot.voice.service.VoiceJoinError`` (a voice channel that cannot
be joined), ``dashboard.params.Problem`` (an HTTP status and message). A caller
that only wants to know "the engine refused" catches ``GuildloreError``.
"""

from __future__ import annotations


class GuildloreError(Exception):
    """Base of every error the memory engine raises on purpose."""


class ConfigError(GuildloreError):
    pass


class StorageError(GuildloreError):
    pass


class MigrationError(StorageError):
    pass


class DatabaseUnavailable(StorageError):
    """The database stayed unreachable past ``database.unreachable_exit_s``
    (``unreachable``), or failed in a way that does not pass by itself (a
    damaged SQLite file): the process stops using it and should exit non-zero
    (``memory.db.status``)."""

    def __init__(self, message: str, *, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


class ExtractionError(GuildloreError):
    pass


class DecisionError(GuildloreError):
    """The LLM write decision's call failed or its reply was unusable."""


class EpisodeSummaryError(GuildloreError):
    """The LLM episode summary's call failed or its reply was unusable."""


class EmbeddingError(GuildloreError):
    pass


class LLMError(GuildloreError):
    pass


class MalformedReply(LLMError):
    """The model answered, but with nothing usable."""


class ToolsRejected(LLMError):
    """The endpoint answered a request that offered tools with a client error
    (400, 404, 422 or 501): it may not support function calling."""


class ImportFormatError(GuildloreError):
    def __init__(self, message: str, *, path: str | None = None, position: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}"
            if position is not None:
                where += f" at byte {position}"
            where += ": "
        super().__init__(where + message)
        self.path = path
        self.position = position


class NotRegularFile(ImportFormatError):
    """A path names a FIFO, device or socket: nothing was read from it."""


class InvalidInput(GuildloreError):
    pass
