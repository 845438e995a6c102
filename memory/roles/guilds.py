"""``Memory.guilds``: guilds, their members and channels (names), per-guild settings
and voice consent."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from memory.clock import Clock, iso
from memory.db.core import Connection, Database
from memory.embed.service import GUILD_MODEL_KEY, EmbeddingService
from memory.errors import InvalidInput
from memory.guild_settings import GuildSettings, GuildSettingsCache, parse_guild_setting
from memory.models import MemberPage
from memory.roles.opt_outs import OptOuts
from memory.store import members as store_members
from memory.store import messages as store_messages
from memory.store import ops as store_ops

log = logging.getLogger(__name__)


class GuildOps:
    def __init__(
        self,
        db: Database,
        embeddings: EmbeddingService,
        clock: Clock,
        settings_cache: GuildSettingsCache,
        opt_outs: OptOuts | None = None,
    ) -> None:
        self._db = db
        # Members who opted out of memory: their names are not recorded.
        self._opt_outs = opt_outs
        self._embeddings = embeddings
        self._clock = clock
        # Shared with the ingest pipeline, so a change applies to both at once.
        self.settings_cache = settings_cache
        self._background: set[asyncio.Task[Any]] = set()

    # -- guilds, members, channels -------------------------------------------------------
    async def overview(self) -> list[dict[str, Any]]:
        """Every guild the engine knows, with its name and counts."""
        return list(await self._db.read(store_ops.guild_overview))

    async def members(self, guild_id: str) -> list[dict[str, Any]]:
        return list(await self._db.read(store_ops.members, guild_id))

    async def member_page(
        self,
        guild_id: str,
        *,
        search: str = "",
        with_facts_only: bool = True,
        sort: str = "facts",
        offset: int = 0,
        limit: int = 25,
    ) -> MemberPage:
        """A page of members with their fact and message counts (the guild
        page): filtered by name or id, without the members no fact is about
        unless asked; ``sort``: facts, name, messages or last (message)."""
        if sort not in store_members.MEMBER_SORTS:
            raise InvalidInput(f"sort must be one of: {', '.join(store_members.MEMBER_SORTS)}")
        return await self._db.read(
            lambda con: store_members.member_page(
                con,
                guild_id,
                search=search,
                with_facts_only=with_facts_only,
                sort=sort,
                offset=max(0, offset),
                limit=max(1, min(500, limit)),
            )
        )

    async def channels(self, guild_id: str) -> list[dict[str, Any]]:
        return list(await self._db.read(store_ops.channels, guild_id))

    async def set_names(
        self,
        guild_id: str,
        *,
        guild_name: str | None = None,
        channels: dict[str, str] | None = None,
        members: dict[str, str] | None = None,
    ) -> None:
        """Record display names (guild, channels, members) for pages and the
        snapshot; not those of members who opted out of memory."""
        now = iso(self._clock())
        if members and self._opt_outs is not None:
            out = await self._opt_outs.members(guild_id)
            members = {uid: name for uid, name in members.items() if uid not in out}

        def work(con: Connection) -> None:
            # Rows locked in the order a message's own insert locks them
            # (members, channels, then the guild; each sorted): two writers
            # (PostgreSQL's urgent one stores messages) then never deadlock.
            for uid, name in sorted((members or {}).items()):
                store_messages.upsert_member(con, guild_id, uid, name, now)
            for cid, name in sorted((channels or {}).items()):
                store_messages.set_channel_name(con, guild_id, cid, name, now)
            store_messages.set_guild_name(con, guild_id, guild_name, now)

        await self._db.write(work)

    # -- settings ------------------------------------------------------------------------------
    async def load_embedding_models(self) -> None:
        """Give the embedding service each guild's stored model (at start-up)."""
        stored = await self._db.read(store_ops.all_guild_settings)
        for gid, values in stored.items():
            self._embeddings.set_guild_model(gid, values.get(GUILD_MODEL_KEY))

    async def settings(self, guild_id: str) -> GuildSettings:
        """Resolved per-guild settings (cached; the cache is updated on every change)."""
        return await self.settings_cache.get(guild_id)

    async def raw_settings(self, guild_id: str) -> dict[str, str]:
        """What is stored (no defaults): the dashboard shows stored and effective values."""
        return dict(await self._db.read(store_ops.get_guild_settings, guild_id))

    async def check_settings(self, values: dict[str, str | None]) -> None:
        """What ``set_setting`` checks beyond each value's form: an embedding model
        must be one a configured provider serves (InvalidInput otherwise). Lets a
        caller refuse a whole batch of settings before storing any."""
        model = values.get(GUILD_MODEL_KEY)
        if model is not None:
            await self._embeddings.check_model(model)

    async def set_setting(
        self, guild_id: str, key: str, value: str | None, *, actor: str = "operator"
    ) -> None:
        """Validate and store one setting (InvalidInput on bad values); applies at once."""
        value = parse_guild_setting(key, value)
        await self.check_settings({key: value})
        now = iso(self._clock())

        def work(con: Connection) -> None:
            store_ops.set_guild_setting(con, guild_id, key, value, now)
            store_ops.log_action(
                con,
                "settings_change",
                f"{key} = {value!r} by {actor}",
                now,
                guild_id=guild_id,
                detail={"key": key, "value": value, "actor": actor},
            )

        await self._db.write(work)
        self.settings_cache.invalidate(guild_id)
        if key == GUILD_MODEL_KEY:
            self._embeddings.set_guild_model(guild_id, value)
            # Vectors of the old model stay (never mixed); fill the new model's.
            task = asyncio.create_task(
                self._reindex_in_background(guild_id), name=f"reindex-{guild_id}"
            )
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    # -- voice consent ---------------------------------------------------------------------------
    async def set_voice_opt_out(self, guild_id: str, user_id: str, opted_out: bool) -> None:
        now = iso(self._clock())
        await self._db.write(store_ops.set_voice_opt_out, guild_id, user_id, opted_out, now)

    async def voice_opt_outs(self) -> set[tuple[str, str]]:
        """(guild id, user id) of every member who opted out of voice transcription."""
        return set(await self._db.read(store_ops.voice_opt_outs))

    async def _reindex_in_background(self, guild_id: str) -> None:
        """Fill a guild's vectors for its new model, as a background task.

        Nobody awaits such a task, so a failure is logged and recorded (the
        embedding service counts it and writes the action log) here instead of
        dying with the task. Vectors made before it stay; the next re-index resumes.
        """
        try:
            await self._embeddings.reindex([guild_id])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.error("re-index of guild %s failed: %s", guild_id, exc)
