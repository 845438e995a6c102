"""All SQL for messages withheld while their author decides about a
sensitive fact found in them (``memory.ingest.consent_gate``).

A withheld message's text leaves ``messages`` (its row stays, empty, for
Discord's deletes and edits to find) and waits here: no search, reply
window, episode or journal rendering reads it, and it is not embedded. When
the author accepts every fact the gate queued from it, the text goes back
(``release``); when they refuse one or let it expire, the text is deleted
here and the message stays empty for good. A Discord delete or edit of the
message, and the erase of its author, drop the row.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory.db.core import Connection
from memory.db.sql import chunks, marks
from memory.store.journal_days import mark_dirty
from memory.store.vectors import delete_message_vectors_index


def hold(con: Connection, guild_id: str, message_id: str, user_id: str, now: str) -> bool:
    """Take the message's text out of ``messages`` into the held row; False
    when it is not stored (or held already)."""
    row = con.execute(
        "SELECT seq, content, created_at FROM messages WHERE guild_id = ? AND id = ?",
        (guild_id, message_id),
    ).fetchone()
    if row is None or not row["content"]:
        return False
    con.execute(
        "INSERT OR IGNORE INTO held_messages (guild_id, message_id, user_id, content, since) "
        "VALUES (?, ?, ?, ?, ?)",
        (guild_id, message_id, user_id, row["content"], now),
    )
    _set_content(con, guild_id, message_id, int(row["seq"]), "")
    mark_dirty(con, [str(row["created_at"])])  # a journal rendered from the database
    return True


def _set_content(con: Connection, guild_id: str, message_id: str, seq: int, content: str) -> None:
    # Its vectors go, and the change reaches the in-memory indexes (the
    # lexicon re-reads the row as it now reads).
    delete_message_vectors_index(con, [seq])
    con.execute("DELETE FROM message_vectors WHERE message_seq = ?", (seq,))
    con.execute(
        "UPDATE messages SET content = ? WHERE guild_id = ? AND id = ?",
        (content, guild_id, message_id),
    )


def is_held(con: Connection, guild_id: str, message_id: str) -> bool:
    row = con.execute(
        "SELECT 1 FROM held_messages WHERE guild_id = ? AND message_id = ?",
        (guild_id, message_id),
    ).fetchone()
    return row is not None


def held_among(con: Connection, guild_id: str, message_ids: Sequence[str]) -> set[str]:
    out: set[str] = set()
    for chunk in chunks(list(message_ids)):
        out.update(
            str(r[0])
            for r in con.execute(
                f"SELECT message_id FROM held_messages WHERE guild_id = ? "
                f"AND message_id IN ({marks(len(chunk))})",
                [guild_id, *chunk],
            )
        )
    return out


def settle(con: Connection, guild_id: str, message_id: str, refused: bool) -> str | None:
    """One of the message's pending facts was decided (``refused``: rejected
    or expired). When none is left pending, the text goes back if every one
    was accepted — the message id is returned, to be embedded — or is
    deleted for good."""
    row = con.execute(
        "SELECT content, refused FROM held_messages WHERE guild_id = ? AND message_id = ?",
        (guild_id, message_id),
    ).fetchone()
    if row is None:
        return None
    refused = refused or bool(row["refused"])
    pending = con.execute(
        "SELECT count(*) FROM consent_queue WHERE guild_id = ? AND message_id = ?",
        (guild_id, message_id),
    ).fetchone()[0]
    if pending:
        if refused:
            con.execute(
                "UPDATE held_messages SET refused = 1 WHERE guild_id = ? AND message_id = ?",
                (guild_id, message_id),
            )
        return None
    con.execute(
        "DELETE FROM held_messages WHERE guild_id = ? AND message_id = ?", (guild_id, message_id)
    )
    if refused:
        return None
    msg = con.execute(
        "SELECT seq, created_at FROM messages WHERE guild_id = ? AND id = ?",
        (guild_id, message_id),
    ).fetchone()
    if msg is None:
        return None
    _set_content(con, guild_id, message_id, int(msg["seq"]), str(row["content"]))
    mark_dirty(con, [str(msg["created_at"])])
    return message_id


def drop(con: Connection, guild_id: str, message_ids: Sequence[str]) -> int:
    """The messages were deleted or edited on Discord: their held text goes."""
    n = 0
    for chunk in chunks(list(message_ids)):
        n += con.execute(
            f"DELETE FROM held_messages WHERE guild_id = ? AND message_id IN ({marks(len(chunk))})",
            [guild_id, *chunk],
        ).rowcount
    return int(n)


def forget_user(con: Connection, guild_id: str, user_id: str) -> int:
    return int(
        con.execute(
            "DELETE FROM held_messages WHERE guild_id = ? AND user_id = ?", (guild_id, user_id)
        ).rowcount
    )


def count(con: Connection, guild_id: str | None = None) -> int:
    if guild_id is None:
        return int(con.execute("SELECT count(*) FROM held_messages").fetchone()[0])
    return int(
        con.execute(
            "SELECT count(*) FROM held_messages WHERE guild_id = ?", (guild_id,)
        ).fetchone()[0]
    )
