"""Migration m013: decision. Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # A history row can name the other fact of the change: a supersede row
    # links the old fact and the new one, a historical row the fact that was
    # newer. Rows written before the column existed carry the other fact's id
    # only in their reason ("…: superseded by fact 12"); it is read back out.
    con.executescript(
        """
        ALTER TABLE fact_history ADD COLUMN linked_fact_id INTEGER;
        UPDATE fact_history SET linked_fact_id = CAST(substr(reason, instr(reason, 'superseded by fact ') + 19) AS INTEGER) WHERE event = 'supersede' AND instr(reason, 'superseded by fact ') > 0;
        UPDATE fact_history SET linked_fact_id = CAST(substr(reason, instr(reason, 'supersedes fact ') + 16) AS INTEGER) WHERE event = 'supersede' AND instr(reason, 'supersedes fact ') > 0;
        UPDATE fact_history SET linked_fact_id = CAST(substr(reason, instr(reason, ' than fact ') + 11) AS INTEGER) WHERE event = 'historical' AND instr(reason, ' than fact ') > 0;
        CREATE INDEX history_linked ON fact_history (linked_fact_id) WHERE linked_fact_id IS NOT NULL;
        """
    )
