"""One exception tree for the engine.

MemoryError_
├── ConfigError          bad settings, refused at start-up
├── StorageError         SQLite / sqlite-vec trouble
│   └── MigrationError
├── ExtractionError      an extractor's transport or parse failure
├── EmbeddingError       an embedding provider failure
├── LLMError             chat-model transport or parse failure
├── ImportFormatError    an export file that cannot be read (with position)
│   └── NotRegularFile   a FIFO, device or socket where a file was expected: skipped
└── InvalidInput         caller passed something we refuse (clear message)
"""

from __future__ import annotations


class MemoryError_(Exception):
    """Base of every error the memory engine raises on purpose."""


class ConfigError(MemoryError_):
    pass


class StorageError(MemoryError_):
    pass


class MigrationError(StorageError):
    pass


class ExtractionError(MemoryError_):
    pass


class EmbeddingError(MemoryError_):
    pass


class LLMError(MemoryError_):
    pass


class ImportFormatError(MemoryError_):
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


class InvalidInput(MemoryError_):
    pass
