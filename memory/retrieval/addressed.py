"""Names members are addressed by: a question may call a member by a name that
is not their display name ("Kate" for the member shown as "Emi").

People in a chat often call each other by a nickname or a real name the
guild never stores. A query naming such a member then matches every message
where someone *says* the name ("Hey Kate!", "What about you Kate?") instead of
the messages the member wrote, and the member's own turns get no speaker
part. The chat itself tells who the name belongs to: a name used to *address*
someone (a greeting, a comma or "you" before it: "Hey Kate", "thanks, Kate!",
"what about you Kate?") is answered by, or answers, the member it names.

The rule (pure here; ``AddressedNames`` reads the messages):

* Candidate words of a query: capitalised words of 3+ letters that are not
  stop words and name no member already (``candidate_words``).
* Each message that uses the word as an address (``addresses``) votes for the
  authors of its previous and next message in the channel other than its own
  writer (the person it talks to replies, or was just heard from).
* The word is that member's name when at least ``min_uses`` addresses vote
  and one member holds at least ``min_share`` of the votes (``resolve``).

A resolved word is then read as that member's name by the query plan: it
leaves the embedded content, and the member's own messages get the
``speaker`` part (visible in every hit's score parts), exactly as for a
display name.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from memory.retrieval.hits import seconds_between
from memory.retrieval.query import MemberNames, QueryPlan, find_names, fts_match_expression
from memory.retrieval.scoring import STOP_WORDS
from memory.store import messages as store_messages
from memory.store.db import Database
from memory.store.search import adjacent_seqs

_WORD = re.compile(r"[^\W\d_]+(?:['\u2019][sS])?", re.UNICODE)
_POSSESSIVE = re.compile(r"['\u2019][sS]$")
# Words said to someone right before their name.
_GREETINGS = (
    "hey|hi|hello|hiya|heya|yo|dear|thanks|thank you|thx|ty|congrats|congratulations|"
    "morning|good morning|good night|goodnight|night|bye|welcome|sorry|haha|lol|wow|aw|aww|oh"
)


@dataclass(frozen=True)
class AddressRule:
    """How sure the votes must be before a word counts as a member's name."""

    min_uses: int = 2  # addresses that voted
    min_share: float = 0.6  # of the votes for the leading member
    max_words: int = 3  # candidate words looked up per query
    max_messages: int = 100  # messages read per word
    drop_from_match: bool = True  # full-text search leaves resolved words out
    enabled: bool = True


DEFAULT_ADDRESS_RULE = AddressRule()


def candidate_words(query: str, names: MemberNames) -> list[str]:
    """Capitalised words of ``query`` (possessive dropped, 3+ letters, no stop
    word) that name no member, in order, without repeats."""
    named = [(m.start, m.end) for m in find_names(query, names)]
    out: dict[str, None] = {}
    for m in _WORD.finditer(query):
        if any(s <= m.start() < e for s, e in named):
            continue
        word = _POSSESSIVE.sub("", m.group(0))
        if len(word) < 3 or not word[0].isupper() or word.casefold() in STOP_WORDS:
            continue
        if word.isupper():
            continue  # an acronym ("NYU"), not a name
        out.setdefault(word, None)
    return list(out)


def _address_pattern(word: str) -> re.Pattern[str]:
    w = re.escape(word)
    return re.compile(
        rf"(?:^|[^\w'])(?:(?i:{_GREETINGS})|(?i:you))[\s,!.]+{w}(?![\w'])"  # "hey Kate", "you Kate"
        rf"|,\s*{w}\s*(?:[!?.,)]|$)"  # "thanks, Kate!"
        rf"|^\s*{w}\s*[,!?]",  # "Kate, did you ..."
    )


def addresses(text: str, word: str) -> bool:
    """Whether ``text`` uses ``word`` (case as written) to address someone."""
    if word not in text:
        return False
    return _address_pattern(word).search(text) is not None


@dataclass(frozen=True)
class Use:
    """One message that addresses someone by the word: its writer and the
    authors of its previous and next message in the channel."""

    writer: str
    around: tuple[str, ...]


def resolve(uses: Iterable[Use], rule: AddressRule = DEFAULT_ADDRESS_RULE) -> str | None:
    """The member the word names, or None when the votes are too few or split."""
    votes: Counter[str] = Counter()
    voters = 0
    for u in uses:
        others = {a for a in u.around if a and a != u.writer}
        if not others:
            continue
        voters += 1
        votes.update(others)
    if voters < rule.min_uses or not votes:
        return None
    (leader, n), *rest = votes.most_common(2)
    if rest and rest[0][1] == n:
        return None
    return leader if n / voters >= rule.min_share else None


def with_names(names: MemberNames, resolved: dict[str, str]) -> MemberNames:
    """``names`` plus each resolved word as the first word of its member's name."""
    if not resolved:
        return names
    first = dict(names.first)
    for word, user_id in resolved.items():
        key = word.casefold()
        first[key] = first.get(key, frozenset()) | {user_id}
    return MemberNames(names.full, first, names.ids)


def without_words(plan: QueryPlan, words: Iterable[str]) -> QueryPlan:
    """``plan`` whose full-text matches leave out ``words``: a name used to
    address a member matches the messages that say it to them ("Hey Kate!"),
    not what the member said."""
    drop = {w.casefold() for w in words}
    if not drop:
        return plan
    kept = " ".join(
        m.group(0)
        for m in _WORD.finditer(plan.text)
        if _POSSESSIVE.sub("", m.group(0)).casefold() not in drop
    )
    return dataclasses.replace(
        plan,
        fact_match=fts_match_expression(kept),
        message_match=fts_match_expression(kept, prefixes=True),
    )


def read_uses(con: Any, guild_id: str, word: str, limit: int, gap_s: float) -> list[Use]:
    """The guild's messages that address someone by ``word`` (the best
    ``limit`` FTS matches of it) with the authors around each."""
    match = fts_match_expression(word)
    if not match:
        return []
    found = [
        (seq, m)
        for seq, m, _ in store_messages.search_messages_fts(con, guild_id, match, limit)
        if addresses(m.content, word)
    ]
    if not found:
        return []
    adjacent = adjacent_seqs(con, guild_id, found)
    near = {n for pair in adjacent.values() for n in pair if n is not None}
    others = store_messages.messages_by_seq(con, guild_id, sorted(near))
    uses: list[Use] = []
    for seq, m in found:
        around: list[str] = []
        for nseq in adjacent.get(seq, (None, None)):
            n = others.get(nseq) if nseq is not None else None
            if n is not None and abs(seconds_between(m.created_at, n.created_at)) <= gap_s:
                around.append(n.author_id)
        uses.append(Use(m.author_id, tuple(around)))
    return uses


class AddressedNames:
    """Resolves a query's candidate words against a guild's messages, with a
    cache per (guild, word) kept ``ttl_s`` seconds."""

    def __init__(
        self,
        db: Database,
        ttl_s: float,
        gap_s: float,
        rule: AddressRule = DEFAULT_ADDRESS_RULE,
        max_cached: int = 4096,
    ) -> None:
        self.db = db
        self.ttl_s = ttl_s
        self.gap_s = gap_s
        self.rule = rule
        self.max_cached = max_cached
        self._cache: dict[tuple[str, str], tuple[float, str | None]] = {}

    async def resolve_words(self, guild_id: str, query: str, names: MemberNames) -> dict[str, str]:
        """The query's words that name a member by address → that member's id."""
        if not self.rule.enabled or not guild_id or not names.ids:
            return {}
        words = candidate_words(query, names)[: self.rule.max_words]
        if not words:
            return {}
        now = time.monotonic()
        resolved: dict[str, str] = {}
        todo: list[str] = []
        for w in words:
            cached = self._cache.get((guild_id, w))
            if cached is not None and now - cached[0] < self.ttl_s:
                if cached[1] is not None:
                    resolved[w] = cached[1]
            else:
                todo.append(w)
        if todo:
            found = await self.db.read(self._read, guild_id, todo)
            if len(self._cache) + len(found) > self.max_cached:
                self._cache.clear()
            for w, uid in found.items():
                self._cache[(guild_id, w)] = (now, uid)
                if uid is not None:
                    resolved[w] = uid
        # Only members of the guild: a vote may name an author who left.
        return {w: u for w, u in resolved.items() if u in names.ids}

    def _read(self, con: Any, guild_id: str, words: Sequence[str]) -> dict[str, str | None]:
        return {
            w: resolve(read_uses(con, guild_id, w, self.rule.max_messages, self.gap_s), self.rule)
            for w in words
        }
