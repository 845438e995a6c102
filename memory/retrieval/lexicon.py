"""An in-memory BM25 index of one guild's messages: the message search's
lexical side, at numpy speed.

In a guild of long messages a question's common words match a large share of
them, and FTS5 computes ``bm25()`` match by match, reading each match's
position lists and its stored length: most of a message search's time at
100k messages (``bench/search.py``). Here the guild's messages are the
documents of a ``memory.retrieval.postings.Postings`` (keyed by seq), so a
query's BM25 over every match is a few vector operations per word.

Scoring is FTS5's BM25 over the **guild's own** messages: a word's rarity is
measured in the community that wrote it, and another guild's talk neither
shapes this guild's ranking nor shows through it. Words and queries are read
as the FTS5 table reads them (``memory.retrieval.fts_words``).

Coherence. The index is built from a snapshot of the guild's messages; every
search first reads the guild's messages stored since (seq above the table's
highest at the last refresh, so a quiet guild does not scan a busy one's
talk: one writer assigns seqs in commit order on SQLite; on PostgreSQL,
where concurrent transactions may commit out of order, the last seconds'
seqs are read again: ``memory.retrieval.rescan``). A message deleted,
erased, purged, expired or edited leaves the vector index through
``delete_message_vectors_index``, whose change event reaches ``follow``: its
row stops counting at once (statistics too) and is re-read at the next search,
so an edited text comes back as it now reads (and a deleted newest seq,
which SQLite hands out again, once it is used anew). The rows of removed
messages, and every word only they held, leave memory at the next search
(``GuildLexicon.refresh`` compacts the arrays). Another connection's commits
are handled by the lexicons' index (``memory.retrieval.lexicons``).

Thread safety: a lexicon is read and refreshed on database reader threads
and told of removals on the committing thread; one lock per lexicon.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence

import numpy as np

from memory.db.changes import Change, VectorsRemoved
from memory.db.core import Connection
from memory.retrieval.fts_words import parse_match, words
from memory.retrieval.held_voice import HeldVoice
from memory.retrieval.postings import Postings
from memory.retrieval.rescan import RescanWindow
from memory.store import message_texts


class GuildLexicon:
    """The posting arrays of one guild's messages (see the module doc)."""

    def __init__(self, guild_id: str, epoch: int = 0) -> None:
        self.guild_id = guild_id
        self.lock = threading.Lock()
        self.ready = False
        self.epoch = epoch
        self.started_at = time.monotonic()
        self._docs = Postings()
        self._voice = HeldVoice()  # by the postings' rows
        self._watermark = 0
        self._window = RescanWindow()
        self._recheck: set[int] = set()
        self._pending_removed: list[int] = []

    # -- size ---------------------------------------------------------------------------------
    @property
    def rows(self) -> int:
        return self._docs.rows

    @property
    def nbytes(self) -> int:
        return self._docs.nbytes + self._voice.nbytes

    def holds(self, word: str) -> bool:
        """Whether any row held counts ``word`` (after the last refresh)."""
        with self.lock:
            return self._docs.holds(word)

    # -- building -----------------------------------------------------------------------------
    def stored(self, con: Connection) -> int:
        """How many messages the guild has in the database."""
        return message_texts.guild_message_count(con, self.guild_id)

    def snapshot(self, con: Connection) -> message_texts.Texts:
        """The guild's messages as ``fill`` takes them (run on a reader thread)."""
        return message_texts.guild_texts(con, self.guild_id)

    def fill(self, rows: Sequence[tuple[int, str | None]]) -> None:
        """Install a snapshot of the guild's messages (seq, text), then apply
        the removals that arrived while it was read."""
        with self.lock:
            self._add_locked(rows)
            self._compact_locked()
            removed, self._pending_removed = self._pending_removed, []
            self._remove_locked(removed)
            self.ready = True

    def _add_locked(self, rows: Sequence[tuple[int, str | None]]) -> None:
        for seq, text in rows:
            seq = int(seq)
            self._watermark = max(self._watermark, seq)
            if self._docs.row_of(seq) is not None:
                continue  # already held (a rescan)
            r = self._docs.add(seq, words(text))
            self._voice.grow(r + 1)
            self._voice.read(r, text or "")

    def _compact_locked(self) -> None:
        kept = self._docs.compact()
        if kept is not None:  # rows renumbered
            self._voice.keep(np.flatnonzero(kept))

    def _remove_locked(self, seqs: Iterable[int]) -> None:
        """Stop counting ``seqs`` now; the next refresh reads them again (an
        edit comes back as it now reads) and drops them once more first (a
        refresh that read a row just before its delete committed put it back)."""
        for seq in seqs:
            self._docs.drop(int(seq))
            self._recheck.add(int(seq))

    # -- following the database -------------------------------------------------------------
    def follow(self, change: Change) -> None:
        """One change of a committed transaction (the lexicons' index passes each)."""
        if isinstance(change, VectorsRemoved) and change.kind == "messages":
            self.removed(change.ids)

    def removed(self, seqs: Sequence[int]) -> None:
        """Messages gone from the guild (or about to be re-read: an edit)."""
        with self.lock:
            if not self.ready:
                self._pending_removed.extend(int(s) for s in seqs)
                return
            self._remove_locked(seqs)

    def refresh(self, con: Connection) -> None:
        """Read what the guild stored since the last refresh (run on a reader thread)."""
        with self.lock:
            (low,) = self._window.start(con, (self._watermark,))
            pending = self._recheck
        # The table's highest seq, read first: the next refresh starts there,
        # so it scans only what any guild stored since, not every other
        # guild's message after this guild's newest.
        top = message_texts.highest_seq(con)
        recheck: list[int] = []
        if pending:
            # SQLite gives a new row the highest seq in the table plus one:
            # once the newest messages are deleted (in any guild: every
            # lexicon is told) their seqs come back. A removed seq above the
            # table's highest is read again only once it is used anew.
            with self.lock:
                recheck = sorted(s for s in self._recheck if s <= top)
                self._recheck = {s for s in self._recheck if s > top}
        fresh = message_texts.texts_after(con, self.guild_id, low)
        back = message_texts.texts_by_seq(con, self.guild_id, recheck) if recheck else []
        with self.lock:
            for seq in recheck:
                self._docs.drop(seq)
            if fresh or back:
                self._add_locked([*fresh, *back])
            self._watermark = max(self._watermark, top)
            if self._docs.dead or self._docs.fresh_rows > max(1000, self._docs.size // 20):
                self._compact_locked()

    # -- search -------------------------------------------------------------------------------
    def best(self, match: str, limit: int) -> list[tuple[int, float]]:
        """(seq, raw score) of the ``limit`` best matches of ``match``, best
        first; the score is BM25 negated, as FTS5's ``bm25()`` (lower is
        better); equal scores by seq."""
        phrases = parse_match(match)
        if not phrases or limit <= 0:
            return []
        with self.lock:
            return self._docs.best(phrases, limit)

    def voices(self, texts: Iterable[tuple[int, str]]) -> dict[int, tuple[float, float]]:
        """(statement share, first-person share) of each (seq, text) held as
        that text (``memory.retrieval.held_voice``); others are left out."""
        with self.lock:
            held = [
                (seq, r, text) for seq, text in texts if (r := self._docs.row_of(seq)) is not None
            ]
            got = self._voice.of([r for _, r, _ in held], [t for _, _, t in held])
        return {seq: v for (seq, _, _), v in zip(held, got, strict=True) if v is not None}
