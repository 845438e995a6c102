"""``Memory.review``: the moderators' review queue (guild settings
``review_policy``, ``review_channel``; ``memory.review_policy`` says what
waits and why, ``memory.ingest.review_gate`` queues it).

A moderator (Discord's buttons, the dashboard) decides each item once:

- **approve** writes it through the write decision as it is (a correction
  replaces the text of the fact it corrects);
- **edit** does the same with the moderator's text (the same checks as an
  operator's edit);
- **merge** makes it the same memory as a current fact about the same
  subject: that fact gains its source message as an observation and, when
  the moderator gives one, a combined text;
- **reject** stores nothing and deletes its text.

Every decision leaves a history row naming the moderator as actor, with
the reason they gave (``memory.roles.review.decisions``). An item nobody decides
within the guild's ``review_expire_days`` is **rejected** on expiry (actor
``review:expiry``): it was held because the guild wanted a person to look
first, and storing it unseen would undo that; a member can say it again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from memory.clock import Clock, iso, parse_iso
from memory.config import IngestConfig
from memory.db.core import Connection, Database
from memory.embed.service import EmbeddingService
from memory.errors import InvalidInput
from memory.guild_settings import GuildSettingsCache
from memory.ingest.review_gate import ReviewGate
from memory.models import Fact
from memory.review_policy import ACTIONS, CORRECTION, Flag, Queued, ReviewItem
from memory.roles.review import decisions
from memory.roles.review.decisions import ReviewClosed, ReviewResult
from memory.snapshot import SnapshotRefresher
from memory.store import facts as store_facts
from memory.store import review as store_review
from memory.store.ops import log_action

log = logging.getLogger(__name__)

EXPIRY_ACTOR = "review:expiry"
PAGE_MAX = 200


@dataclass(frozen=True)
class ReviewCard:
    """An item as a moderator sees it: beside it the fact it contradicts,
    corrects or may merge with, as that fact reads now."""

    item: ReviewItem
    target: Fact | None
    target_pinned: bool


@dataclass
class ReviewDecisionStats:
    decided: dict[str, int] = field(default_factory=dict)  # outcome → items

    def count(self, outcome: str) -> None:
        self.decided[outcome] = self.decided.get(outcome, 0) + 1


class ReviewOps:
    def __init__(
        self,
        db: Database,
        embeddings: EmbeddingService,
        snapshot: SnapshotRefresher,
        settings: GuildSettingsCache,
        gate: ReviewGate,
        cfg: IngestConfig,
        clock: Clock,
    ) -> None:
        self._db = db
        self._embeddings = embeddings
        self._snapshot = snapshot
        self._settings = settings
        self._gate = gate
        self._cfg = cfg
        self._clock = clock
        self._changed = asyncio.Event()
        gate.on_queued = self._changed.set
        self.stats = ReviewDecisionStats()

    @property
    def queued_total(self) -> int:
        return self._gate.stats.queued

    # -- reading ----------------------------------------------------------------------------

    async def pending(
        self, guild_id: str, limit: int = 100, *, before_id: int | None = None
    ) -> list[ReviewItem]:
        """The guild's items waiting for a decision, oldest first."""
        n = max(1, min(PAGE_MAX, limit))
        return list(
            await self._db.read(
                lambda con: store_review.pending(con, guild_id, n, before_id=before_id)
            )
        )

    async def get(self, guild_id: str, item_id: int) -> ReviewItem | None:
        found: ReviewItem | None = await self._db.read(store_review.get_item, guild_id, item_id)
        return found

    async def card(self, item: ReviewItem) -> ReviewCard:
        def work(con: Connection) -> ReviewCard:
            target = (
                store_facts.get_fact(con, item.guild_id, item.target_fact_id)
                if item.target_fact_id is not None
                else None
            )
            pinned = bool(target and store_review.pinned_or_canon(con, item.guild_id, [target.id]))
            return ReviewCard(item, target, pinned)

        result: ReviewCard = await self._db.read(work)
        return result

    async def counts(self) -> dict[str, int]:
        """Items waiting per guild."""
        return dict(await self._db.read(store_review.pending_counts))

    # -- deciding ---------------------------------------------------------------------------

    async def approve(
        self, guild_id: str, item_id: int, *, actor: str, note: str | None = None
    ) -> ReviewResult:
        return await self.decide(guild_id, item_id, "approve", actor=actor, note=note)

    async def reject(
        self, guild_id: str, item_id: int, *, actor: str, note: str | None = None
    ) -> ReviewResult:
        return await self.decide(guild_id, item_id, "reject", actor=actor, note=note)

    async def edit(
        self, guild_id: str, item_id: int, text: str, *, actor: str, note: str | None = None
    ) -> ReviewResult:
        return await self.decide(guild_id, item_id, "edit", actor=actor, note=note, text=text)

    async def merge(
        self,
        guild_id: str,
        item_id: int,
        *,
        actor: str,
        target_id: int | None = None,
        text: str | None = None,
        note: str | None = None,
    ) -> ReviewResult:
        return await self.decide(
            guild_id, item_id, "merge", actor=actor, note=note, text=text, target_id=target_id
        )

    async def decide(
        self,
        guild_id: str,
        item_id: int,
        action: str,
        *,
        actor: str,
        note: str | None = None,
        text: str | None = None,
        target_id: int | None = None,
    ) -> ReviewResult:
        """Decide a pending item (``ACTIONS``); ``ReviewClosed`` when it is not
        pending any more, ``InvalidInput`` for text or a merge the checks refuse."""
        if action not in ACTIONS:
            raise InvalidInput(f"action must be one of {', '.join(ACTIONS)}")
        if action == "edit" and not (text or "").strip():
            raise InvalidInput("edit needs the new text")
        checked = decisions.checked_text(text) if text and action in ("edit", "merge") else None
        why = decisions.clean_note(note)
        now = iso(self._clock())
        from memory.db.sqlite.driver import IntegrityError

        def work(con: Connection) -> ReviewResult:
            item = store_review.get_item(con, guild_id, item_id)
            if item is None or not item.pending:
                raise ReviewClosed(decisions.closed_words(item_id, item))
            if action == "reject":
                return decisions.reject(con, item, actor, why, now, "rejected", "review_reject")
            if action == "merge":
                return decisions.merge(con, item, actor, why, now, target_id, checked)
            if item.kind == "correction":
                return decisions.correct(con, item, actor, why, now, checked)
            return decisions.write(self._cfg, con, item, actor, why, now, checked)

        try:
            result: ReviewResult = await self._db.write(work)
        except IntegrityError as exc:
            raise InvalidInput("another fact about this subject already has that text") from exc
        self._after(result)
        return result

    def _after(self, result: ReviewResult) -> None:
        self.stats.count(result.outcome)
        self._changed.set()
        if result.fact is not None:
            self._embeddings.schedule_facts([result.fact])
            self._snapshot.request()

    # -- corrections of someone else's fact -------------------------------------------------

    async def propose_correction(
        self,
        guild_id: str,
        user_id: str,
        fact_id: int,
        text: str,
        visible_channels: set[str] | None,
    ) -> Queued:
        """A member's new text for a fact about someone else (or lore): it
        waits for a moderator. ``InvalidInput`` when the review queue is off,
        the fact is not a current one they can see, or the text is refused."""
        settings = await self._settings.get(guild_id)
        if settings.review_policy == "off":
            raise InvalidInput(
                "this server does not review corrections of other members' facts "
                "(review_policy is off)"
            )
        new_text = decisions.checked_text(text)
        now = iso(self._clock())
        expires = iso(parse_iso(now) + timedelta(days=settings.review_expire_days))

        def work(con: Connection) -> Queued:
            fact = store_facts.get_fact(con, guild_id, fact_id)
            hidden = (
                fact is not None
                and visible_channels is not None
                and fact.channel_id is not None
                and fact.channel_id not in visible_channels
            )
            if fact is None or hidden or not fact.is_active or fact.valid_to is not None:
                raise InvalidInput(f"there is no current fact {fact_id} you can see")
            if fact.subject == user_id:
                raise InvalidInput("that fact is about you: correct it yourself")
            if fact.fact == new_text:
                raise InvalidInput("that is what I remember already")
            flags = (Flag(CORRECTION, f"a member's new text for fact {fact.id}"),)
            item_id = store_review.enqueue(
                con,
                guild_id=guild_id,
                kind="correction",
                subject=fact.subject,
                author_id=user_id,
                channel_id=fact.channel_id,
                source_message_id=None,
                fact=new_text,
                fact_type=fact.fact_type,
                evidence=None,
                confidence=fact.confidence,
                observed_at=None,
                target_fact_id=fact.id,
                flags=flags,
                now=now,
                expires_at=expires,
            )
            log_action(
                con,
                "memory_review",
                f"correction held for review as item {item_id}: {CORRECTION}",
                now,
                guild_id=guild_id,
                subject=user_id,
                detail={"item_id": item_id, "event": "queued", "flags": [CORRECTION]},
            )
            return Queued(item_id, new_text, flags)

        queued: Queued = await self._db.write(work)
        self._changed.set()
        return queued

    # -- expiry -----------------------------------------------------------------------------

    async def expire(self, owned: Callable[[str], bool] | None = None) -> int:
        """Reject every item past its expiry (in the guilds ``owned`` names);
        how many."""
        now = iso(self._clock())
        due = await self._db.read(store_review.expired, now)
        total = 0
        for item in due:
            if owned is not None and not owned(item.guild_id):
                continue

            def work(con: Connection, item: ReviewItem = item) -> ReviewResult | None:
                fresh = store_review.get_item(con, item.guild_id, item.id)
                if fresh is None or not fresh.pending or fresh.expires_at > now:
                    return None  # decided meanwhile
                days = max(
                    1, round((parse_iso(fresh.expires_at) - parse_iso(fresh.created_at)).days)
                )
                note = f"not reviewed within {days} days: rejected on expiry, not stored"
                return decisions.reject(
                    con, fresh, EXPIRY_ACTOR, note, now, "expired", "review_expire"
                )

            result = await self._db.write(work)
            if result is not None:
                self._after(result)
                total += 1
        if total:
            log.info("review: %d items expired undecided and were rejected", total)
        return total

    # -- the review messages (the bot) ------------------------------------------------------

    async def wait_for_work(self, timeout: float) -> bool:
        """Wait until something was queued or decided in this process, at
        most ``timeout`` seconds; whether it was."""
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            return False
        self._changed.clear()
        return True

    async def unposted(self, guild_id: str, limit: int = 10) -> list[ReviewItem]:
        return list(await self._db.read(store_review.unposted, guild_id, limit))

    async def mark_posted(
        self, guild_id: str, item_id: int, channel_id: str, message_id: str
    ) -> bool:
        """Record the message showing a pending item; False when it was
        decided while the message was sent (update that message then)."""
        ok: bool = await self._db.write(
            store_review.mark_posted, guild_id, item_id, channel_id, message_id
        )
        return ok

    async def closed_posts(self, guild_id: str, limit: int = 10) -> list[ReviewItem]:
        """Decided items whose review message still shows them as waiting."""
        return list(await self._db.read(store_review.closed_posts, guild_id, limit))

    async def forget_post(self, guild_id: str, item_id: int) -> bool:
        """The review message of a decided item says how it ended: drop the row."""
        ok: bool = await self._db.write(store_review.forget_post, guild_id, item_id)
        return ok
