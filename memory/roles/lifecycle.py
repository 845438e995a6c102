"""``Memory.lifecycle``: Discord deleted or edited a message after it was ingested.

Each event is written to ``lifecycle_events`` when it is received and
applied in one transaction that also rewrites its journal lines and deletes
the event row: a crash before that commit leaves the row, and the next start
applies it (``replay``) before it replays unfinished messages; a crash after
it leaves nothing to do, so an event is applied exactly once. An applied
delete leaves no row behind; an applied edit leaves the new text in state
``pending``, so a restart extracts it. The pipeline compares a message's
stored text with the text it extracted from before it writes facts, so a job
still queued or extracting when the event arrives writes nothing, and an
edit is extracted again from the new text. An event that overtakes its
message (not stored yet) waits for it if the queue holds it (its row stays
until then), and is otherwise kept in memory for ``before_ingest`` (a
bounded map, lost on restart; Discord does not send a deleted message again).
The bytes an erase frees are dropped by the debounced ``ErasureCompactor``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from memory.clock import Clock, iso
from memory.config import IngestConfig
from memory.db.core import Connection, Database
from memory.extract.guards import clean_line, clean_message, is_grounded
from memory.ingest.queue import IngestQueue
from memory.journal import DELETED, EDITED, Journal
from memory.models import IncomingMessage, StoredMessage
from memory.snapshot import SnapshotRefresher
from memory.store import lifecycle as store_lifecycle
from memory.store import lifecycle_events as store_events
from memory.store import messages as store_messages
from memory.store import ops as store_ops
from memory.store.erase import ErasureCompactor

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


def _ids(message_ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(str(i) for i in message_ids if str(i)))


class MessageLifecycle:
    def __init__(
        self,
        *,
        db: Database,
        journal: Journal,
        queue: IngestQueue,
        snapshot: SnapshotRefresher,
        compactor: ErasureCompactor,
        cfg: IngestConfig,
        clock: Clock,
        ingesting: Callable[[], bool],
        opted_out: Callable[[str, str], Awaitable[bool]] | None = None,
    ) -> None:
        self._db = db
        # (guild, author) → they opted out of memory (``Memory.opt_outs``).
        self._opted_out = opted_out
        self._journal = journal
        self._queue = queue
        self._snapshot = snapshot
        self._compactor = compactor
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
        ids = _ids(message_ids)
        event = await self.receive_delete(guild_id, ids)
        if event is None:
            return DeleteReport(guild_id, 0, 0, 0, 0, 0)
        return await self._apply_delete(event, guild_id, ids, live=True)

    async def receive_delete(self, guild_id: str, message_ids: Sequence[str]) -> int | None:
        """The first half of ``delete_messages``: the delete is recorded, to
        be applied by ``replay`` (at the next start) if nothing applies it
        before. The event's id; None for no ids."""
        ids = _ids(message_ids)
        return await self._record("delete", guild_id, ids) if ids else None

    async def _record(
        self,
        kind: str,
        guild_id: str,
        ids: list[str],
        content: str | None = None,
        edited_at: str | None = None,
    ) -> int:
        now = iso(self._clock())
        event: int = await self._db.write(
            store_events.record_event, kind, guild_id, ids, now, content, edited_at, urgent=True
        )
        return event

    async def _apply_delete(
        self, event: int, guild_id: str, ids: list[str], *, live: bool
    ) -> DeleteReport:
        """``live``: received now (the queue may hold some of the messages);
        otherwise replayed at start-up, before anything is queued."""
        # The row keeps the ids not stored yet: a crash while waiting for
        # them erases them at the next start.
        counts = await self._delete_once(guild_id, ids, event, keep_missing=True)
        found = {g.message_id for g in counts.messages}
        missing = [i for i in ids if i not in found]
        held = [i for i in missing if live and self._queue.holds(i)]
        for i in missing:
            if i not in held:
                self._remember_early(i, None)
        if held:
            # Accepted just before the delete and stored after it.
            await self._wait_for(held)
            more = await self._delete_once(guild_id, held, event, keep_missing=False)
            counts = store_lifecycle.DeleteCounts(
                counts.messages + more.messages,
                counts.facts_retracted + more.facts_retracted,
                counts.facts_kept + more.facts_kept,
                counts.traces + more.traces,
                counts.journal_lines + more.journal_lines,
            )
        elif missing:
            await self._db.write(store_events.finish_event, event)
        if not counts.messages:
            return DeleteReport(guild_id, 0, 0, 0, 0, 0)
        if live:
            await self._snapshot.refresh_now()
        else:
            self._snapshot.request()
        # A deleted message must leave no bytes behind either (as for forget):
        # the database is rewritten from live content, once per burst.
        self._compactor.request()
        return DeleteReport(
            guild_id,
            len(counts.messages),
            counts.facts_retracted,
            counts.facts_kept,
            counts.traces,
            counts.journal_lines,
        )

    async def _delete_once(
        self, guild_id: str, ids: list[str], event: int, *, keep_missing: bool
    ) -> store_lifecycle.DeleteCounts:
        """One transaction: erase the stored ``ids``, rewrite their journal
        lines, and finish the event (with ``keep_missing``, narrow it to the
        ids not stored, if any)."""
        now = iso(self._clock())

        def work(con: Connection) -> store_lifecycle.DeleteCounts:
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
            if counts.messages:
                store_events.owe_compaction(con, now)
            found = {g.message_id for g in counts.messages}
            rest = [i for i in ids if i not in found] if keep_missing else []
            if rest:
                store_events.narrow_event(con, event, rest)
            else:
                store_events.finish_event(con, event)
            # In the transaction: a crash before its commit replays the whole
            # event, and rewriting a line already rewritten changes nothing.
            lines = self._rewrite_lines(guild_id, counts.messages, None)
            return replace(counts, journal_lines=lines)

        result: store_lifecycle.DeleteCounts = await self._db.write(work)
        return result

    async def edit_message(
        self, guild_id: str, message_id: str, content: str, edited_at: str | None = None
    ) -> EditReport:
        """Replace a stored message's text and journal line (marked edited),
        retract the facts it alone supported that the new text no longer says,
        and extract the new text. ``edited_at`` (ISO) goes to the action log."""
        text = content[: self._cfg.message_max_chars]
        if self._opted_out is not None:
            stored = await self._db.read(store_messages.get_message, guild_id, message_id)
            if stored is not None and await self._opted_out(guild_id, stored.author_id):
                # Its author opted out of memory since: the new text is not
                # theirs to keep, and the old one is no longer what they say.
                text = ""
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
        event = await self._record("edit", guild_id, [message_id], text, edited_at)
        return await self._apply_edit(event, guild_id, message_id, text, edited_at, live=True)

    async def _apply_edit(
        self,
        event: int,
        guild_id: str,
        message_id: str,
        text: str,
        edited_at: str | None,
        *,
        live: bool,
    ) -> EditReport:
        edit, stored = await self._edit_once(guild_id, message_id, text, edited_at, event, True)
        if stored is None:
            if not (live and self._queue.holds(message_id)):
                self._remember_early(message_id, text)
                await self._db.write(store_events.finish_event, event)
                return EditReport(guild_id, message_id, False)
            # Accepted just before the edit and stored after it.
            await self._wait_for([message_id])
            edit, stored = await self._edit_once(
                guild_id, message_id, text, edited_at, event, False
            )
        if edit is None or stored is None:
            return EditReport(guild_id, message_id, False)
        self._snapshot.request()
        # The old text's bytes go with the next rewrite of the file.
        self._compactor.request()
        if live and self._ingesting():
            await self._requeue(stored)
        return EditReport(guild_id, message_id, True, edit.facts_retracted, edit.journal_lines)

    async def _edit_once(
        self,
        guild_id: str,
        message_id: str,
        text: str,
        edited_at: str | None,
        event: int,
        keep: bool,
    ) -> tuple[store_lifecycle.StoredEdit | None, StoredMessage | None]:
        """One transaction: the edit, its journal line, and the end of the
        event (kept when ``keep`` and the message is not stored yet: the
        queue may hold it)."""
        now = iso(self._clock())

        def work(con: Connection) -> tuple[store_lifecycle.StoredEdit | None, StoredMessage | None]:
            edit = store_lifecycle.edit_message(
                con, guild_id, message_id, text, ACTOR, now, is_grounded
            )
            stored = store_messages.get_message(con, guild_id, message_id)
            if not (keep and stored is None):
                store_events.finish_event(con, event)
            if edit is None or stored is None:
                return edit, stored
            store_events.owe_compaction(con, now)
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
            was = store_lifecycle.Gone(
                message_id, stored.created_at, stored.author_id, stored.channel_id, edit.old_content
            )
            lines = self._rewrite_lines(guild_id, [was], text)
            return replace(edit, journal_lines=lines), stored

        result: tuple[store_lifecycle.StoredEdit | None, StoredMessage | None]
        result = await self._db.write(work)
        return result

    async def replay(self, owned: Callable[[str], bool] | None = None) -> int:
        """Apply the events an earlier run received and did not apply, in the
        order they arrived (before unfinished messages are queued again: an
        edited message is left ``pending`` for that replay). How many.
        ``owned``: only the events of these guilds (the others are for the
        processes that hold their shards)."""
        if await self._db.read(store_events.compaction_owed) is not None:
            self._compactor.request()
        events = await self._db.read(store_events.unapplied_events)
        if owned is not None:
            events = [e for e in events if owned(e.guild_id)]
        for e in events:
            try:
                if e.kind == "delete":
                    await self._apply_delete(e.id, e.guild_id, e.message_ids, live=False)
                elif e.content is not None and e.message_ids:
                    await self._apply_edit(
                        e.id, e.guild_id, e.message_ids[0], e.content, e.edited_at, live=False
                    )
                else:
                    log.warning("lifecycle event %d has no text to apply; dropped", e.id)
                    await self._db.write(store_events.finish_event, e.id)
            except Exception:
                # Left in the table: the next start tries it again.
                log.exception("could not apply the received %s event %d", e.kind, e.id)
        if events:
            log.info("applied %d message deletes and edits received before a restart", len(events))
        return len(events)

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
        new = None if new_text is None else self._line(new_text)
        content = DELETED if new is None else EDITED + new
        lines = [
            (
                m.created_at,
                m.author_id,
                m.channel_id,
                # A line written before lines were cut at a word holds the plain cut.
                [t for t in (self._line(m.content), self._clean(m.content), new) if t is not None],
            )
            for m in messages
        ]
        return self._journal.rewrite_messages(guild_id, lines, content) if lines else 0

    def _clean(self, text: str) -> str | None:
        return clean_message(text, self._cfg.clean_max_chars)

    def _line(self, text: str) -> str | None:
        """The text of a journal line (``clean_line``)."""
        return clean_line(text, self._cfg.clean_max_chars)
