"""``Memory.lifecycle``: Discord deleted or edited a message after it was ingested.

Each event is applied to SQLite in one transaction first: that row is the
durable record (a deleted message has no row left; an edited one holds the
new text in state ``pending``, so a restart extracts it). The pipeline
compares a message's stored text with the text it extracted from before it
writes facts, so a job still queued or extracting when the event arrives
writes nothing, and an edit is extracted again from the new text. An event
that overtakes its message (not stored yet) waits for it if the queue holds
it, and is otherwise kept in memory for ``before_ingest`` (a bounded map,
lost on restart; Discord does not send a deleted message again).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from memory.clock import Clock, iso
from memory.config import IngestConfig
from memory.extract.guards import clean_message, is_grounded
from memory.ingest.queue import IngestQueue
from memory.journal import DELETED, EDITED, Journal
from memory.models import IncomingMessage, StoredMessage
from memory.snapshot import SnapshotRefresher
from memory.store import lifecycle as store_lifecycle
from memory.store import messages as store_messages
from memory.store import ops as store_ops
from memory.store.db import Database
from memory.store.erase import compact_erased

log = logging.getLogger(__name__)

ACTOR = "discord"
EARLY_KEPT = 2048


@dataclass(frozen=True)
class DeleteReport:
    guild_id: str
    messages: int
    facts_retracted: int
    facts_kept: int
    traces: int
    journal_lines: int


@dataclass(frozen=True)
class EditReport:
    guild_id: str
    message_id: str
    applied: bool  # False: the message is not stored, or its text did not change
    facts_retracted: int = 0
    journal_lines: int = 0


class MessageLifecycle:
    def __init__(
        self,
        *,
        db: Database,
        journal: Journal,
        queue: IngestQueue,
        snapshot: SnapshotRefresher,
        cfg: IngestConfig,
        clock: Clock,
        ingesting: Callable[[], bool],
    ) -> None:
        self._db = db
        self._journal = journal
        self._queue = queue
        self._snapshot = snapshot
        self._cfg = cfg
        self._clock = clock
        self._ingesting = ingesting
        # Events about ids not stored yet (a delete or an edit that overtook
        # its message): id → the edited text, or None once deleted.
        self._early: OrderedDict[str, str | None] = OrderedDict()

    def before_ingest(self, msg: IncomingMessage) -> IncomingMessage | None:
        """A message about to be stored, as Discord's later events left it:
        None if it was deleted meanwhile, its edited text if it was edited."""
        if msg.id not in self._early:
            return msg
        content = self._early.pop(msg.id)
        return None if content is None else replace(msg, content=content)

    def _remember_early(self, message_id: str, content: str | None) -> None:
        # Called in the same loop step as the ``holds`` check: an ingest of
        # this id either is already held by the queue or will see this.
        self._early[message_id] = content
        self._early.move_to_end(message_id)
        while len(self._early) > EARLY_KEPT:
            self._early.popitem(last=False)

    async def _wait_for(self, message_ids: Sequence[str]) -> bool:
        """Wait until the queue is done with these messages; False on timeout."""
        futures = [f for i in message_ids if (f := self._queue.known_future(i)) is not None]
        if not futures:
            return True
        try:
            await asyncio.wait_for(
                asyncio.shield(asyncio.gather(*futures)), self._cfg.drain_timeout_s
            )
        except TimeoutError:
            log.warning("%d changed messages are still being processed", len(futures))
            return False
        return True

    async def delete_messages(self, guild_id: str, message_ids: Sequence[str]) -> DeleteReport:
        """Erase messages of one guild: rows, FTS rows, vectors, traces; their
        journal lines become ``[deleted]``; facts they alone supported are
        retracted. Nothing is stored for ids never stored (an ingest of one
        still on its way is refused)."""
        ids = list(dict.fromkeys(str(i) for i in message_ids if str(i)))
        if not ids:
            return DeleteReport(guild_id, 0, 0, 0, 0, 0)
        counts = await self._delete_once(guild_id, ids)
        found = {g.message_id for g in counts.messages}
        missing = [i for i in ids if i not in found]
        held = [i for i in missing if self._queue.holds(i)]
        for i in missing:
            if i not in held:
                self._remember_early(i, None)
        if held and await self._wait_for(held):
            # Accepted just before the delete and stored after it.
            more = await self._delete_once(guild_id, held)
            counts = store_lifecycle.DeleteCounts(
                counts.messages + more.messages,
                counts.facts_retracted + more.facts_retracted,
                counts.facts_kept + more.facts_kept,
                counts.traces + more.traces,
            )
        if not counts.messages:
            return DeleteReport(guild_id, 0, 0, 0, 0, 0)
        lines = await asyncio.to_thread(self._rewrite_lines, guild_id, counts.messages, None)
        await self._snapshot.refresh_now()
        # A deleted message must leave no bytes behind either (as for forget):
        # the database is rewritten from live content and its WAL emptied.
        await compact_erased(self._db)
        return DeleteReport(
            guild_id,
            len(counts.messages),
            counts.facts_retracted,
            counts.facts_kept,
            counts.traces,
            lines,
        )

    async def _delete_once(self, guild_id: str, ids: list[str]) -> store_lifecycle.DeleteCounts:
        now = iso(self._clock())

        def work(con: object) -> store_lifecycle.DeleteCounts:
            counts = store_lifecycle.delete_messages(con, guild_id, ids, ACTOR, now)
            if counts.messages:
                store_ops.log_action(
                    con,
                    "memory_message_deleted",
                    f"deleted {len(counts.messages)} messages, "
                    f"retracted {counts.facts_retracted} facts",
                    now,
                    guild_id=guild_id,
                    detail={
                        "messages": len(counts.messages),
                        "facts_retracted": counts.facts_retracted,
                        "facts_kept": counts.facts_kept,
                    },
                )
            return counts

        result: store_lifecycle.DeleteCounts = await self._db.write(work)
        return result

    async def edit_message(
        self, guild_id: str, message_id: str, content: str, edited_at: str | None = None
    ) -> EditReport:
        """Replace a stored message's text and journal line (marked edited),
        retract the facts it alone supported that the new text no longer says,
        and extract the new text. ``edited_at`` (ISO) goes to the action log."""
        text = content[: self._cfg.message_max_chars]
        if not text.strip():
            # Nothing left to remember: an edit down to nothing is a delete.
            report = await self.delete_messages(guild_id, [message_id])
            return EditReport(
                guild_id,
                message_id,
                report.messages > 0,
                report.facts_retracted,
                report.journal_lines,
            )
        edit, stored = await self._edit_once(guild_id, message_id, text, edited_at)
        if stored is None:
            if not self._queue.holds(message_id):
                self._remember_early(message_id, text)
                return EditReport(guild_id, message_id, False)
            # Accepted just before the edit and stored after it.
            if not await self._wait_for([message_id]):
                return EditReport(guild_id, message_id, False)
            edit, stored = await self._edit_once(guild_id, message_id, text, edited_at)
        if edit is None or stored is None:
            return EditReport(guild_id, message_id, False)
        was = store_lifecycle.Gone(
            message_id, stored.created_at, stored.author_id, stored.channel_id, edit.old_content
        )
        lines = await asyncio.to_thread(self._rewrite_lines, guild_id, [was], text)
        self._snapshot.request()
        if self._ingesting():
            await self._requeue(stored)
        return EditReport(guild_id, message_id, True, edit.facts_retracted, lines)

    async def _edit_once(
        self, guild_id: str, message_id: str, text: str, edited_at: str | None
    ) -> tuple[store_lifecycle.StoredEdit | None, StoredMessage | None]:
        now = iso(self._clock())

        def work(con: object) -> tuple[store_lifecycle.StoredEdit | None, StoredMessage | None]:
            edit = store_lifecycle.edit_message(
                con, guild_id, message_id, text, ACTOR, now, is_grounded
            )
            if edit is not None:
                store_ops.log_action(
                    con,
                    "memory_message_edited",
                    f"message {message_id} edited, retracted {edit.facts_retracted} facts",
                    now,
                    guild_id=guild_id,
                    detail={
                        "message_id": message_id,
                        "edited_at": edited_at,
                        "facts_retracted": edit.facts_retracted,
                    },
                )
            return edit, store_messages.get_message(con, guild_id, message_id)

        result: tuple[store_lifecycle.StoredEdit | None, StoredMessage | None]
        result = await self._db.write(work)
        return result

    async def _requeue(self, stored: StoredMessage) -> None:
        # A job still holding the old text writes nothing (its text is no
        # longer the stored one); the new text is queued once it is out.
        if self._queue.holds(stored.id) and not await self._wait_for([stored.id]):
            return  # left to the start-up replay: the row is 'pending'
        self._queue.forget_done(stored.id)
        await self._queue.enqueue_replay(stored.to_incoming())

    def _rewrite_lines(
        self, guild_id: str, messages: Sequence[store_lifecycle.Gone], new_text: str | None
    ) -> int:
        """Journal lines of ``messages`` become ``[deleted]`` (``new_text``
        None) or the edited text; a line holds the text as the pipeline
        cleaned it."""
        changed = 0
        new = None if new_text is None else self._clean(new_text)
        content = DELETED if new is None else EDITED + new
        for m in messages:
            texts = [t for t in (self._clean(m.content), new) if t is not None]
            changed += self._journal.rewrite_message(
                m.created_at, m.author_id, guild_id, m.channel_id, texts, content
            )
        return changed

    def _clean(self, text: str) -> str | None:
        return clean_message(text, self._cfg.clean_max_chars)
