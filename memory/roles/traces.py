"""``Memory.traces``: which facts a reply retrieved, stored or updated (MemoryTrace rows),
each with its memory type and source, and the whole context a reply's model saw."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory.clock import Clock, iso
from memory.db.core import Connection, Database
from memory.memory_types import memory_type_of
from memory.models import Fact, Hit, Trace
from memory.roles.provenance import matched_words
from memory.store import ops as store_ops
from memory.store import reply_context as store_context


class TraceOps:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    async def record(
        self,
        guild_id: str,
        channel_id: str | None,
        message_id: str | None,
        *,
        retrieved: Sequence[Hit] = (),
        stored: Sequence[tuple[Fact, str]] = (),
        reply_id: str | None = None,
        query: str | None = None,
    ) -> int:
        """One row per fact a reply retrieved, and per fact it stored or updated.
        ``query``: the member's words the memory was looked up with; a
        retrieved row keeps which of them its text says (``matched``), for
        the why card.

        ``stored`` holds (fact, event) pairs, e.g. what ``Memory.lore.remember``
        returned; a new fact ("add", "supersede") is recorded as stored,
        anything else as updated.
        """
        rows: list[dict[str, Any]] = []
        for h in retrieved:
            rows.append(
                {
                    "guild_id": guild_id,
                    "channel_id": channel_id,
                    "message_id": message_id,
                    "reply_id": reply_id,
                    "fact_id": int(h.id) if h.kind == "fact" else None,
                    "action": "retrieved",
                    "content": h.text,
                    "score": h.score,
                    "score_parts": {
                        **h.parts.as_dict(),
                        "kind": h.kind,
                        "ref": h.id,
                        "matched": matched_words(query, h.text) if query else [],
                    },
                    "memory_type": memory_type_of(h.fact_type) if h.kind == "fact" else "messages",
                }
            )
        for fact, event in stored:
            rows.append(
                {
                    "guild_id": guild_id,
                    "channel_id": channel_id,
                    "message_id": message_id,
                    "reply_id": reply_id,
                    "fact_id": fact.id,
                    "action": "stored" if event in ("add", "supersede") else "updated",
                    "content": fact.fact,
                    "score": None,
                    "score_parts": None,
                    "memory_type": memory_type_of(fact.fact_type),
                }
            )
        if not rows:
            return 0
        now = iso(self._clock())

        def work(con: Connection) -> int:
            fact_ids = [int(r["fact_id"]) for r in rows if r["fact_id"] is not None]
            message_ids = [h.id for h in retrieved if h.kind == "message"]
            facts, messages = store_ops.trace_sources(con, guild_id, fact_ids, message_ids)
            for r in rows:
                if r["fact_id"] is not None:
                    r["source"] = facts.get(int(r["fact_id"]))
                else:
                    r["source"] = messages.get(str(r["score_parts"]["ref"]))
            n = store_ops.add_traces(con, rows, now)
            store_ops.log_action(
                con,
                "memory_trace",
                f"{n} traces for message {message_id}",
                now,
                guild_id=guild_id,
                detail={"message_id": message_id, "reply_id": reply_id},
            )
            return n

        return int(await self._db.write(work))

    async def record_context(
        self,
        guild_id: str,
        channel_id: str | None,
        message_id: str,
        reply_id: str | None,
        context: dict[str, Any],
        refs: Sequence[str],
    ) -> int:
        """Keep what a reply's model saw (bounded JSON); ``refs`` name the messages
        (``m:<id>``), facts (``f:<id>``) and members (``u:<id>``) it holds, whose
        erasure erases it. A guild keeps its newest contexts only."""
        now = iso(self._clock())
        return int(
            await self._db.write(
                lambda con: store_context.add_context(
                    con,
                    guild_id=guild_id,
                    channel_id=channel_id,
                    message_id=message_id,
                    reply_id=reply_id,
                    context=context,
                    refs=refs,
                    now=now,
                )
            )
        )

    async def context(self, guild_id: str, message_id: str) -> dict[str, Any] | None:
        """What the model saw for the reply to ``message_id`` (or reply ``message_id``)."""
        found: dict[str, Any] | None = await self._db.read(
            store_context.context_for_message, guild_id, message_id
        )
        return found

    async def for_message(self, guild_id: str, message_id: str) -> list[Trace]:
        return list(await self._db.read(store_ops.traces_for_message, guild_id, message_id))

    async def for_fact(self, guild_id: str, fact_id: int) -> list[Trace]:
        return list(await self._db.read(store_ops.traces_for_fact, guild_id, fact_id))

    async def recent(self, guild_id: str | None, limit: int = 50) -> list[Trace]:
        """Newest first, across guilds when ``guild_id`` is None."""
        return list(await self._db.read(store_ops.recent_traces, guild_id, limit))

    async def last_traced(self, guild_id: str, channel_id: str) -> str | None:
        """The id of the channel's latest message that has traces (``/memory why``)."""
        result: str | None = await self._db.read(
            store_ops.last_traced_message, guild_id, channel_id
        )
        return result
