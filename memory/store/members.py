"""SQL for what memory keeps about one member of a guild: the facts about
them, their own messages and how many there are per channel."""

from __future__ import annotations

from collections.abc import Sequence

from memory.db.core import Connection
from memory.db.sql import chunks, marks
from memory.models import Fact, HistoryEntry, MemberPage, MemberSummary, StoredMessage
from memory.store.facts import FACT_COLUMNS, HISTORY_COLUMNS, row_to_fact, row_to_history
from memory.store.messages import MESSAGE_COLUMNS, row_to_message


def facts_about(con: Connection, guild_id: str, user_id: str, limit: int) -> list[Fact]:
    """Facts whose subject is the member, current ones first, newest first."""
    rows = con.execute(
        f"SELECT {FACT_COLUMNS} FROM memory_facts WHERE guild_id = ? AND subject = ? "
        "ORDER BY is_active DESC, id DESC LIMIT ?",
        (guild_id, user_id, limit),
    ).fetchall()
    return [row_to_fact(r) for r in rows]


def is_known(con: Connection, guild_id: str, user_id: str) -> bool:
    """Whether the guild holds anything of the member: a member row, facts
    about them, their messages or a fact waiting for their consent."""
    row = con.execute(
        "SELECT EXISTS (SELECT 1 FROM members WHERE guild_id = ? AND user_id = ?) "
        "OR EXISTS (SELECT 1 FROM memory_facts WHERE guild_id = ? AND subject = ?) "
        "OR EXISTS (SELECT 1 FROM messages WHERE guild_id = ? AND author_id = ?) "
        "OR EXISTS (SELECT 1 FROM consent_queue WHERE guild_id = ? AND user_id = ?)",
        (guild_id, user_id) * 4,
    ).fetchone()
    return bool(row[0])


MEMBER_SORTS = {
    "facts": "facts DESC, lower(u.display_name), u.user_id",
    "name": "lower(u.display_name), u.user_id",
    "messages": "messages DESC, lower(u.display_name), u.user_id",
    # coalesce: the two engines put NULLs at opposite ends.
    "last": "coalesce(m.last_at, '') DESC, lower(u.display_name), u.user_id",
}


def member_page(
    con: Connection,
    guild_id: str,
    *,
    search: str = "",
    with_facts_only: bool = True,
    sort: str = "facts",
    offset: int = 0,
    limit: int = 25,
) -> MemberPage:
    """A page of the guild's members with their counts, filtered by a part
    of their name or id (``search``), and — ``with_facts_only`` — only those
    with active facts; ``sort`` is a key of ``MEMBER_SORTS``."""
    where = ["u.guild_id = ?"]
    args: list[object] = [guild_id, guild_id, guild_id]
    needle = search.strip().lower()
    if needle:
        where.append("(instr(lower(u.display_name), ?) > 0 OR instr(u.user_id, ?) > 0)")
        args += [needle, needle]
    base = (
        "FROM members u "
        "LEFT JOIN (SELECT subject, count(*) AS n FROM memory_facts "
        "  WHERE guild_id = ? AND is_active = 1 GROUP BY subject) f ON f.subject = u.user_id "
        "LEFT JOIN (SELECT author_id, count(*) AS n, max(created_at) AS last_at FROM messages "
        "  WHERE guild_id = ? GROUP BY author_id) m ON m.author_id = u.user_id "
        f"WHERE {' AND '.join(where)}"
    )
    counts = con.execute(
        f"SELECT count(*), sum(CASE WHEN coalesce(f.n, 0) = 0 THEN 1 ELSE 0 END) {base}", args
    ).fetchone()
    total, without = int(counts[0] or 0), int(counts[1] or 0)
    shown = " AND coalesce(f.n, 0) > 0" if with_facts_only else ""
    rows = con.execute(
        "SELECT u.user_id, u.display_name, coalesce(f.n, 0) AS facts, "
        f"coalesce(m.n, 0) AS messages, m.last_at {base}{shown} "
        f"ORDER BY {MEMBER_SORTS[sort]} LIMIT ? OFFSET ?",
        [*args, limit, offset],
    ).fetchall()
    return MemberPage(
        tuple(
            MemberSummary(str(r[0]), str(r[1]), int(r[2]), int(r[3]), r[4] and str(r[4]))
            for r in rows
        ),
        total,
        without,
    )


def message_counts(con: Connection, guild_id: str, user_id: str) -> dict[str, int]:
    """The member's stored messages per channel."""
    return {
        str(r[0]): int(r[1])
        for r in con.execute(
            "SELECT channel_id, count(*) FROM messages WHERE guild_id = ? AND author_id = ? "
            "GROUP BY channel_id ORDER BY channel_id",
            (guild_id, user_id),
        )
    }


def messages_of(con: Connection, guild_id: str, user_id: str, limit: int) -> list[StoredMessage]:
    """The member's own stored messages, oldest first."""
    rows = con.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE guild_id = ? AND author_id = ? "
        "ORDER BY created_at, seq LIMIT ?",
        (guild_id, user_id, limit),
    ).fetchall()
    return [row_to_message(r) for r in rows]


def authors_of(con: Connection, guild_id: str, message_ids: Sequence[str]) -> dict[str, str]:
    """Message id → author id, for the stored ones among ``message_ids``."""
    found: dict[str, str] = {}
    for chunk in chunks(list(dict.fromkeys(message_ids))):
        for r in con.execute(
            f"SELECT id, author_id FROM messages WHERE guild_id = ? AND id IN ({marks(len(chunk))})",
            [guild_id, *chunk],
        ):
            found[str(r[0])] = str(r[1])
    return found


# Events after which a fact's row is gone (its history keeps no text).
ERASED_EVENTS = ("delete", "purge", "retract", "forget")


def histories(
    con: Connection, guild_id: str, fact_ids: Sequence[int]
) -> dict[int, list[HistoryEntry]]:
    """Each fact's history rows, oldest first."""
    out: dict[int, list[HistoryEntry]] = {}
    for chunk in chunks(list(dict.fromkeys(fact_ids))):
        rows = con.execute(
            f"SELECT {HISTORY_COLUMNS} FROM fact_history WHERE guild_id = ? "
            f"AND fact_id IN ({marks(len(chunk))}) ORDER BY id",
            [guild_id, *chunk],
        ).fetchall()
        for r in rows:
            out.setdefault(int(r["fact_id"]), []).append(row_to_history(r))
    return out


def erased_fact(con: Connection, guild_id: str, fact_id: int) -> tuple[str | None, str] | None:
    """(subject, when) of the erase of a fact that no longer exists; None when
    its history records no erase (it never existed, or its history went with
    the erase of its member)."""
    row = con.execute(
        "SELECT subject, created_at FROM fact_history WHERE guild_id = ? AND fact_id = ? "
        f"AND event IN ({marks(len(ERASED_EVENTS))}) ORDER BY id DESC LIMIT 1",
        [guild_id, fact_id, *ERASED_EVENTS],
    ).fetchone()
    if row is None:
        return None
    return (None if row["subject"] is None else str(row["subject"]), str(row["created_at"]))


def guilds_holding(con: Connection, user_id: str) -> list[str]:
    """Every guild whose memory holds anything of ``user_id``: their messages,
    facts about them, their name, pending consent questions, withheld
    messages, action-log rows, write counts."""
    found: set[str] = set()
    for sql in (
        "SELECT DISTINCT guild_id FROM messages WHERE author_id = ?",
        "SELECT DISTINCT guild_id FROM memory_facts WHERE subject = ?",
        "SELECT DISTINCT guild_id FROM members WHERE user_id = ?",
        "SELECT DISTINCT guild_id FROM consent_queue WHERE user_id = ?",
        "SELECT DISTINCT guild_id FROM held_messages WHERE user_id = ?",
        "SELECT DISTINCT guild_id FROM action_log WHERE subject = ? AND guild_id IS NOT NULL",
        "SELECT DISTINCT guild_id FROM write_quota WHERE author_id = ?",
        "SELECT DISTINCT guild_id FROM fact_history WHERE subject = ?",
    ):
        found.update(str(r[0]) for r in con.execute(sql, (user_id,)))
    return sorted(found)
