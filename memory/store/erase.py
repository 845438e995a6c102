"""Compaction after an erase: no byte of deleted content left in the file.

``secure_delete`` zeroes the cell a DELETE frees, but not the stale copies an
earlier change left behind: a page rebuilt by a split or a defragmentation
keeps old cell bytes in its unallocated space, FTS5 and vec0 shadow tables
are rewritten the same way, and the WAL holds old page images until it is
checkpointed and truncated. So after an erase commits, ``VACUUM`` rebuilds
every page of the database from live content only (in WAL mode it writes the
new pages as WAL frames), and a TRUNCATE checkpoint copies them over the old
ones in the main file, shrinks the file to the new size and empties the WAL.

Writes wait meanwhile (they share the writer connection). Reads go on during
the VACUUM, on the snapshot they started with; the checkpoint that follows
holds this process's reads back, since it can empty the WAL only when no read
transaction is open. The cost is a rewrite of the whole database — worth it
for an erase, which is rare and must be complete. VACUUM builds its copy in
memory (every connection has ``temp_store = MEMORY``): for the moment, extra
memory about the size of the database.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from memory.errors import StorageError
from memory.store.db import Database


@dataclass(frozen=True)
class Compaction:
    pages: int  # pages in the database after the rewrite
    seconds: float  # wall time of the rewrite and the checkpoint


def _vacuum(con: Any) -> int:
    con.execute("VACUUM")
    # Copy what it can while reads go on, so the checkpoint that holds them
    # back has little left to do.
    con.execute("PRAGMA wal_checkpoint(PASSIVE)")
    return int(con.execute("PRAGMA page_count").fetchone()[0])


def _truncate_wal(con: Any) -> None:
    busy, _, _ = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:
        raise StorageError(
            "the WAL could not be emptied (another process holds a read on the "
            "database): erased content may remain in the file until the next erase"
        )


async def compact_erased(db: Database) -> Compaction:
    """Rewrite the database from live content and empty its WAL, after an
    erase committed. Raises ``StorageError`` when another process's read kept
    the WAL from being emptied."""
    start = time.perf_counter()
    pages = await db.exclusive(_vacuum)
    await db.exclusive(_truncate_wal, hold_reads=True)
    return Compaction(pages, time.perf_counter() - start)
