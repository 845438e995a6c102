"""``Memory.episodes``: a channel's conversation, once it went quiet, becomes
one episodic memory.

A channel gets an episode when it has been quiet for the guild's
``episode_idle_minutes`` after at least ``episode_min_messages`` members'
messages since its last one (bots' messages are not part of a conversation's
memory). The new messages are cut where the channel was quiet that long: a
stretch with enough messages before a pause becomes an episode, a shorter
one joins the next. An episode is a fact of type ``episode`` about the
channel (``EPISODE_SUBJECT``, ``channel_id`` its channel), so it is
embedded, searched and gated by channel visibility like any fact; its source
messages are its ``fact_sources`` and its span is in ``episodes``.

The summary comes from the LLM when extraction uses one (one call, the
guild's ``extract_model``); a failed call or an unusable answer is logged,
counted and replaced by the offline summary (``memory.roles.episodes.summary``).

When a source message is deleted or edited, or its author forgotten, the
episode is retracted whole (its words may come from that message) and the
messages that remain are summarised again by the next run (``rebuild``)
when at least two are left.

``run`` is what the scheduler calls; tests drive it with an injected clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from memory.clock import Clock, iso, parse_iso
from memory.db.core import Connection, Database
from memory.embed.service import EmbeddingService
from memory.errors import EpisodeSummaryError
from memory.extract.base import Extractor
from memory.extract.llm import LLMExtractor
from memory.ingest.budgets import BudgetKeeper
from memory.models import Episode, Fact, StoredMessage
from memory.roles.episodes.summary import Line, LLMSummariser, extractive_summary
from memory.roles.guilds import GuildOps
from memory.store import episodes as store_episodes
from memory.store import ops as store_ops

log = logging.getLogger(__name__)

ACTOR = "episodes"
# The most messages one episode covers; a longer stretch is cut there.
MAX_EPISODE_MESSAGES = 200
# Messages read per channel per run; the rest waits for the next run.
SCAN_LIMIT = 2000
# A retracted episode is written again only from at least this many messages.
REBUILD_MIN_MESSAGES = 2
REBUILDS_PER_RUN = 50


@dataclass
class EpisodeStats:
    created: int = 0
    by_llm: int = 0
    extractive: int = 0
    llm_failures: int = 0  # calls that failed or answered nothing usable
    rebuilt: int = 0
    rebuilds_dropped: int = 0  # too few messages left to summarise
    skipped_changed: int = 0  # messages changed while being summarised; retried
    failure_causes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class EpisodeRun:
    created: tuple[Episode, ...]
    rebuilt: int
    channels_checked: int


@dataclass(frozen=True)
class ChannelEpisodes:
    channel_id: str
    channel_name: str | None
    count: int
    latest_end: str | None


def _minutes_between(a: str, b: str) -> float:
    return (parse_iso(b) - parse_iso(a)).total_seconds() / 60


def stretches(
    messages: Sequence[tuple[int, StoredMessage]],
    now: datetime,
    idle_minutes: int,
    min_messages: int,
) -> list[list[tuple[int, StoredMessage]]]:
    """The closed conversations among a channel's new messages (oldest first):
    cut at each quiet gap of ``idle_minutes`` once ``min_messages`` gathered,
    at ``MAX_EPISODE_MESSAGES``, and at the end when the channel has been
    quiet since. What follows the last closed one stays open."""
    out: list[list[tuple[int, StoredMessage]]] = []
    cur: list[tuple[int, StoredMessage]] = []
    for item in messages:
        if cur and len(cur) >= min_messages:
            if _minutes_between(cur[-1][1].created_at, item[1].created_at) >= idle_minutes:
                out.append(cur)
                cur = []
        cur.append(item)
        if len(cur) >= MAX_EPISODE_MESSAGES:
            out.append(cur)
            cur = []
    if cur and len(cur) >= min_messages:
        quiet = now - parse_iso(cur[-1][1].created_at)
        if quiet >= timedelta(minutes=idle_minutes):
            out.append(cur)
    return out


class EpisodeOps:
    def __init__(
        self,
        db: Database,
        embeddings: EmbeddingService,
        guilds: GuildOps,
        extractor: Extractor | None,
        clock: Clock,
        budgets: BudgetKeeper | None = None,
    ) -> None:
        """``budgets``: keeps each channel's episodes within its budget."""
        self._db = db
        self._budgets = budgets
        self._embeddings = embeddings
        self._settings = guilds.settings_cache
        self._extractor = extractor
        self._clock = clock
        self.stats = EpisodeStats()

    # -- reading ------------------------------------------------------------------------------
    async def find(
        self, guild_id: str, channel_id: str | None = None, *, limit: int = 50
    ) -> list[Episode]:
        """Active episodes of a guild (or one channel), newest first."""
        found: list[Episode] = await self._db.read(
            store_episodes.list_episodes, guild_id, channel_id, max(1, min(limit, 500))
        )
        return found

    async def get(self, guild_id: str, fact_id: int) -> Episode | None:
        """One episode with its source message ids."""
        found: Episode | None = await self._db.read(store_episodes.get_episode, guild_id, fact_id)
        return found

    async def per_channel(self, guild_id: str) -> list[ChannelEpisodes]:
        rows = await self._db.read(store_episodes.channel_counts, guild_id)
        return [ChannelEpisodes(*r) for r in rows]

    # -- writing ------------------------------------------------------------------------------
    async def run(
        self, now: datetime | None = None, owned: Callable[[str], bool] | None = None
    ) -> EpisodeRun:
        """Rebuild retracted episodes, then summarise every channel that went
        quiet after enough new messages (``now``: the clock's time; ``owned``:
        only the guilds this process owns)."""
        at = now or self._clock()
        rebuilt = await self._rebuild_pending(owned)
        created: list[Episode] = []
        channels = await self._db.read(store_episodes.channels_with_news)
        if owned is not None:
            channels = [(g, c) for g, c in channels if owned(g)]
        for guild_id, channel_id in channels:
            try:
                created.extend(await self._channel(guild_id, channel_id, at))
            except Exception:
                # One channel's failure must not stop the others; the next
                # run tries it again (its mark did not move).
                log.exception("episode of channel %s in guild %s failed", channel_id, guild_id)
        return EpisodeRun(tuple(created), rebuilt, len(channels))

    async def _channel(self, guild_id: str, channel_id: str, now: datetime) -> list[Episode]:
        settings = await self._settings.get(guild_id)
        if not settings.memory_enabled:
            return []  # memory off: nothing new is remembered, episodes included
        msgs = await self._db.read(store_episodes.new_messages, guild_id, channel_id, SCAN_LIMIT)
        out: list[Episode] = []
        for part in stretches(
            msgs, now, settings.episode_idle_minutes, settings.episode_min_messages
        ):
            episode = await self._write(guild_id, channel_id, part, now, mark=True)
            if episode is None:
                break  # changed meanwhile: the mark stays, the next run sees it again
            out.append(episode)
        return out

    async def _rebuild_pending(self, owned: Callable[[str], bool] | None) -> int:
        done = 0
        for job in await self._db.read(store_episodes.pending_rebuilds, REBUILDS_PER_RUN):
            if owned is not None and not owned(job.guild_id):
                continue
            msgs = await self._db.read(
                store_episodes.messages_by_ids, job.guild_id, job.message_ids
            )
            msgs = [(s, m) for s, m in msgs if not m.is_bot]
            if len(msgs) < REBUILD_MIN_MESSAGES:
                await self._db.write(store_episodes.finish_rebuild, job.id)
                self.stats.rebuilds_dropped += 1
                continue
            episode = await self._write(
                job.guild_id, job.channel_id, msgs, self._clock(), mark=False, rebuild=job.id
            )
            if episode is not None:
                done += 1
                self.stats.rebuilt += 1
        return done

    async def _summarise(self, guild_id: str, lines: list[Line], channel: str) -> tuple[str, str]:
        """(text, method): the LLM's summary when extraction uses one, else
        (or when it fails) the offline one."""
        summariser = await self._summariser(guild_id)
        if summariser is not None:
            try:
                return await summariser.summarise(lines, channel), "llm"
            except EpisodeSummaryError as exc:
                cause = type(exc.__cause__).__name__ if exc.__cause__ else "unusable reply"
                self.stats.llm_failures += 1
                self.stats.failure_causes[cause] = self.stats.failure_causes.get(cause, 0) + 1
                log.warning("episode summary by LLM failed, written offline: %s", exc)
                await self._log_failure(guild_id, cause, str(exc))
        return extractive_summary(lines, channel), "extractive"

    async def _log_failure(self, guild_id: str, cause: str, error: str) -> None:
        now = iso(self._clock())

        def work(con: Connection) -> None:
            store_ops.log_action(
                con,
                "memory_episode_error",
                f"episode summary by LLM failed ({cause}); written offline",
                now,
                guild_id=guild_id,
                detail={"cause": cause, "error": error[:300]},
            )

        await self._db.write(work)

    async def _summariser(self, guild_id: str) -> LLMSummariser | None:
        ex = self._extractor
        if not isinstance(ex, LLMExtractor):
            return None
        model = (await self._settings.get(guild_id)).extract_model or ex.model
        return LLMSummariser(ex.client, model, ex.timeout_s)

    async def _write(
        self,
        guild_id: str,
        channel_id: str,
        part: Sequence[tuple[int, StoredMessage]],
        now: datetime,
        *,
        mark: bool,
        rebuild: int | None = None,
    ) -> Episode | None:
        """Summarise ``part`` and store it, unless one of its messages was
        deleted or edited meanwhile (None; a rebuild then stays queued)."""
        name = await self._db.read(store_episodes.channel_name, guild_id, channel_id)
        # A message withheld for its author's consent has no text here.
        lines = [Line(m.author_name, m.content, m.created_at) for _, m in part if m.content.strip()]
        text, method = await self._summarise(guild_id, lines, name or "")
        stamp = iso(now)
        seen = [(m.id, m.content) for _, m in part]

        def work(con: Connection) -> Fact | None:
            still = store_episodes.messages_by_ids(con, guild_id, [i for i, _ in seen])
            if sorted((m.id, m.content) for _, m in still) != sorted(seen):
                return None
            fact = store_episodes.insert_episode(
                con, guild_id, channel_id, text, [m for _, m in part], method, stamp, ACTOR
            )
            if self._budgets is not None:
                self._budgets.after_write(
                    con, guild_id, fact.subject, stamp, channel_id=channel_id, fact_type="episode"
                )
            if mark:
                last_seq, last = part[-1]
                store_episodes.set_mark(con, guild_id, channel_id, last.created_at, last_seq, stamp)
            if rebuild is not None:
                store_episodes.finish_rebuild(con, rebuild)
            store_ops.log_action(
                con,
                "memory_episode",
                f"episode {fact.id} of {len(part)} messages ({method})",
                stamp,
                guild_id=guild_id,
                detail={
                    "fact_id": fact.id,
                    "channel_id": channel_id,
                    "messages": len(part),
                    "method": method,
                    "rebuild": rebuild is not None,
                },
            )
            return fact

        fact: Fact | None = await self._db.write(work)
        if fact is None:
            self.stats.skipped_changed += 1
            return None
        self.stats.created += 1
        if method == "llm":
            self.stats.by_llm += 1
        else:
            self.stats.extractive += 1
        self._embeddings.schedule_facts([fact])
        return await self.get(guild_id, fact.id)
