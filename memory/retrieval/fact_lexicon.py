"""An in-memory BM25 index of one guild's facts: the fact search's lexical
side, at numpy speed.

At 100k facts in a guild FTS5 computes ``bm25()`` for every match of a
question's words and SQLite reads each match's fact row to keep the guild's
active, current ones: most of a fact search's time (``bench/search.py``).
Here the guild's facts are the documents of a
``memory.retrieval.postings.Postings`` (keyed by fact id), each with what
the full-text index holds of it — the fact and its evidence quote, as one
document of two columns weighted alike, as ``bm25(memory_facts_fts)`` ranks
— and, beside it, whether it is active and its validity span.

Which facts count. The statistics (how many facts, their mean length, how
many hold a word) are taken over **all** of the guild's facts, active or
archived, current or superseded: as FTS5 takes them over its whole table,
so where the guild is the whole table every score is FTS5's, and a fact
archived or superseded does not move the others' scores. Another guild's
facts neither shape this guild's ranking nor show through it. The answer is
the best of the facts FTS5's query would keep: active, and valid at
``as_of`` (``valid_from <= as_of`` and ``valid_to`` unset or after it; with
no ``as_of``, ``valid_to`` unset); equal scores by id.

Coherence. Every change to a fact's text, activity or validity writes a
``fact_history`` row, except the few writes that record a ``FactsChanged``
event instead (a deleted message's quote leaving its facts). Every search
first reads the guild's facts added since (id above the table's highest at
the last refresh: a quiet guild does not scan a busy one's facts) and
those with a history row since the last search (ids by history id, above
the highest read), and reads them again: a fact whose text is unchanged is
updated in place. On PostgreSQL, where concurrent transactions may commit
out of order, the last seconds' ids of both are read again
(``memory.retrieval.rescan``).
A fact deleted, forgotten, purged, archived or edited leaves the vector
index through ``delete_fact_vectors_index``, whose change event (like
``FactsChanged``) reaches ``follow``: its row stops counting at once and is
re-read at the next search, and the rows of facts gone or changed so, with
every word only they held, leave memory then. Rows replaced because their
text changed in a write found through the history only (a re-observation's
new quote) leave memory when they are a twentieth of the rows.

Thread safety: a lexicon is read and refreshed on database reader threads
and told of changes on the committing thread; one lock per lexicon.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from memory.db.changes import Change, FactsChanged, VectorsRemoved
from memory.db.core import Connection
from memory.retrieval.fts_words import parse_match, words
from memory.retrieval.postings import Postings
from memory.retrieval.rescan import RescanWindow
from memory.store import fact_texts
from memory.store.fact_texts import FactText

# Sorts after every time stamp: an unset ``valid_to`` (true still) and an
# unset ``valid_from`` (never valid at a given time, as SQL's NULL compares).
_NEVER = "\U0010ffff"


@dataclass(frozen=True)
class FactSnapshot:
    history: int  # the highest fact_history id, read before the facts
    facts: list[FactText]


class FactLexicon:
    """The posting arrays of one guild's facts (see the module doc)."""

    def __init__(self, guild_id: str, epoch: int = 0) -> None:
        self.guild_id = guild_id
        self.lock = threading.Lock()
        self.ready = False
        self.epoch = epoch
        self.started_at = time.monotonic()
        self._docs = Postings()
        # By row of ``_docs``: active; active and open-ended (current);
        # validity bounds (``_NEVER`` for unset); the text's hash.
        self._active = np.zeros(0, dtype=bool)
        self._current = np.zeros(0, dtype=bool)
        self._from = np.zeros(0, dtype=object)
        self._to = np.zeros(0, dtype=object)
        self._sig = np.zeros(0, dtype=np.int64)
        self._top = 0  # highest fact id read (the table's, after a refresh)
        self._history = 0  # highest fact_history id read
        self._window = RescanWindow()
        self._recheck: set[int] = set()
        self._pending: list[int] = []  # changed while the snapshot was read
        self._purge = False  # rows to leave memory at the next refresh

    # -- size ---------------------------------------------------------------------------------
    @property
    def rows(self) -> int:
        return self._docs.rows

    @property
    def nbytes(self) -> int:
        return self._docs.nbytes + 200 * self._docs.size

    def holds(self, word: str) -> bool:
        """Whether any row held counts ``word`` (after the last refresh)."""
        with self.lock:
            return self._docs.holds(word)

    # -- building -----------------------------------------------------------------------------
    def stored(self, con: Connection) -> int:
        """How many facts the guild has in the database."""
        return fact_texts.guild_fact_count(con, self.guild_id)

    def snapshot(self, con: Connection) -> FactSnapshot:
        """The guild's facts as ``fill`` takes them (run on a reader thread).
        The history id is read first: a change committed after it is read
        again by the first refresh."""
        history = fact_texts.history_top(con)
        facts = fact_texts.guild_facts(con, self.guild_id)
        return FactSnapshot(history, facts)

    def fill(self, snap: FactSnapshot) -> None:
        """Install a snapshot, then drop what changed while it was read."""
        with self.lock:
            self._history = max(self._history, snap.history)
            for f in snap.facts:
                self._put_locked(f)
            self._compact_locked()
            pending, self._pending = self._pending, []
            self._drop_locked(pending)
            self.ready = True

    def _put_locked(self, f: FactText) -> None:
        """Hold fact ``f`` as it now reads: in place when its text is the
        one held, else as a new row (the old one waits for compaction)."""
        self._top = max(self._top, f.id)
        sig = hash((f.fact, f.evidence))
        r = self._docs.row_of(f.id)
        if r is None or int(self._sig[r]) != sig:
            if r is not None:
                self._docs.drop(f.id)
            # Two columns, each tokenised on its own: FTS5's row of the fact.
            r = self._docs.add(f.id, [*words(f.fact), *words(f.evidence)])
            self._grow(r + 1)
            self._sig[r] = sig
        self._active[r] = f.active
        self._current[r] = f.active and f.valid_to is None
        self._from[r] = _NEVER if f.valid_from is None else f.valid_from
        self._to[r] = _NEVER if f.valid_to is None else f.valid_to

    def _grow(self, need: int) -> None:
        if need <= len(self._sig):
            return
        cap = max(need, 2 * len(self._sig), 64)
        self._active = np.resize(self._active, cap)
        self._current = np.resize(self._current, cap)
        self._sig = np.resize(self._sig, cap)
        grown = np.full(cap, _NEVER, dtype=object)
        grown[: len(self._from)] = self._from
        self._from = grown
        grown = np.full(cap, _NEVER, dtype=object)
        grown[: len(self._to)] = self._to
        self._to = grown

    def _compact_locked(self) -> None:
        size = self._docs.size
        keep = self._docs.compact()
        if keep is None:
            return
        self._active = self._active[:size][keep].copy()
        self._current = self._current[:size][keep].copy()
        self._from = self._from[:size][keep].copy()
        self._to = self._to[:size][keep].copy()
        self._sig = self._sig[:size][keep].copy()

    def _drop_locked(self, ids: Iterable[int]) -> None:
        """Stop counting ``ids`` now; the next refresh reads them again (one
        not held too: a refresh under way may have read it just before)."""
        for fid in ids:
            if self._docs.drop(int(fid)) is not None:
                self._purge = True
            self._recheck.add(int(fid))

    # -- following the database -------------------------------------------------------------
    def follow(self, change: Change) -> None:
        """One change of a committed transaction (the lexicons' index passes each)."""
        if isinstance(change, VectorsRemoved) and change.kind == "facts":
            self.changed(change.ids)
        elif isinstance(change, FactsChanged):
            self.changed(change.ids)

    def changed(self, ids: Sequence[int]) -> None:
        """Facts gone, archived, or changed: they stop counting until re-read."""
        with self.lock:
            if not self.ready:
                self._pending.extend(int(i) for i in ids)
                return
            self._drop_locked(ids)

    def refresh(self, con: Connection) -> None:
        """Read what changed in the guild's facts since the last refresh (run
        on a reader thread)."""
        with self.lock:
            low_top, low_history = self._window.start(con, (self._top, self._history))
            # Taken now: a change told while the rows are read is read again next time.
            recheck, self._recheck = self._recheck, set()
        # The history first: a change that commits after it is read is read
        # again next time, whatever the facts' rows below said.
        top = fact_texts.history_top(con)
        # The table's highest fact id, read before the facts: the next
        # refresh starts there, so it scans only what any guild added since,
        # not every other guild's fact after this guild's newest (ids are
        # never used again).
        table_top = fact_texts.highest_fact_id(con)
        changed = set(recheck)
        if top > low_history:
            changed.update(fact_texts.changed_facts(con, self.guild_id, low_history, top))
        fresh = fact_texts.facts_after(con, self.guild_id, low_top)
        changed.difference_update(f.id for f in fresh)
        back = fact_texts.facts_by_id(con, self.guild_id, sorted(changed)) if changed else []
        with self.lock:
            for fid in changed.difference(f.id for f in back):
                if self._docs.drop(fid) is not None:
                    self._purge = True  # gone from the guild: its words go now
            for f in (*fresh, *back):
                self._put_locked(f)
            self._history = max(self._history, top)
            self._top = max(self._top, table_top)
            bound = max(1000, self._docs.size // 20)
            if self._purge or self._docs.dead > bound or self._docs.fresh_rows > bound:
                self._compact_locked()
                self._purge = False

    # -- search -------------------------------------------------------------------------------
    def best(self, match: str, limit: int, as_of: str | None = None) -> list[tuple[int, float]]:
        """(fact id, raw score) of the ``limit`` best matches of ``match``
        among the active facts valid at ``as_of`` (None: current facts), best
        first; the score is BM25 negated, as FTS5's ``bm25()`` (lower is
        better); equal scores by id."""
        phrases = parse_match(match)
        if not phrases or limit <= 0:
            return []

        def allowed(rows: np.ndarray) -> np.ndarray:
            if as_of is None:
                return self._current[rows]
            ok: np.ndarray = (
                self._active[rows] & (self._from[rows] <= as_of) & (self._to[rows] > as_of)
            )
            return ok.astype(bool)

        with self.lock:
            return self._docs.best(phrases, limit, allowed)
