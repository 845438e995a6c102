"""Migration m004: fts secure delete. Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # FTS5's secure-delete (SQLite ≥ 3.42) removes a deleted row's terms from
    # the index b-trees at once; without it they linger as tombstoned entries
    # until a merge, and a forgotten member's words stay readable in the file.
    con.executescript(
        """
        INSERT INTO memory_facts_fts(memory_facts_fts, rank) VALUES ('secure-delete', 1);
        INSERT INTO messages_fts(messages_fts, rank) VALUES ('secure-delete', 1);
        INSERT INTO memory_facts_fts(memory_facts_fts) VALUES ('optimize');
        INSERT INTO messages_fts(messages_fts) VALUES ('optimize');
        """
    )
