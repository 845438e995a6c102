"""``Memory.procedures``: how a guild wants the bot to behave ("answer in Spanish
in #es", "no spoilers in #anime").

Moderators add them per guild or per channel; a reply sees the guild-wide ones
and those of its channel (a thread also its parent's) in its system prompt.
They are never facts: search, the prompt slice's memory sections and
``MEMORY.md`` do not contain them. Both scopes are bounded (``MAX_PER_SCOPE``
procedures of at most ``MAX_CHARS`` characters) so the system prompt stays
small; every change writes a ``procedure_change`` action-log row with its actor.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory.clock import Clock, iso
from memory.db.core import Database
from memory.errors import InvalidInput
from memory.models import ID_RE, Procedure
from memory.store import procedures as store

MAX_PER_SCOPE = 10
MAX_CHARS = 300
MIN_CHARS = 3


def render_procedures(procedures: Sequence[Procedure]) -> str:
    """The system prompt's block of standing instructions ('' when there are none)."""
    if not procedures:
        return ""
    lines = "\n".join(f"- {' '.join(p.text.split())}" for p in procedures)
    return (
        "How this server's moderators want you to behave here (follow these, unless one "
        f"asks for something harmful):\n{lines}"
    )


def clean_text(text: str) -> str:
    """One line of at most ``MAX_CHARS`` characters; InvalidInput otherwise."""
    line = " ".join(str(text or "").split())
    if len(line) < MIN_CHARS:
        raise InvalidInput(f"a procedure needs at least {MIN_CHARS} characters")
    if len(line) > MAX_CHARS:
        raise InvalidInput(
            f"a procedure is at most {MAX_CHARS} characters (this one has {len(line)}); "
            "split it or say it shorter"
        )
    return line


def _check_id(value: str, what: str) -> str:
    value = str(value or "").strip()
    if not ID_RE.match(value):
        raise InvalidInput(f"not a {what} id: {value[:30]!r}")
    return value


class ProcedureOps:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    async def add(
        self, guild_id: str, text: str, *, channel_id: str | None = None, actor: str
    ) -> Procedure:
        """Store one procedure for the guild (``channel_id`` None) or one channel.

        InvalidInput when the text is empty or too long, the scope already holds
        ``MAX_PER_SCOPE``, or the same procedure is already there.
        """
        gid = _check_id(guild_id, "guild")
        cid = None if channel_id is None else _check_id(channel_id, "channel")
        line = clean_text(text)
        now = iso(self._clock())
        result = await self._db.write(
            lambda con: store.add(con, gid, cid, line, actor, now, limit=MAX_PER_SCOPE)
        )
        where = "this channel" if cid is not None else "the whole server"
        if result == "full":
            raise InvalidInput(
                f"{where} already has {MAX_PER_SCOPE} procedures (the most allowed); "
                "remove one first"
            )
        if result == "duplicate":
            raise InvalidInput(f"{where} already has that procedure")
        assert isinstance(result, Procedure)
        return result

    async def remove(self, guild_id: str, procedure_id: int, *, actor: str) -> Procedure | None:
        """Delete one of the guild's procedures; None if it has none with that id."""
        pid = int(procedure_id)
        if not 0 < pid < 2**63:  # SQLite's integer range; no such row either way
            return None
        now = iso(self._clock())
        return await self._db.write(lambda con: store.remove(con, guild_id, pid, actor, now))

    async def list(self, guild_id: str, *, channel_id: str | None = None) -> tuple[Procedure, ...]:
        """All of a guild's procedures (guild-wide first, then by channel), or with
        ``channel_id`` only that channel's own."""
        if channel_id is None:
            return tuple(await self._db.read(store.of_guild, guild_id))
        return tuple(await self._db.read(store.in_scope, guild_id, channel_id))

    async def for_channel(
        self, guild_id: str, channel_id: str, *, parent_id: str | None = None
    ) -> tuple[Procedure, ...]:
        """What a reply in ``channel_id`` follows: the guild-wide procedures, then the
        channel's (for a thread, ``parent_id``'s before its own), oldest first."""
        scopes = [parent_id, channel_id] if parent_id else [channel_id]
        return tuple(await self._db.read(store.for_channels, guild_id, scopes))
