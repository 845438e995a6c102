"""An in-memory BM25 index of one guild's messages: the message search's
lexical side, at numpy speed.

In a guild of long messages a question's common words match a large share of
them, and FTS5 computes ``bm25()`` match by match, reading each match's
position lists and its stored length: most of a message search's time at
100k messages (``bench/search.py``). Here each word of the guild has its
posting arrays (message rows, times said), so a query's BM25 over every
match is a few vector operations per word.

Scoring is FTS5's BM25 (k1 1.2, b 0.75, each word's IDF
``log((N - n + 0.5) / (n + 0.5))``, floored at 1e-6; lengths in words), over
the **guild's own** messages: a word's rarity is measured in the community
that wrote it, and another guild's talk neither shapes this guild's ranking
nor shows through it. Words are those of ``fts_index_text`` (spaceless
scripts as character bigrams), case-folded, without diacritics, split where a
character is neither letter nor digit. A query is the store's FTS5 MATCH
expression (``memory.retrieval.query.fts_match_expression``): quoted phrases,
each optionally a prefix, joined by OR. A phrase that holds several words
counts as those words.

Coherence. The index is built from a snapshot of the guild's messages; every
search first reads the guild's messages stored since (seq above the highest
it holds: one writer assigns seqs in commit order on SQLite; on PostgreSQL,
where concurrent transactions may commit out of order, the last
``RESCAN_S`` seconds' seqs are read again). A message deleted, erased, purged,
expired or edited leaves the vector index through
``delete_message_vectors_index``, whose change event reaches ``apply``: its
row stops counting at once (statistics too) and is re-read at the next search,
so an edited text comes back as it now reads (and a deleted newest seq,
which SQLite hands out again, once it is used anew). The rows of removed
messages, and every word only they held, leave memory at the next search
(``GuildLexicon.refresh`` compacts the arrays). Another connection's commits are handled as the vector
matrices handle an unknown change (``ExternalCommit`` naming no guild): a
lexicon older than ``external_reload_s`` is rebuilt. A commit that names its
guilds only put vectors there; the next refresh reads its new messages.

Thread safety: a lexicon is read and refreshed on database reader threads
and told of removals on the committing thread; one lock per lexicon.
"""

from __future__ import annotations

import bisect
import logging
import math
import re
import threading
import time
import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memory.retrieval.held_voice import HeldVoice
from memory.store import message_texts
from memory.store.changes import Change, ExternalCommit, VectorsRemoved
from memory.store.sql import dialect_of
from memory.text import fts_index_text

log = logging.getLogger(__name__)

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6  # FTS5's: a word in more than half the rows still counts a little
# On PostgreSQL a transaction that took a lower seq may commit after a higher
# one was read: the seqs of this many seconds are read again.
RESCAN_S = 10.0

_WORD = re.compile(r"[^\W_]+")
_PHRASE = re.compile(r'"((?:[^"]|"")*)"(\*?)')


def words(text: str | None) -> list[str]:
    """The words the lexicon indexes and matches in ``text``."""
    value = fts_index_text(text) or ""
    value = value.casefold()
    if not value.isascii():
        value = "".join(
            ch for ch in unicodedata.normalize("NFKD", value) if not unicodedata.combining(ch)
        )
    return _WORD.findall(value)


@dataclass(frozen=True)
class Phrase:
    word: str
    prefix: bool


def parse_match(match: str) -> list[Phrase]:
    """The words of an FTS5 MATCH expression of the store's form."""
    out: list[Phrase] = []
    for text, star in _PHRASE.findall(match or ""):
        ws = words(text.replace('""', '"'))
        for i, w in enumerate(ws):
            out.append(Phrase(w, bool(star) and i == len(ws) - 1))
    return out


@dataclass(frozen=True)
class LexiconConfig:
    enabled: bool = True
    max_rows: int = 400_000  # a bigger guild stays on FTS5
    max_bytes: int = 512 * 1024 * 1024  # all lexicons together; least recently used go first
    # Guilds up to this many messages are built before their first search
    # returns (a few hundred ms at most); bigger ones in the background.
    build_inline_max: int = 20_000
    external_reload_s: float = 60.0


class GuildLexicon:
    """The posting arrays of one guild's messages (see the module doc)."""

    def __init__(self, guild_id: str, epoch: int = 0) -> None:
        self.guild_id = guild_id
        self.lock = threading.Lock()
        self.ready = False
        self.epoch = epoch
        self.started_at = time.monotonic()
        self._seq = np.zeros(0, dtype=np.int64)
        self._len = np.zeros(0, dtype=np.float32)
        self._alive = np.zeros(0, dtype=bool)
        self._row: dict[int, int] = {}
        self._voice = HeldVoice()
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
        self._watermark = 0
        self._marks: list[tuple[float, int]] = []  # (when, watermark), PostgreSQL's rescan
        self._recheck: set[int] = set()
        self._pending_removed: list[int] = []

    # -- size ---------------------------------------------------------------------------------
    @property
    def rows(self) -> int:
        return self._n - self._dead

    @property
    def nbytes(self) -> int:
        posts = sum(d.nbytes + t.nbytes for d, t in self._post.values())
        held = 13 * self._n + 64 * len(self._row) + self._voice.nbytes
        return posts + 100 * len(self._post) + held

    def holds(self, word: str) -> bool:
        """Whether any row held counts ``word`` (after the last refresh)."""
        with self.lock:
            return word in self._post or word in self._fresh

    # -- building -----------------------------------------------------------------------------
    def fill(self, rows: Sequence[tuple[int, str | None]]) -> None:
        """Install a snapshot of the guild's messages (seq, text), then apply
        the removals that arrived while it was read."""
        with self.lock:
            self._add_locked(rows)
            self._compact_locked()
            removed, self._pending_removed = self._pending_removed, []
            self._remove_locked(removed)
            self.ready = True

    def _grow(self, extra: int) -> None:
        need = self._n + extra
        if need <= len(self._seq):
            return
        cap = max(need, 2 * len(self._seq), 64)
        self._seq = np.resize(self._seq, cap)
        self._len = np.resize(self._len, cap)
        alive = np.zeros(cap, dtype=bool)
        alive[: self._n] = self._alive[: self._n]
        self._alive = alive
        self._voice.grow(cap)

    def _add_locked(self, rows: Sequence[tuple[int, str | None]]) -> None:
        self._grow(len(rows))
        for seq, text in rows:
            seq = int(seq)
            self._watermark = max(self._watermark, seq)
            if seq in self._row:
                continue  # already held (a rescan)
            ws = words(text)
            r = self._n
            self._n += 1
            self._seq[r] = seq
            self._len[r] = len(ws)
            self._alive[r] = True
            self._voice.read(r, text or "")
            self._row[seq] = r
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

    def _remove_locked(self, seqs: Iterable[int]) -> None:
        """Stop counting ``seqs`` now; the next refresh reads them again (an
        edit comes back as it now reads) and drops them once more first (a
        refresh that read a row just before its delete committed put it back)."""
        for seq in seqs:
            self._drop_locked(int(seq))
            self._recheck.add(int(seq))

    def _drop_locked(self, seq: int) -> None:
        r = self._row.pop(seq, None)
        if r is None or not self._alive[r]:
            return
        self._alive[r] = False
        self._total_len -= float(self._len[r])
        self._dead += 1

    def _compact_locked(self) -> None:
        """Merge fresh rows into the arrays and drop removed rows and every
        word only they held: renumbered rows, nothing of them kept."""
        if not self._fresh and not self._dead:
            return
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
        if self._dead:
            n = int(keep.sum())
            self._seq = self._seq[: self._n][keep].copy()
            self._len = self._len[: self._n][keep].copy()
            self._alive = np.ones(n, dtype=bool)
            self._voice.keep(np.flatnonzero(keep))
            self._n = n
            self._dead = 0
            self._row = {int(s): i for i, s in enumerate(self._seq)}
        self._vocab_stale = True

    # -- following the database -------------------------------------------------------------
    def removed(self, seqs: Sequence[int]) -> None:
        """Messages gone from the guild (or about to be re-read: an edit)."""
        with self.lock:
            if not self.ready:
                self._pending_removed.extend(int(s) for s in seqs)
                return
            self._remove_locked(seqs)

    def refresh(self, con: Any) -> None:
        """Read what the guild stored since the last refresh (run on a reader thread)."""
        with self.lock:
            low = self._watermark
            if dialect_of(con) == "postgresql":
                now = time.monotonic()
                self._marks = [(t, w) for t, w in self._marks if now - t < RESCAN_S]
                low = self._marks[0][1] if self._marks else low
                self._marks.append((now, self._watermark))
            pending = self._recheck
        recheck: list[int] = []
        if pending:
            # SQLite gives a new row the highest seq in the table plus one:
            # once the newest messages are deleted their seqs come back. A
            # removed seq above the table's highest is read again only once
            # it is used anew.
            top = message_texts.highest_seq(con)
            with self.lock:
                recheck = sorted(s for s in self._recheck if s <= top)
                self._recheck = {s for s in self._recheck if s > top}
        fresh = message_texts.texts_after(con, self.guild_id, low)
        back = message_texts.texts_by_seq(con, self.guild_id, recheck) if recheck else []
        with self.lock:
            for seq in recheck:
                self._drop_locked(seq)
            if fresh or back:
                self._add_locked([*fresh, *back])
            if self._dead or self._fresh_rows > max(1000, self._n // 20):
                self._compact_locked()

    # -- search -------------------------------------------------------------------------------
    def voices(self, texts: Iterable[tuple[int, str]]) -> dict[int, tuple[float, float]]:
        """(statement share, first-person share) of each (seq, text) held as
        that text (``memory.retrieval.held_voice``); others are left out."""
        with self.lock:
            held = [(seq, r, text) for seq, text in texts if (r := self._row.get(seq)) is not None]
            got = self._voice.of([r for _, r, _ in held], [t for _, _, t in held])
        return {seq: v for (seq, _, _), v in zip(held, got, strict=True) if v is not None}

    def best(self, match: str, limit: int) -> list[tuple[int, float]]:
        """(seq, raw score) of the ``limit`` best matches of ``match``, best
        first; the score is BM25 negated, as FTS5's ``bm25()`` (lower is
        better); equal scores by seq."""
        phrases = parse_match(match)
        if not phrases or limit <= 0:
            return []
        with self.lock:
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
            if not len(found):
                return []
            scores = total[found]
            if len(found) > limit:
                cut = np.argpartition(-scores, limit - 1)[:limit]
                # Rows tied with the limit's score are all kept, so the
                # tie order (by seq) is the same as a full sort's.
                floor = scores[cut].min()
                cut = np.flatnonzero(scores >= floor)
                found, scores = found[cut], scores[cut]
            seqs = self._seq[found]
        order = np.lexsort((seqs, -scores))[:limit]
        return [(int(seqs[i]), -float(scores[i])) for i in order]

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


class LexiconIndex:
    """Every guild's lexicon of one database, kept coherent by its change
    events (``apply``)."""

    def __init__(self, cfg: LexiconConfig | None = None) -> None:
        self.cfg = cfg or LexiconConfig()
        self._lock = threading.Lock()
        self._lex: OrderedDict[str, GuildLexicon] = OrderedDict()
        self._too_big: set[str] = set()
        self._external = 0
        self.builds = 0

    def clear(self) -> None:
        with self._lock:
            self._lex.clear()
            self._too_big.clear()

    def get(self, guild_id: str) -> GuildLexicon | None:
        """The guild's ready lexicon, or None (not built, building, too big)."""
        with self._lock:
            lex = self._lex.get(guild_id)
            if lex is not None:
                self._lex.move_to_end(guild_id)
            external = self._external
        if lex is None or not lex.ready:
            return None
        if (
            lex.epoch != external
            and time.monotonic() - lex.started_at >= self.cfg.external_reload_s
        ):
            with self._lock:
                if self._lex.get(guild_id) is lex:
                    del self._lex[guild_id]
            return None
        return lex

    def needs_build(self, guild_id: str) -> bool:
        if not self.cfg.enabled:
            return False
        with self._lock:
            return guild_id not in self._lex and guild_id not in self._too_big

    def register(self, guild_id: str) -> GuildLexicon | None:
        """A new, empty lexicon that starts queueing removals now, before its
        snapshot is read; None when one exists."""
        with self._lock:
            if guild_id in self._lex or guild_id in self._too_big:
                return None
            lex = GuildLexicon(guild_id, epoch=self._external)
            self._lex[guild_id] = lex
            return lex

    def too_big(self, guild_id: str, rows: int) -> bool:
        if rows <= self.cfg.max_rows:
            return False
        with self._lock:
            self._lex.pop(guild_id, None)
            self._too_big.add(guild_id)
        log.info("lexicon: guild %s has %d messages; using FTS5", guild_id, rows)
        return True

    def drop(self, guild_id: str, lex: GuildLexicon) -> None:
        with self._lock:
            if self._lex.get(guild_id) is lex:
                del self._lex[guild_id]

    def built(self) -> None:
        self.builds += 1
        with self._lock:
            total = sum(lx.nbytes for lx in self._lex.values())
            while total > self.cfg.max_bytes and len(self._lex) > 1:
                _, old = self._lex.popitem(last=False)
                total -= old.nbytes

    def stats(self) -> dict[str, Any]:
        with self._lock:
            lexes = list(self._lex.values())
        return {
            "lexicons": len(lexes),
            "rows": sum(lx.rows for lx in lexes),
            "bytes": sum(lx.nbytes for lx in lexes),
            "builds": self.builds,
        }

    def apply(self, changes: Sequence[Change]) -> None:
        """Follow one committed transaction's changes (a database subscriber)."""
        for change in changes:
            if isinstance(change, VectorsRemoved) and change.kind == "messages":
                with self._lock:
                    lexes = list(self._lex.values())
                for lex in lexes:
                    lex.removed(change.ids)
            elif isinstance(change, ExternalCommit) and change.vector_guilds is None:
                # Another connection may have deleted or edited messages. One
                # that names its guilds only put vectors: its new messages are
                # read by the next refresh, nothing to rebuild.
                with self._lock:
                    self._external += 1
