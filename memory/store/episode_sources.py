"""Which episodes a message is a source of, and the rebuild queue: what a
delete, an edit or a forget does to an episode, in the caller's transaction.

An episode is one text written from many messages, so unlike a fact it does
not survive on its other sources: any of its messages going away may take
words the summary carries. The episode is retracted, and the messages that
remain are queued to be summarised again (``episode_rebuilds``)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from memory.db.core import Connection
from memory.db.sql import chunks, marks

EPISODE_TYPE = "episode"


def episode_ids(con: Connection, fact_ids: Sequence[int]) -> set[int]:
    """The ids among ``fact_ids`` that are episodes."""
    out: set[int] = set()
    for chunk in chunks(list(fact_ids)):
        out.update(
            int(r[0])
            for r in con.execute(
                f"SELECT id FROM memory_facts WHERE fact_type = ? AND id IN ({marks(len(chunk))})",
                [EPISODE_TYPE, *chunk],
            )
        )
    return out


def episodes_citing(
    con: Connection, guild_id: str, message_ids: Sequence[str]
) -> dict[int, set[str]]:
    """Episodes any of ``message_ids`` is a source of → all their source messages."""
    found: dict[int, set[str]] = {}
    for chunk in chunks(list(message_ids)):
        for r in con.execute(
            f"SELECT s.fact_id FROM fact_sources s JOIN memory_facts f ON f.id = s.fact_id "
            f"WHERE s.guild_id = ? AND f.fact_type = ? AND s.message_id IN ({marks(len(chunk))})",
            [guild_id, EPISODE_TYPE, *chunk],
        ):
            found.setdefault(int(r[0]), set())
    for fids in chunks(list(found)):
        for r in con.execute(
            f"SELECT fact_id, message_id FROM fact_sources WHERE fact_id IN ({marks(len(fids))})",
            fids,
        ):
            found[int(r[0])].add(str(r[1]))
    return found


def queue_rebuild(
    con: Connection, guild_id: str, fact_id: int, remaining: set[str], now: str
) -> bool:
    """Queue the messages an episode keeps to be summarised again (before the
    episode's row is deleted). False: nothing remains, or not an episode."""
    row = con.execute(
        "SELECT channel_id FROM episodes WHERE fact_id = ? AND guild_id = ?", (fact_id, guild_id)
    ).fetchone()
    if row is None or not remaining:
        return False
    con.execute(
        "INSERT INTO episode_rebuilds (guild_id, channel_id, message_ids, queued_at) "
        "VALUES (?, ?, ?, ?)",
        (guild_id, str(row[0]), json.dumps(sorted(remaining)), now),
    )
    return True
