"""``Memory.facts``: reading and correcting stored facts (the dashboard's fact pages,
the ``/memory`` commands)."""

from __future__ import annotations

from memory.clock import Clock, iso
from memory.db.core import Connection, Database
from memory.embed.service import EmbeddingService
from memory.errors import InvalidInput
from memory.extract.guards import normalise_fact, normalise_type, operator_text_refusal
from memory.models import Fact, HistoryEntry
from memory.snapshot import SnapshotRefresher
from memory.store import facts as store
from memory.store.fact_decision import supersede_by_edit
from memory.store.fact_time import FactSource, fact_sources
from memory.store.relations import related_facts

LIST_LIMIT_MAX = 500


class FactOps:
    """Facts of one guild at a time; every change re-embeds and refreshes the snapshot."""

    def __init__(
        self, db: Database, embeddings: EmbeddingService, snapshot: SnapshotRefresher, clock: Clock
    ) -> None:
        self._db = db
        self._embeddings = embeddings
        self._snapshot = snapshot
        self._clock = clock

    async def find(
        self,
        guild_id: str,
        *,
        subject: str | None = None,
        fact_type: str | None = None,
        active: bool | None = True,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[Fact]:
        """Newest first; ``active`` None means archived ones too; ``before_id`` pages."""
        return list(
            await self._db.read(
                lambda con: store.list_facts(
                    con,
                    guild_id,
                    subject=subject,
                    fact_type=fact_type,
                    active=active,
                    before_id=before_id,
                    limit=max(1, min(LIST_LIMIT_MAX, limit)),
                )
            )
        )

    async def get(self, guild_id: str, fact_id: int) -> Fact | None:
        result: Fact | None = await self._db.read(store.get_fact, guild_id, fact_id)
        return result

    async def history(self, guild_id: str, fact_id: int) -> list[HistoryEntry]:
        return list(await self._db.read(store.fact_history, guild_id, fact_id))

    async def related(self, guild_id: str, fact_id: int) -> list[tuple[Fact, float]]:
        """The active facts related to this one (strongest first), with the
        edge's strength (the cosine of their vectors)."""
        return list(await self._db.read(related_facts, guild_id, fact_id))

    async def sources(self, guild_id: str, fact_id: int) -> list[FactSource]:
        """The messages the fact was observed in (id, time), oldest first."""
        return list(await self._db.read(fact_sources, guild_id, fact_id))

    async def edit(
        self,
        guild_id: str,
        fact_id: int,
        *,
        text: str | None = None,
        fact_type: str | None = None,
        actor: str = "operator",
    ) -> Fact | None:
        """Correct a fact's text or type. Raises InvalidInput for text the guards refuse.

        The corrected text goes through the write decision: the subject's
        other current facts it contradicts (same single-valued slot) are
        superseded by it."""
        new_text = None
        if text is not None:
            new_text = normalise_fact(text)
            if new_text is None:
                raise InvalidInput("fact text must be 4 to 190 characters")
            # Operator text is not grounded in a message, but it must not carry
            # instructions to the model or secrets any more than extracted text.
            refusal = operator_text_refusal(new_text)
            if refusal is not None:
                raise InvalidInput(refusal)
        new_type = normalise_type(fact_type) if fact_type is not None else None
        now = iso(self._clock())
        from memory.db.sqlite.driver import IntegrityError

        def work(con: Connection) -> Fact | None:
            before = store.get_fact(con, guild_id, fact_id)
            edited = store.edit_fact(
                con, guild_id, fact_id, text=new_text, fact_type=new_type, actor=actor, now=now
            )
            if edited is not None and before is not None and edited.fact != before.fact:
                supersede_by_edit(con, guild_id, fact_id, actor=actor, now=now)
            return edited

        try:
            fact: Fact | None = await self._db.write(work)
        except IntegrityError as exc:
            raise InvalidInput("another fact about this subject already has that text") from exc
        if fact is not None:
            self._embeddings.schedule_facts([fact])
            self._snapshot.request()
        return fact

    async def set_active(
        self, guild_id: str, fact_id: int, active: bool, *, actor: str = "operator"
    ) -> Fact | None:
        """Archive (False) or restore (True) a fact; None if there is no such fact."""
        now = iso(self._clock())
        fact: Fact | None = await self._db.write(
            store.set_fact_active, guild_id, fact_id, active, actor, now
        )
        if fact is not None:
            if active:
                self._embeddings.schedule_facts([fact])
            self._snapshot.request()
        return fact

    async def delete(self, guild_id: str, fact_id: int, *, actor: str = "operator") -> bool:
        now = iso(self._clock())
        ok = bool(await self._db.write(store.delete_fact, guild_id, fact_id, actor, now))
        if ok:
            self._snapshot.request()
        return ok
