"""A guild's facts as the in-memory fact lexicon reads them
(``memory.retrieval.fact_lexicon``): the text the full-text index holds
(fact and evidence), activity and validity; all of them, those added after
an id, or a few by id; and which facts changed since a ``fact_history`` id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from memory.db.core import Connection
from memory.db.sql import rows_in

_COLUMNS = "id, fact, evidence_text, is_active, valid_from, valid_to"


class FactText(NamedTuple):
    id: int
    fact: str | None
    evidence: str | None
    active: bool
    valid_from: str | None
    valid_to: str | None


def _row(r: Any) -> FactText:
    return FactText(
        int(r[0]),
        r[1],
        r[2],
        bool(r[3]),
        None if r[4] is None else str(r[4]),
        None if r[5] is None else str(r[5]),
    )


def guild_fact_count(con: Connection, guild_id: str) -> int:
    row = con.execute(
        "SELECT count(*) FROM memory_facts WHERE guild_id = ?", (guild_id,)
    ).fetchone()
    return int(row[0])


def guild_facts(con: Connection, guild_id: str) -> list[FactText]:
    """Every fact of the guild, active or not, whatever its validity."""
    rows = con.execute(f"SELECT {_COLUMNS} FROM memory_facts WHERE guild_id = ?", (guild_id,))
    return [_row(r) for r in rows]


def facts_after(con: Connection, guild_id: str, fact_id: int) -> list[FactText]:
    """The guild's facts with an id above ``fact_id`` (a primary-key range:
    ``+guild_id`` keeps SQLite off the guild's indexes)."""
    rows = con.execute(
        f"SELECT {_COLUMNS} FROM memory_facts WHERE id > ? AND +guild_id = ? ORDER BY id",
        (fact_id, guild_id),
    )
    return [_row(r) for r in rows]


def facts_by_id(con: Connection, guild_id: str, ids: Sequence[int]) -> list[FactText]:
    """The guild's facts among ``ids``."""
    rows = rows_in(
        con,
        f"SELECT {_COLUMNS} FROM memory_facts WHERE +guild_id = ? AND id IN ({{in}})",
        list(ids),
        before=[guild_id],
    )
    return [_row(r) for r in rows]


def highest_fact_id(con: Connection) -> int:
    """The highest id any fact has, whatever its guild (0: none)."""
    row = con.execute("SELECT max(id) FROM memory_facts").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def history_top(con: Connection) -> int:
    """The highest ``fact_history`` id, whatever its guild (0: none)."""
    row = con.execute("SELECT max(id) FROM fact_history").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def changed_facts(con: Connection, guild_id: str, after: int, upto: int) -> list[int]:
    """The guild's facts with a history row whose id is in ``(after, upto]``."""
    rows = con.execute(
        "SELECT DISTINCT fact_id FROM fact_history WHERE id > ? AND id <= ? AND +guild_id = ? "
        "AND fact_id IS NOT NULL",
        (after, upto, guild_id),
    )
    return [int(r[0]) for r in rows]
