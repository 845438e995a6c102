"""BM25 posting arrays over a set of documents, each keyed by an integer
(a message's seq, a fact's id): the index under the in-memory lexicons
(``memory.retrieval.lexicon``, ``memory.retrieval.fact_lexicon``).

Each word has its posting arrays (document rows, times said), so a query's
BM25 over every match is a few vector operations per word. Scoring is
FTS5's BM25 (k1 1.2, b 0.75, each word's IDF ``log((N - n + 0.5) / (n +
0.5))``, floored at 1e-6; lengths in words) over the documents held here;
with every column weight 1, as the store ranks, a document of several
columns counts as their words together.

A dropped document stops counting at once (its row is masked, the
statistics lose it); its postings, and every word only it held, leave memory
at the next ``compact``, which renumbers the rows. Documents added since the
last ``compact`` wait in lists, merged into the arrays there.

Not thread-safe: the owner holds its lock around every call.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from memory.retrieval.fts_words import Phrase

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6  # FTS5's: a word in more than half the rows still counts a little

# Which of the matching rows may be answered (a boolean per row given).
RowFilter = Callable[[np.ndarray], np.ndarray]


class Postings:
    def __init__(self) -> None:
        self._key = np.zeros(0, dtype=np.int64)
        self._len = np.zeros(0, dtype=np.float32)
        self._alive = np.zeros(0, dtype=bool)
        self._row: dict[int, int] = {}
        self._n = 0
        self._dead = 0
        self._total_len = 0.0
        # word -> (rows, times said); ``_fresh`` holds rows added since the
        # arrays were built, as lists, merged into the arrays by ``compact``.
        self._post: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._fresh: dict[str, tuple[list[int], list[int]]] = {}
        self._fresh_rows = 0
        self._vocab: list[str] = []  # sorted words, for prefixes
        self._vocab_stale = True

    # -- size ---------------------------------------------------------------------------------
    @property
    def rows(self) -> int:
        """Documents counted."""
        return self._n - self._dead

    @property
    def size(self) -> int:
        """Rows in use, dropped ones included (until ``compact``)."""
        return self._n

    @property
    def dead(self) -> int:
        return self._dead

    @property
    def fresh_rows(self) -> int:
        return self._fresh_rows

    @property
    def nbytes(self) -> int:
        posts = sum(d.nbytes + t.nbytes for d, t in self._post.values())
        return posts + 100 * len(self._post) + 13 * self._n + 64 * len(self._row)

    def holds(self, word: str) -> bool:
        """Whether any document held counts ``word`` (dropped ones until ``compact``)."""
        return word in self._post or word in self._fresh

    def row_of(self, key: int) -> int | None:
        """The row of a counted document."""
        return self._row.get(key)

    # -- changing -----------------------------------------------------------------------------
    def add(self, key: int, ws: Sequence[str]) -> int:
        """Count document ``key`` (not counted now) with words ``ws``; its row."""
        self._grow(1)
        r = self._n
        self._n += 1
        self._key[r] = key
        self._len[r] = len(ws)
        self._alive[r] = True
        self._row[key] = r
        self._total_len += len(ws)
        for w, c in Counter(ws).items():
            got = self._fresh.get(w)
            if got is None:
                got = self._fresh[w] = ([], [])
                if w not in self._post:
                    self._vocab_stale = True
            got[0].append(r)
            got[1].append(c)
        self._fresh_rows += 1
        return r

    def _grow(self, extra: int) -> None:
        need = self._n + extra
        if need <= len(self._key):
            return
        cap = max(need, 2 * len(self._key), 64)
        self._key = np.resize(self._key, cap)
        self._len = np.resize(self._len, cap)
        alive = np.zeros(cap, dtype=bool)
        alive[: self._n] = self._alive[: self._n]
        self._alive = alive

    def drop(self, key: int) -> int | None:
        """Stop counting ``key`` now; its row (None: not counted)."""
        r = self._row.pop(key, None)
        if r is None or not self._alive[r]:
            return None
        self._alive[r] = False
        self._total_len -= float(self._len[r])
        self._dead += 1
        return r

    def compact(self) -> np.ndarray | None:
        """Merge fresh rows into the arrays and drop dropped rows and every
        word only they held: renumbered rows, nothing of them kept. Returns
        which old rows were kept, in order, when rows were renumbered."""
        if not self._fresh and not self._dead:
            return None
        keep = self._alive[: self._n]
        new_index = np.cumsum(keep, dtype=np.int64) - 1
        post: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for w in self._post.keys() | self._fresh.keys():
            d, t = self._post.get(w, (None, None))
            f = self._fresh.get(w)
            if f is not None:
                fd = np.asarray(f[0], dtype=np.int32)
                ft = np.asarray(f[1], dtype=np.float32)
                d = fd if d is None else np.concatenate([d, fd])
                t = ft if t is None else np.concatenate([t, ft])
            assert d is not None and t is not None
            if self._dead:
                live = keep[d]
                d, t = new_index[d[live]].astype(np.int32), t[live]
            if len(d):
                post[w] = (d, t)
        self._post = post
        self._fresh = {}
        self._fresh_rows = 0
        self._vocab_stale = True
        if not self._dead:
            return None
        keep = keep.copy()
        n = int(keep.sum())
        self._key = self._key[: self._n][keep].copy()
        self._len = self._len[: self._n][keep].copy()
        self._alive = np.ones(n, dtype=bool)
        self._n = n
        self._dead = 0
        self._row = {int(s): i for i, s in enumerate(self._key)}
        return keep

    # -- search -------------------------------------------------------------------------------
    def best(
        self, phrases: Sequence[Phrase], limit: int, allowed: RowFilter | None = None
    ) -> list[tuple[int, float]]:
        """(key, raw score) of the ``limit`` best matches of ``phrases``
        among the rows ``allowed`` keeps (None: all), best first; the score is
        BM25 negated, as FTS5's ``bm25()`` (lower is better); equal scores by
        key. The statistics are every counted document's, allowed or not."""
        if not phrases or limit <= 0:
            return []
        n = self.rows
        if n == 0:
            return []
        size = self._n
        avg = self._total_len / n if n else 1.0
        norm = K1 * (1 - B) + (K1 * B / max(avg, 1e-9)) * self._len[:size].astype(np.float64)
        total = np.zeros(size, dtype=np.float64)
        hit = np.zeros(size, dtype=bool)
        for p in phrases:
            got = self._postings(p)
            if got is None:
                continue
            rows, tf = got
            if self._dead:
                live = self._alive[rows]
                rows, tf = rows[live], tf[live]
            df = len(rows)
            if not df:
                continue
            idf = max(math.log((n - df + 0.5) / (df + 0.5)), IDF_FLOOR)
            tf64 = tf.astype(np.float64)
            total[rows] += idf * (tf64 * (K1 + 1)) / (tf64 + norm[rows])
            hit[rows] = True
        found = np.flatnonzero(hit)
        if allowed is not None and len(found):
            found = found[allowed(found)]
        if not len(found):
            return []
        scores = total[found]
        if len(found) > limit:
            cut = np.argpartition(-scores, limit - 1)[:limit]
            # Rows tied with the limit's score are all kept, so the tie
            # order (by key) is the same as a full sort's.
            floor = scores[cut].min()
            cut = np.flatnonzero(scores >= floor)
            found, scores = found[cut], scores[cut]
        keys = self._key[found]
        order = np.lexsort((keys, -scores))[:limit]
        return [(int(keys[i]), -float(scores[i])) for i in order]

    def _postings(self, p: Phrase) -> tuple[np.ndarray, np.ndarray] | None:
        if not p.prefix:
            return self._word_postings(p.word)
        if self._vocab_stale:
            self._vocab = sorted(self._post.keys() | self._fresh.keys())
            self._vocab_stale = False
        lo = bisect.bisect_left(self._vocab, p.word)
        hi = bisect.bisect_left(self._vocab, p.word + "\U0010ffff")
        parts = [got for w in self._vocab[lo:hi] if (got := self._word_postings(w)) is not None]
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        # A row holding several of the words: their counts add up, as a
        # prefix query's instances do.
        rows = np.concatenate([r for r, _ in parts])
        tf = np.concatenate([t for _, t in parts])
        summed = np.bincount(rows, weights=tf, minlength=self._n)
        rows = np.flatnonzero(summed).astype(np.int32)
        return rows, summed[rows].astype(np.float32)

    def _word_postings(self, w: str) -> tuple[np.ndarray, np.ndarray] | None:
        base = self._post.get(w)
        fresh = self._fresh.get(w)
        if fresh is None:
            return base
        fd = np.asarray(fresh[0], dtype=np.int32)
        ft = np.asarray(fresh[1], dtype=np.float32)
        if base is None:
            return fd, ft
        return np.concatenate([base[0], fd]), np.concatenate([base[1], ft])
