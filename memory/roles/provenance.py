"""``Memory.provenance``: where a memory came from, for the people it is shown
to — the why card of a bot reply ("Why do you know this?"), of a member's
message ("What did you take from this?"), ``/memory why`` and a reply's
citation footer.

Each memory comes ``Explained``: its text, who it is about, the channel it
was learned in (the gate: a viewer who cannot read that channel must not see
it at all), its stored source messages (each with its own channel, author
and time, for jump links the adapter shows only where the viewer can read),
who wrote it first, and why it ranked in plain parts — the words of the
question it says (``matched``), whether it is canon, how confident. The
adapter turns those into sentences ("you said this in #general on 3 May",
"it matched 'Leiden'"); no score jargon leaves here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memory.db.core import Connection, Database
from memory.models import Fact, Trace
from memory.retrieval.lexical import STOP_WORDS, fold
from memory.store import held_messages as store_held
from memory.store import ops as store_ops
from memory.store import provenance as store
from memory.text import compact, tokens

MAX_MATCHED = 4
Action = Literal["used", "stored", "updated"]
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def matched_words(query: str | None, text: str, limit: int = MAX_MATCHED) -> list[str]:
    """The words of ``text`` (as written there) that ``query`` also says,
    stop words and words under three letters left out, first ``limit``."""
    if not query:
        return []
    wanted = {fold(t) for t in tokens(query) if t not in STOP_WORDS and len(t) >= 3}
    out: list[str] = []
    seen: set[str] = set()
    for word in _WORD.findall(text):
        key = fold(compact(word))
        if key in wanted and key not in seen:
            seen.add(key)
            out.append(word)
            if len(out) == limit:
                break
    return out


@dataclass(frozen=True)
class Source:
    """A stored message a memory came from."""

    message_id: str
    channel_id: str
    author_id: str
    created_at: str  # when it was written


@dataclass(frozen=True)
class Explained:
    """One memory a reply used or a message gave, with its provenance."""

    kind: Literal["fact", "message"]
    action: Action
    text: str
    subject: str  # member id, ``__lore__``, an episode's channel, or a message's author
    channel_id: str | None  # where it was learned (None: server-wide)
    fact_id: int | None = None
    fact_type: str | None = None
    sources: tuple[Source, ...] = ()
    # Who wrote it first: "extractor", "lore", "operator…", "user:<id>",
    # "discord:pin", … (None: a message, or unknown).
    origin: str | None = None
    matched: tuple[str, ...] = ()  # words of the question it says
    canon: bool = False
    confidence: float | None = None
    observed_at: str | None = None
    current: bool = True  # False: archived or no longer true


@dataclass(frozen=True)
class MessageProvenance:
    """What memory took from one message, and used for a reply to it."""

    message_id: str
    stored: bool  # memory holds the message itself
    author_id: str | None
    taken: tuple[Explained, ...]  # facts it is a source of
    used: tuple[Explained, ...] = ()  # memories a reply to it used
    pending: int = 0  # sensitive facts from it waiting for its author's answer
    held: bool = False  # its text is withheld while they wait


class Provenance:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def for_reply(self, guild_id: str, reply_id: str) -> list[Explained] | None:
        """The memories a bot reply (its message id, or the id of the message
        it answered) used and stored; None when memory knows no such reply."""
        traces = list(await self._db.read(store_ops.traces_for_message, guild_id, reply_id))
        if not traces:
            return None
        return await self._db.read(self._explain_traces, guild_id, traces)

    async def for_message(self, guild_id: str, message_id: str) -> MessageProvenance:
        """What memory took from a member's message, and used answering it."""

        def work(con: Connection) -> MessageProvenance:
            brief = store.message_brief(con, guild_id, [message_id]).get(message_id)
            facts = store.facts_from_message(con, guild_id, message_id)
            taken = self._explain_facts(con, guild_id, facts, "stored", {})
            traces = [
                t
                for t in store_ops.traces_for_message(con, guild_id, message_id)
                if t.message_id == message_id and t.action == "retrieved"
            ]
            used = self._explain_traces(con, guild_id, traces) if traces else []
            return MessageProvenance(
                message_id=message_id,
                stored=brief is not None,
                author_id=brief.author_id if brief is not None else None,
                taken=tuple(taken),
                used=tuple(used),
                pending=store.pending_from_message(con, guild_id, message_id),
                held=store_held.is_held(con, guild_id, message_id),
            )

        result: MessageProvenance = await self._db.read(work)
        return result

    async def explain_facts(
        self,
        guild_id: str,
        fact_ids: Sequence[int],
        matched: dict[int, Sequence[str]] | None = None,
    ) -> list[Explained]:
        """Facts by id (gone ones left out), as used memories."""

        def work(con: Connection) -> list[Explained]:
            facts = store.facts_by_id(con, guild_id, fact_ids)
            ordered = [facts[i] for i in dict.fromkeys(fact_ids) if i in facts]
            return self._explain_facts(con, guild_id, ordered, "used", matched or {})

        result: list[Explained] = await self._db.read(work)
        return result

    # -- in one read transaction -----------------------------------------------------------
    def _explain_traces(
        self, con: Connection, guild_id: str, traces: Sequence[Trace]
    ) -> list[Explained]:
        fact_rows: list[tuple[int, Action, tuple[str, ...]]] = []
        message_rows: list[tuple[str, Trace]] = []
        for t in traces:
            parts = t.score_parts or {}
            matched = tuple(str(w) for w in parts.get("matched") or () if isinstance(w, str))
            if t.fact_id is not None:
                action: Action = (
                    "used"
                    if t.action == "retrieved"
                    else ("stored" if t.action == "stored" else "updated")
                )
                fact_rows.append((int(t.fact_id), action, matched))
            elif isinstance(parts.get("ref"), str):
                message_rows.append((str(parts["ref"]), t))
        facts = store.facts_by_id(con, guild_id, [f for f, _, _ in fact_rows])
        out: list[Explained] = []
        seen: set[tuple[str, int]] = set()
        for fact_id, action, matched in fact_rows:
            fact = facts.get(fact_id)
            if fact is None or (action, fact_id) in seen:
                continue  # erased since the reply
            seen.add((action, fact_id))
            out.extend(self._explain_facts(con, guild_id, [fact], action, {fact_id: matched}))
        briefs = store.message_brief(con, guild_id, [m for m, _ in message_rows])
        for message_id, t in message_rows:
            brief = briefs.get(message_id)
            if brief is None:
                continue  # deleted or erased since
            parts = t.score_parts or {}
            out.append(
                Explained(
                    kind="message",
                    action="used",
                    text=t.content,
                    subject=brief.author_id,
                    channel_id=brief.channel_id,
                    sources=(
                        Source(
                            brief.message_id, brief.channel_id, brief.author_id, brief.created_at
                        ),
                    ),
                    matched=tuple(str(w) for w in parts.get("matched") or () if isinstance(w, str)),
                    observed_at=brief.created_at,
                )
            )
        return out

    @staticmethod
    def _explain_facts(
        con: Connection,
        guild_id: str,
        facts: Sequence[Fact],
        action: Action,
        matched: dict[int, Sequence[str]],
    ) -> list[Explained]:
        ids = [f.id for f in facts]
        sources = store.sources_of(con, guild_id, ids)
        origins = store.first_actors(con, guild_id, ids)
        return [
            Explained(
                kind="fact",
                action=action,
                text=f.fact,
                subject=f.subject,
                channel_id=f.channel_id,
                fact_id=f.id,
                fact_type=f.fact_type,
                sources=tuple(
                    Source(s.message_id, s.channel_id, s.author_id, s.created_at)
                    for s in sources.get(f.id, [])
                ),
                origin=origins.get(f.id),
                matched=tuple(matched.get(f.id, ())),
                canon=f.fact_type == "canon",
                confidence=f.confidence,
                observed_at=f.observed_at,
                current=f.is_active and f.valid_to is None,
            )
            for f in facts
        ]
