"""Migration m006: message retry. Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # A message whose processing failed waits in state 'retry' until
    # retry_at; failed_attempts counts the failures (processing attempts of
    # any outcome stay in ``attempts``).
    con.executescript(
        """
        ALTER TABLE messages ADD COLUMN failed_attempts INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE messages ADD COLUMN retry_at TEXT;
        CREATE INDEX messages_retry_due ON messages (retry_at) WHERE state = 'retry';
        """
    )
