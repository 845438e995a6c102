"""Names members are addressed by: a question may call a member by a name that
is not their display name ("Kate" for the member shown as "Emi").

People in a chat often call each other by a nickname or a real name the
guild never stores. A query naming such a member then matches every message
where someone *says* the name ("Hey Kate!", "What about you Kate?") instead of
the messages the member wrote, and the member's own turns get no speaker
part. The chat itself tells who the name belongs to: a name used to *address*
someone (a greeting, a comma or "you" before it: "Hey Kate", "thanks, Kate!",
"what about you Kate?") is answered by, or answers, the member it names.
Only the start and the end of a message count (where a chat message greets or
turns to someone) and quoted text does not (a drafted letter: "start with
\"Hey Alex,\"").

The rule (pure here; ``AddressedNames`` reads the messages):

* Candidate words of a query: capitalised words of 3+ letters that are not
  stop words and name no member already (``candidate_words``).
* Each message that uses the word as an address (``addresses``) votes for the
  authors of its previous and next message in the channel other than its own
  writer (the person it talks to replies, or was just heard from).
* The word is that member's name when at least ``min_uses`` addresses vote,
  one member holds at least ``min_share`` of the votes, and that member wrote
  at most ``max_self_share`` of the messages with the word: people talk about
  a third person by name ("my partner Alex"), they rarely name themselves
  (``resolve``).

Only channels the asker can see are read (a name must not reveal what a
hidden channel says), and a word's answer is cached for the member-name
lifetime.

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

from memory.db.core import Connection, Database
from memory.retrieval.hits import seconds_between
from memory.retrieval.lexical import STOP_WORDS
from memory.retrieval.query import MemberNames, QueryPlan, find_names, fts_match_expression
from memory.store import message_fts
from memory.store import messages as store_messages
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

    min_uses: int = 3  # addresses that voted
    min_share: float = 0.6  # of the votes for the leading member
    max_self_share: float = 0.1  # of the messages with the word, written by that member
    # Most capitalised words of a query are no one's name ("Python", "Paris"),
    # and looking one up reads its full-text matches: that answer is kept longer.
    unresolved_ttl_s: float = 600.0
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
        rf"(?:^|[^\w'])(?i:{_GREETINGS})[\s,!.]+{w}(?![\w'])"  # "hey Kate", "thanks Kate"
        rf"|(?:^|[^\w'])(?i:you)\s+{w}\s*(?:[!?.]|$)"  # "what about you Kate?"
        rf"|,\s*{w}\s*(?:[!?.)]|$)"  # "that's great, Kate!" (not "my cousin, Kate, and")
        rf"|^\s*{w}\s*(?:[!?]|,\s+[a-z])",  # "Kate, did you ..."
        re.MULTILINE,
    )


# Quoted text is someone else's words ("start with \"Hey Alex,\"").
_QUOTED = re.compile(r"\"[^\"]*\"|\u201c[^\u201d]*\u201d")


def addresses(text: str, word: str, edge: int = 120) -> bool:
    """Whether ``text`` uses ``word`` (case as written) to address someone: at
    its start or its end (where a message greets or turns to someone), outside
    quotes."""
    if word not in text:
        return False
    bare = _QUOTED.sub(" ", text)
    edges = bare if len(bare) <= 2 * edge else f"{bare[:edge]}\n{bare[-edge:]}"
    return _address_pattern(word).search(edges) is not None


def mentions(text: str, word: str) -> bool:
    """Whether ``text`` has ``word`` as written, as a whole word."""
    return word in text and re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", text) is not None


@dataclass(frozen=True)
class Use:
    """One message that has the word: its writer, the authors of its previous
    and next message in the channel, and whether it addresses someone by it."""

    writer: str
    around: tuple[str, ...]
    addressed: bool = True


def resolve(uses: Iterable[Use], rule: AddressRule = DEFAULT_ADDRESS_RULE) -> str | None:
    """The member the word names, or None when the votes are too few or split,
    or when that member writes the word themselves (people talk *about* a
    third person by name; they rarely name themselves)."""
    votes: Counter[str] = Counter()
    said: Counter[str] = Counter()
    voters = 0
    for u in uses:
        said[u.writer] += 1
        others = {a for a in u.around if a and a != u.writer}
        if not u.addressed or not others:
            continue
        voters += 1
        votes.update(others)
    if voters < rule.min_uses or not votes:
        return None
    (leader, n), *rest = votes.most_common(2)
    if rest and rest[0][1] == n:
        return None
    if said[leader] > rule.max_self_share * sum(said.values()):
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


def read_uses(
    con: Connection,
    guild_id: str,
    word: str,
    limit: int,
    gap_s: float,
    visible: frozenset[str] | None = None,
    as_of: str | None = None,
) -> list[Use]:
    """The guild's messages that have ``word`` as written (among the best
    ``limit`` FTS matches of it) in the ``visible`` channels (None: all),
    written by ``as_of`` (None: any time); for those that address someone by
    it, the authors around each (its channel's neighbours, so visible too)."""
    match = fts_match_expression(word)
    if not match:
        return []
    found = [
        (seq, m, addresses(m.content, word))
        for seq, m, _ in message_fts.search_messages_fts(con, guild_id, match, limit)
        if (visible is None or m.channel_id in visible)
        and (as_of is None or seconds_between(m.created_at, as_of) >= 0)
        and mentions(m.content, word)
    ]
    calls = [(seq, m) for seq, m, addressed in found if addressed]
    if not calls:
        return []
    adjacent = adjacent_seqs(con, guild_id, calls)
    near = {n for pair in adjacent.values() for n in pair if n is not None}
    others = store_messages.messages_by_seq(con, guild_id, sorted(near))
    uses: list[Use] = []
    for seq, m, addressed in found:
        around: list[str] = []
        for nseq in adjacent.get(seq, (None, None)) if addressed else ():
            n = others.get(nseq) if nseq is not None else None
            if n is not None and abs(seconds_between(m.created_at, n.created_at)) <= gap_s:
                around.append(n.author_id)
        uses.append(Use(m.author_id, tuple(around), addressed))
    return uses


# (guild, word, visible channels or None, as of or None)
_Key = tuple[str, str, frozenset[str] | None, str | None]


class AddressedNames:
    """Resolves a query's candidate words against a guild's messages, with a
    cache per (guild, word, visible channels): a name kept ``ttl_s`` seconds
    (as long as member names), a word that names nobody ``unresolved_ttl_s``."""

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
        self._cache: dict[_Key, tuple[float, str | None]] = {}

    async def resolve_words(
        self,
        guild_id: str,
        query: str,
        names: MemberNames,
        visible: set[str] | None = None,
        as_of: str | None = None,
    ) -> dict[str, str]:
        """The query's words that name a member by address → that member's id,
        read from the ``visible`` channels (None: all) and from what was
        written by ``as_of`` (None: everything): a search of the past does not
        learn a name from later messages."""
        if not self.rule.enabled or not guild_id or not names.ids:
            return {}
        words = candidate_words(query, names)[: self.rule.max_words]
        if not words:
            return {}
        seen = None if visible is None else frozenset(visible)
        now = time.monotonic()
        resolved: dict[str, str] = {}
        todo: list[str] = []
        for w in words:
            cached = self._cache.get((guild_id, w, seen, as_of))
            ttl = self.rule.unresolved_ttl_s if cached and cached[1] is None else self.ttl_s
            if cached is not None and now - cached[0] < ttl:
                if cached[1] is not None:
                    resolved[w] = cached[1]
            else:
                todo.append(w)
        if todo:
            found = await self.db.read(self._read, guild_id, todo, seen, as_of)
            if len(self._cache) + len(found) > self.max_cached:
                self._cache.clear()
            for w, uid in found.items():
                self._cache[(guild_id, w, seen, as_of)] = (now, uid)
                if uid is not None:
                    resolved[w] = uid
        # Only members of the guild: a vote may name an author who left.
        return {w: u for w, u in resolved.items() if u in names.ids}

    def _read(
        self,
        con: Connection,
        guild_id: str,
        words: Sequence[str],
        visible: frozenset[str] | None,
        as_of: str | None,
    ) -> dict[str, str | None]:
        rule = self.rule
        return {
            w: resolve(
                read_uses(con, guild_id, w, rule.max_messages, self.gap_s, visible, as_of), rule
            )
            for w in words
        }
