"""A guild's message texts by seq, as the in-memory lexicon reads them
(``memory.retrieval.lexicon``): all of them, those stored after a seq, or a
few by seq; and the table's highest seq."""

from __future__ import annotations

from collections.abc import Sequence

from memory.db.core import Connection
from memory.db.sql import rows_in

Texts = list[tuple[int, str | None]]


def guild_texts(con: Connection, guild_id: str) -> Texts:
    """Every message of the guild (seq, text)."""
    rows = con.execute("SELECT seq, content FROM messages WHERE guild_id = ?", (guild_id,))
    return [(int(r[0]), r[1]) for r in rows]


def guild_message_count(con: Connection, guild_id: str) -> int:
    row = con.execute("SELECT count(*) FROM messages WHERE guild_id = ?", (guild_id,)).fetchone()
    return int(row[0])


def texts_after(con: Connection, guild_id: str, seq: int) -> Texts:
    """The guild's messages with a seq above ``seq``, in seq order (a
    primary-key range: ``+guild_id`` keeps SQLite off the guild's indexes)."""
    rows = con.execute(
        "SELECT seq, content FROM messages WHERE seq > ? AND +guild_id = ? ORDER BY seq",
        (seq, guild_id),
    )
    return [(int(r[0]), r[1]) for r in rows]


def texts_by_seq(con: Connection, guild_id: str, seqs: Sequence[int]) -> Texts:
    """The guild's messages among ``seqs``."""
    rows = rows_in(
        con,
        "SELECT seq, content FROM messages WHERE +guild_id = ? AND seq IN ({in})",
        list(seqs),
        before=[guild_id],
    )
    return [(int(r[0]), r[1]) for r in rows]


def highest_seq(con: Connection) -> int:
    """The highest seq any stored message has, whatever its guild (0: none)."""
    row = con.execute("SELECT max(seq) FROM messages").fetchone()
    return int(row[0]) if row and row[0] is not None else 0
