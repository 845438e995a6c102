"""What message ranking reads of a message, read once per search.

A question in parts ranks mostly the same messages several times (the whole
question and each part, ``memory.retrieval.decompose``), and reading a long
message — its row and its channel neighbours from the database, its compact
form and words for the lexical overlap, its share of statements, its share of
first-person words — costs more than scoring it. ``TextReadings`` keeps those readings for one
search only: it holds message text, which must not outlive the search (a
message forgotten meanwhile is gone from memory once the search returns).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeVar

from memory.db.core import Connection
from memory.models import StoredMessage
from memory.retrieval.hits import parse_time
from memory.retrieval.lexical import LexicalQuery, compact_tokens
from memory.retrieval.voice import first_person_share, statement_share
from memory.store import messages as store_messages
from memory.store.search import adjacent_seqs
from memory.text import compact

__all__ = ["TextReadings"]

_V = TypeVar("_V")


def _read_through(
    known: dict[int, _V], seqs: Sequence[int], read: Callable[[list[int]], dict[int, _V]]
) -> dict[int, _V]:
    """What ``known`` holds of ``seqs``; the rest read (``read``) and kept."""
    out = {s: known[s] for s in seqs if s in known}
    if len(out) < len(seqs):
        fresh = read([s for s in seqs if s not in out])
        known.update(fresh)
        out.update(fresh)
    return out


class _Reading:
    __slots__ = ("compacted", "first_person", "statement", "text", "words")

    def __init__(self, text: str) -> None:
        self.text = text
        self.compacted: str | None = None
        self.words: set[str] | None = None
        self.statement: float | None = None
        self.first_person: float | None = None


class TextReadings:
    """Readings of message texts by seq, for the searches of one query."""

    def __init__(self) -> None:
        self._by_seq: dict[int, _Reading] = {}
        self._rows: dict[int, StoredMessage] = {}
        self._adjacent: dict[int, tuple[int | None, int | None]] = {}
        self._times: dict[str, datetime | None] = {}
        self._guild: str | None = None

    def _check_guild(self, guild_id: str) -> None:
        if self._guild is None:
            self._guild = guild_id
        elif self._guild != guild_id:  # one question searches one guild
            raise ValueError("TextReadings hold one guild's messages")

    def rows(self, con: Connection, guild_id: str, seqs: Sequence[int]) -> dict[int, StoredMessage]:
        """The guild's messages among ``seqs`` (``messages_by_seq``): those one
        of this question's searches has read already, the others read now.

        The searches of a question run on several reader threads at once; a
        row two of them read at the same moment is read twice, never wrongly.
        """
        self._check_guild(guild_id)
        return _read_through(
            self._rows, seqs, lambda unread: store_messages.messages_by_seq(con, guild_id, unread)
        )

    def _get(self, seq: int, text: str) -> _Reading:
        r = self._by_seq.get(seq)
        if r is None or r.text != text:  # a text edited between two reads counts anew
            r = self._by_seq[seq] = _Reading(text)
        return r

    def adjacent(
        self, con: Connection, guild_id: str, items: Sequence[tuple[int, StoredMessage]]
    ) -> dict[int, tuple[int | None, int | None]]:
        """``adjacent_seqs`` of ``items``: those one of this question's
        searches has looked up already, the others looked up now."""
        self._check_guild(guild_id)
        msgs = dict(items)
        return _read_through(
            self._adjacent,
            list(msgs),
            lambda unread: adjacent_seqs(con, guild_id, [(s, msgs[s]) for s in unread]),
        )

    def time(self, stamp: str) -> datetime | None:
        """``parse_time`` of a message's time stamp."""
        try:
            return self._times[stamp]
        except KeyError:
            value = self._times[stamp] = parse_time(stamp)
            return value

    def lacks_voice(self, seq: int, text: str) -> bool:
        """Whether the message's statement or first-person share is still unread
        (safe from a reader thread: a stale answer only asks again)."""
        r = self._by_seq.get(seq)
        return r is None or r.text != text or r.statement is None or r.first_person is None

    def know(self, seq: int, text: str, statement: float, first_person: float) -> None:
        """Take the message's statement and first-person shares as read
        elsewhere (``memory.retrieval.held_voice``) from the same ``text``."""
        r = self._get(seq, text)
        r.statement = statement
        r.first_person = first_person

    def statement(self, seq: int, text: str) -> float:
        """``statement_share`` of the message."""
        r = self._get(seq, text)
        if r.statement is None:
            r.statement = statement_share(text)
        return r.statement

    def first_person(self, seq: int, text: str) -> float:
        """``first_person_share`` of the message."""
        r = self._get(seq, text)
        if r.first_person is None:
            r.first_person = first_person_share(text)
        return r.first_person

    def compacted(self, seq: int, text: str) -> str:
        """``compact`` of the message."""
        r = self._get(seq, text)
        if r.compacted is None:
            r.compacted = compact(text)
        return r.compacted

    def lexical(self, query: LexicalQuery, seq: int, text: str) -> float:
        """``query.score`` of the message."""
        r = self._get(seq, text)
        compacted = self.compacted(seq, text)

        def words() -> set[str]:
            if r.words is None:
                r.words = set(compact_tokens(compacted))
            return r.words

        return query.score_compact(compacted, words)
