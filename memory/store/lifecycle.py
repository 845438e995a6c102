"""SQL for Discord's own message lifecycle: a message deleted or edited
after it was ingested.

A fact is held up by the messages it was observed in (``fact_sources``; a
fact without any link counts its ``source_message_id`` as its one source).
A message that goes away takes its support with it, and a fact left with no
support is erased: its row, vectors, traces and the text of its history,
with one ``retract`` history entry (no content) in their place. An episode
is erased when any of its messages goes (``memory.store.episode_sources``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from memory.db.changes import FactsChanged, record
from memory.db.core import Connection
from memory.db.sql import chunks, marks
from memory.store.episode_sources import episode_ids, queue_rebuild
from memory.store.facts import add_history
from memory.store.held_messages import drop as drop_held
from memory.store.journal_days import mark_dirty
from memory.store.messages import erase_messages
from memory.store.reply_context import erase_refs, fact_refs
from memory.store.vectors import delete_fact_vectors_index, delete_message_vectors_index


class Gone(NamedTuple):
    """A deleted message: its id and what its journal line is known by."""

    message_id: str
    created_at: str
    author_id: str
    channel_id: str
    content: str


@dataclass(frozen=True)
class DeleteCounts:
    messages: list[Gone]
    facts_retracted: int
    facts_kept: int
    traces: int
    journal_lines: int = 0  # set by the caller that rewrites the journal


@dataclass(frozen=True)
class StoredEdit:
    """A message row after an edit was recorded on it."""

    seq: int
    old_content: str
    facts_retracted: int
    journal_lines: int = 0  # set by the caller that rewrites the journal


def supported_facts(
    con: Connection, guild_id: str, message_ids: Sequence[str]
) -> dict[int, set[str]]:
    """Facts that any of ``message_ids`` supports → all the messages supporting them."""
    found: dict[int, set[str]] = {}
    for chunk in chunks(list(message_ids)):
        held = marks(len(chunk))
        rows = con.execute(
            f"SELECT fact_id FROM fact_sources WHERE guild_id = ? AND message_id IN ({held}) "
            f"UNION SELECT id FROM memory_facts WHERE guild_id = ? "
            f"AND source_message_id IN ({held})",
            [guild_id, *chunk, guild_id, *chunk],
        ).fetchall()
        for r in rows:
            found.setdefault(int(r[0]), set())
    for fids in chunks(list(found)):
        held = marks(len(fids))
        for r in con.execute(
            f"SELECT fact_id, message_id FROM fact_sources WHERE fact_id IN ({held})", fids
        ):
            found[int(r[0])].add(str(r[1]))
        # A fact from before fact_sources existed has only its source_message_id.
        for r in con.execute(
            f"SELECT id, source_message_id FROM memory_facts WHERE id IN ({held}) "
            f"AND source_message_id IS NOT NULL AND NOT EXISTS "
            f"(SELECT 1 FROM fact_sources s WHERE s.fact_id = memory_facts.id)",
            fids,
        ):
            found[int(r[0])].add(str(r[1]))
    return found


def retract_facts(
    con: Connection, guild_id: str, fact_ids: Sequence[int], actor: str, now: str
) -> int:
    """Erase facts that lost all their support; a content-free ``retract``
    history entry records each. Returns the number of traces removed."""
    traces = 0
    for chunk in chunks(list(fact_ids)):
        held = marks(len(chunk))
        subjects = {
            int(r[0]): str(r[1])
            for r in con.execute(
                f"SELECT id, subject FROM memory_facts WHERE id IN ({held})", chunk
            )
        }
        delete_fact_vectors_index(con, chunk)
        con.execute(f"DELETE FROM memory_fact_vectors WHERE fact_id IN ({held})", chunk)
        traces += con.execute(
            f"DELETE FROM memory_traces WHERE guild_id = ? AND fact_id IN ({held})",
            [guild_id, *chunk],
        ).rowcount
        erase_refs(con, guild_id, fact_refs(chunk))
        # The event trail stays; the words the source took back do not.
        con.execute(
            f"UPDATE fact_history SET old_text = NULL, new_text = NULL, reason = NULL "
            f"WHERE fact_id IN ({held})",
            chunk,
        )
        con.execute(f"DELETE FROM memory_facts WHERE id IN ({held})", chunk)
        for fid in chunk:
            if fid in subjects:
                add_history(
                    con, guild_id, fid, subjects[fid], "retract", None, None, actor, now=now
                )
    return traces


def _unlink(con: Connection, guild_id: str, fact_id: int, gone: set[str], rest: set[str]) -> None:
    """A fact keeps other support: drop the links to ``gone`` and what it
    carried from them (its evidence quote and source id)."""
    con.executemany(
        "DELETE FROM fact_sources WHERE fact_id = ? AND message_id = ?",
        [(fact_id, m) for m in gone],
    )
    row = con.execute(
        "SELECT source_message_id FROM memory_facts WHERE id = ?", (fact_id,)
    ).fetchone()
    if row is not None and row[0] in gone:
        newest = sorted(rest)[-1] if rest else None
        con.execute(
            "UPDATE memory_facts SET source_message_id = ?, evidence_text = NULL WHERE id = ?",
            (newest, fact_id),
        )
        record(con, FactsChanged((fact_id,)))  # the quote leaves the fact's indexed text


def withdraw_support(
    con: Connection,
    guild_id: str,
    message_ids: Sequence[str],
    actor: str,
    now: str,
    keep: Callable[[int], bool] | None = None,
    *,
    edited: bool = False,
) -> tuple[int, int, int]:
    """``message_ids`` stop supporting their facts; facts left with no support
    are retracted. ``keep(fact_id)`` true: the fact is still supported by the
    message (an edit that still says it). ``edited``: the messages stay, with
    new text (their episodes are rewritten with them). Returns (retracted,
    kept, traces)."""
    gone_ids = set(message_ids)
    retract: list[int] = []
    kept = 0
    found = supported_facts(con, guild_id, message_ids)
    episodes = episode_ids(con, list(found))
    for fact_id, sources in found.items():
        gone = sources & gone_ids
        rest = sources - gone_ids
        if fact_id in episodes:
            # A summary may carry the words of any of its messages: it goes
            # whole, and what remains is summarised again (an edited message
            # remains, with its new text).
            queue_rebuild(con, guild_id, fact_id, sources if edited else rest, now)
            retract.append(fact_id)
            continue
        if keep is not None and keep(fact_id):
            continue
        if rest:
            _unlink(con, guild_id, fact_id, gone, rest)
            kept += 1
        else:
            retract.append(fact_id)
    traces = retract_facts(con, guild_id, retract, actor, now)
    return len(retract), kept, traces


def delete_messages(
    con: Connection, guild_id: str, message_ids: Sequence[str], actor: str, now: str
) -> DeleteCounts:
    """Erase messages of one guild: rows (and their FTS rows, via triggers),
    vectors, traces, and their support of facts. Unknown ids are skipped."""
    rows: list[Any] = []
    for chunk in chunks(list(dict.fromkeys(message_ids))):
        rows.extend(
            con.execute(
                f"SELECT seq, id, created_at, author_id, channel_id, content FROM messages "
                f"WHERE guild_id = ? AND id IN ({marks(len(chunk))})",
                [guild_id, *chunk],
            ).fetchall()
        )
    ids = [str(r["id"]) for r in rows]
    if not ids:
        return DeleteCounts([], 0, 0, 0)
    retracted, kept, traces = withdraw_support(con, guild_id, ids, actor, now)
    traces += erase_messages(con, guild_id, ids, [int(r["seq"]) for r in rows])
    gone = [
        Gone(r["id"], r["created_at"], r["author_id"], r["channel_id"], r["content"]) for r in rows
    ]
    return DeleteCounts(gone, retracted, kept, traces)


def edit_message(
    con: Connection,
    guild_id: str,
    message_id: str,
    content: str,
    actor: str,
    now: str,
    grounded: Callable[[str, str], bool],
) -> StoredEdit | None:
    """Replace a stored message's text and send it back to extraction
    (state ``pending``); facts it alone supported that the new text no longer
    grounds (``grounded(fact, text)``) are retracted. None: not stored, or
    the text did not change."""
    row = con.execute(
        "SELECT seq, content, created_at FROM messages WHERE guild_id = ? AND id = ?",
        (guild_id, message_id),
    ).fetchone()
    if row is None or row["content"] == content:
        return None
    texts = {
        int(r[0]): str(r[1])
        for r in con.execute(
            "SELECT id, fact FROM memory_facts WHERE guild_id = ? AND id IN "
            "(SELECT fact_id FROM fact_sources WHERE guild_id = ? AND message_id = ? "
            "UNION SELECT id FROM memory_facts WHERE guild_id = ? AND source_message_id = ?)",
            (guild_id, guild_id, message_id, guild_id, message_id),
        )
    }
    retracted, _, _ = withdraw_support(
        con,
        guild_id,
        [message_id],
        actor,
        now,
        keep=lambda fid: grounded(texts.get(fid, ""), content),
        edited=True,
    )
    # A fact the new text still grounds keeps no quote of the old text; the
    # extraction of the new text quotes it again.
    quoting = [
        int(r[0])
        for r in con.execute(
            "SELECT id FROM memory_facts WHERE guild_id = ? AND source_message_id = ? "
            "AND evidence_text IS NOT NULL",
            (guild_id, message_id),
        )
    ]
    con.execute(
        "UPDATE memory_facts SET evidence_text = NULL WHERE guild_id = ? AND source_message_id = ?",
        (guild_id, message_id),
    )
    if quoting:
        record(con, FactsChanged(tuple(quoting)))  # the quotes leave the facts' indexed text
    seq = int(row["seq"])
    delete_message_vectors_index(con, [seq])
    con.execute("DELETE FROM message_vectors WHERE message_seq = ?", (seq,))
    # A text withheld for consent is replaced by the new one (read anew).
    drop_held(con, guild_id, [message_id])
    # ``edited_at`` marks the journal line of an edited message "(edited)".
    con.execute(
        "UPDATE messages SET content = ?, edited_at = coalesce(edited_at, ?), state = 'pending', "
        "state_reason = 'edited', retry_at = NULL WHERE seq = ?",
        (content, now, seq),
    )
    mark_dirty(con, [str(row["created_at"])])
    return StoredEdit(seq, str(row["content"]), retracted)


def current_content(con: Connection, message_id: str) -> str | None:
    """The stored text of a message, or None once it is deleted."""
    row = con.execute("SELECT content FROM messages WHERE id = ?", (message_id,)).fetchone()
    return None if row is None else str(row[0])
