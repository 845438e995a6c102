"""``Memory.corrections``: a member's changes to what memory keeps —
``/memory correct`` and ``forget-fact``, the why card's **This is wrong** and
**Forget this** — and a moderator's on any fact.

A member changes only a visible fact about themself; anything else is
refused with the reason that is true for them (``memory.roles.members``:
``FactMissing`` — no such fact, or one of theirs already forgotten, with
when; ``FactHidden`` — theirs, from a channel they cannot read; ``NotYours``).

A correction is written like any fact: the member's words go through the
extractor that reads their messages (third person, "I live in Leiden now" →
"Alice lives in Leiden."), the new fact supersedes the old one, and its
evidence is the correction itself — never the old quote. A member's
correction of a fact about someone else (or of lore) is written as they typed
it and counts against their daily cap (``memory.ingest.write_caps``); a
moderator's is not capped. Forgetting a fact leaves a deletion receipt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory.clock import Clock, iso
from memory.config import IngestConfig
from memory.db.core import Connection, Database
from memory.decision import Decision, slot_of
from memory.embed.service import EmbeddingService
from memory.errors import ExtractionError, InvalidInput
from memory.extract.base import EVIDENCE_MAX, ExtractionItem, Extractor
from memory.extract.guards import (
    clean_message,
    filter_candidates,
    normalise_fact,
    operator_text_refusal,
)
from memory.guild_settings import GuildSettingsCache
from memory.ingest import write_caps
from memory.ingest.write_caps import CapReached
from memory.models import LORE_SUBJECT, Candidate, Fact
from memory.roles.facts import FactOps
from memory.roles.members import FactHidden, FactMissing, NotYours, visible
from memory.roles.receipts import Receipts
from memory.snapshot import SnapshotRefresher
from memory.store import facts as store_facts
from memory.store import members as store_members
from memory.store.consent import member_name
from memory.store.erase import ErasureCompactor
from memory.store.fact_decision import NewFact, apply_decision
from memory.store.receipts import Receipt

# A member's own correction is believed more than an extracted fact.
CORRECTION_CONFIDENCE = 0.9
_FIRST_PERSON = re.compile(r"\b(i|i'm|im|i've|ive|i'd|me|my|mine|myself)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Forgotten:
    """A fact erased at a member's or a moderator's request, and its receipt."""

    fact: Fact
    receipt: Receipt


class Corrections:
    def __init__(
        self,
        db: Database,
        facts: FactOps,
        compactor: ErasureCompactor,
        clock: Clock,
        *,
        receipts: Receipts,
        embeddings: EmbeddingService,
        snapshot: SnapshotRefresher,
        settings: GuildSettingsCache,
        extractor: Extractor | None,
        cfg: IngestConfig,
    ) -> None:
        self._db = db
        self._facts = facts
        self._compactor = compactor
        self._clock = clock
        self._receipts = receipts
        self._embeddings = embeddings
        self._snapshot = snapshot
        self._settings = settings
        self._extractor = extractor
        self._cfg = cfg

    async def correct(
        self,
        guild_id: str,
        user_id: str,
        fact_id: int,
        text: str,
        visible_channels: set[str] | None,
        *,
        name: str | None = None,
    ) -> Fact:
        """The member corrects a fact about themself: ``text`` is rewritten
        like a message of theirs (``name``: how facts name them; None: their
        stored name) and the new fact supersedes the old one, its evidence the
        correction (history actor ``user:<id>``). ``InvalidInput`` (or one of
        its kinds above) when refused."""
        old = await self._mine(guild_id, user_id, fact_id, visible_channels)
        if name is None:
            name = await self._db.read(member_name, guild_id, user_id) or "The author"
        fact_text, fact_type = await self._rewrite(text, name, old)
        return await self._supersede(
            guild_id, old, fact_text, fact_type, text, actor=f"user:{user_id}", cap=None
        )

    async def correct_other(
        self,
        guild_id: str,
        actor_id: str,
        fact_id: int,
        text: str,
        visible_channels: set[str] | None,
        *,
        moderator: bool,
    ) -> Fact:
        """A correction of a fact about someone else (or of lore), written as
        given: a member's counts against their daily cap (``CapReached``
        beyond it, the correction held back for moderators); a moderator's
        (``moderator``) is not capped and is the operator's."""
        old = await self._facts.get(guild_id, fact_id)
        if old is None:
            raise await self._missing(guild_id, actor_id, fact_id)
        if not visible(old, visible_channels):
            raise FactMissing(fact_id)  # not a fact this member may know of
        fact_text = normalise_fact(" ".join(text.split()))
        if fact_text is None:
            raise InvalidInput("write the corrected fact in 4 to 190 characters")
        refusal = operator_text_refusal(fact_text)
        if refusal is not None:
            raise InvalidInput(refusal)
        cap: write_caps.CapKind | None = None
        if not moderator:
            cap = "lore" if old.subject == LORE_SUBJECT else "other_member"
        actor = f"operator:{actor_id}" if moderator else f"user:{actor_id}"
        return await self._supersede(guild_id, old, fact_text, old.fact_type, text, actor, cap)

    async def _rewrite(self, text: str, name: str, old: Fact) -> tuple[str, str]:
        """The fact a correction states, in the third person, and its type."""
        cleaned = clean_message(text, self._cfg.clean_max_chars)
        if cleaned is None or len(cleaned) < 4:
            raise InvalidInput("say in a few words what is true instead")
        found: list[Candidate] = []
        if self._extractor is not None:
            try:
                results = await self._extractor.extract_batch(
                    [ExtractionItem(text=cleaned, author=name)], self._cfg.max_facts_per_message
                )
            except ExtractionError as exc:
                raise InvalidInput("I couldn't read that just now; please try again") from exc
            cands = list(results[0]) if results else []
            found = filter_candidates(cands, cleaned, author=name).accepted
        if found:
            # The candidate on the corrected fact's own slot (where they live,
            # their job …), else the extractor's first.
            old_slot = slot_of(old.fact)
            same = [
                c
                for c in found
                if old_slot is not None
                and (s := slot_of(c.fact)) is not None
                and s.kind == old_slot.kind
            ]
            best = (same or found)[0]
            return best.fact, best.type
        if _FIRST_PERSON.search(cleaned):
            raise InvalidInput(
                "I couldn't read a fact in that. Write it as you would say it in chat, "
                "for example “I live in Leiden now.”"
            )
        # Already written about them (“Alice lives in Leiden.”): taken as is,
        # with the checks any fact text passes.
        fact_text = normalise_fact(cleaned)
        if fact_text is None:
            raise InvalidInput("write the corrected fact in 4 to 190 characters")
        refusal = operator_text_refusal(fact_text)
        if refusal is not None:
            raise InvalidInput(refusal)
        return fact_text, old.fact_type

    async def _supersede(
        self,
        guild_id: str,
        old: Fact,
        fact_text: str,
        fact_type: str,
        said: str,
        actor: str,
        cap: write_caps.CapKind | None,
    ) -> Fact:
        if fact_text == old.fact and old.valid_to is None:
            raise InvalidInput("that is already what I remember")
        limit = 0
        if cap is not None:
            limit = write_caps.limit_of(await self._settings.get(guild_id), cap)
        now = iso(self._clock())
        evidence = " ".join(said.split())[:EVIDENCE_MAX]
        new = NewFact(
            guild_id,
            old.channel_id,  # seen where the corrected fact was: no wider
            old.subject,
            fact_text,
            fact_type,
            evidence,
            None,  # no message: the correction is its own source
            CORRECTION_CONFIDENCE,
            now,
        )
        author = actor.split(":", 1)[1] if ":" in actor else actor

        def work(con: Connection) -> Fact | None:
            current = store_facts.get_fact(con, guild_id, old.id)
            if current is None:
                raise FactMissing(old.id)
            if cap is not None and not write_caps.take(
                con,
                guild_id=guild_id,
                author_id=author,
                kind=cap,
                limit=limit,
                text=fact_text,
                now=now,
                detail={"fact_id": old.id, "subject": old.subject, "correction": True},
            ):
                return None
            decision = Decision("supersede", (old.id,), "corrected")
            return apply_decision(con, new, decision, now=now, actor=actor).fact

        fact: Fact | None = await self._db.write(work)
        if fact is None:
            assert cap is not None
            raise CapReached(cap, limit)
        self._embeddings.schedule_facts([fact])
        self._snapshot.request()
        return fact

    # -- forgetting one fact -----------------------------------------------------------------
    async def forget_fact(
        self, guild_id: str, user_id: str, fact_id: int, visible_channels: set[str] | None
    ) -> Forgotten:
        """Delete one fact about the member (history ``delete`` by
        ``user:<id>``, no content kept) and give a receipt; its bytes go with
        the next rewrite of the database file."""
        fact = await self._mine(guild_id, user_id, fact_id, visible_channels)
        return await self._erase(guild_id, fact, f"user:{user_id}", user_id)

    async def forget_any(self, guild_id: str, moderator_id: str, fact_id: int) -> Forgotten:
        """A moderator deletes any fact of the guild (actor ``operator:<id>``)."""
        fact = await self._facts.get(guild_id, fact_id)
        if fact is None:
            raise await self._missing(guild_id, moderator_id, fact_id)
        return await self._erase(guild_id, fact, f"operator:{moderator_id}", moderator_id)

    async def _erase(self, guild_id: str, fact: Fact, actor: str, asker: str) -> Forgotten:
        now = iso(self._clock())

        def work(con: Connection) -> Receipt | None:
            vectors = con.execute(
                "SELECT count(*) FROM memory_fact_vectors WHERE fact_id = ?", (fact.id,)
            ).fetchone()[0]
            traces = con.execute(
                "SELECT count(*) FROM memory_traces WHERE guild_id = ? AND fact_id = ?",
                (guild_id, fact.id),
            ).fetchone()[0]
            if not store_facts.delete_fact(con, guild_id, fact.id, actor, now):
                return None
            return Receipts.add(
                con,
                guild_id=guild_id,
                user_id=fact.subject,
                scope=f"fact:{fact.id}",
                actor=actor,
                counts={"facts": 1, "vectors": int(vectors), "traces": int(traces)},
                now=now,
            )

        receipt: Receipt | None = await self._db.write(work)
        if receipt is None:  # erased meanwhile
            raise await self._missing(guild_id, asker, fact.id)
        self._snapshot.request()
        self._compactor.request()
        return Forgotten(fact, receipt)

    # -- whose fact ----------------------------------------------------------------------
    async def _mine(
        self, guild_id: str, user_id: str, fact_id: int, visible_channels: set[str] | None
    ) -> Fact:
        fact = await self._facts.get(guild_id, fact_id)
        if fact is None:
            raise await self._missing(guild_id, user_id, fact_id)
        if fact.subject != user_id:
            if not visible(fact, visible_channels):
                raise FactMissing(fact_id)  # someone else's, hidden: not theirs to know of
            raise NotYours("you can only change facts about yourself")
        if not visible(fact, visible_channels):
            raise FactHidden("that fact comes from a channel you can't read")
        return fact

    async def _missing(self, guild_id: str, user_id: str, fact_id: int) -> FactMissing:
        erased = await self._db.read(store_members.erased_fact, guild_id, fact_id)
        if erased is not None and erased[0] == user_id:
            return FactMissing(fact_id, erased[1])
        return FactMissing(fact_id)
