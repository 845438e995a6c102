"""The short-term window of a reply: the last minutes of its channel, as chat turns.

A reply sees the channel's latest messages before the one it answers, oldest
first, read from the inbox (no Discord history call on the reply's path):

- at most ``max_messages`` of them (clamped to 10–120), and within
  ``max_tokens`` by the estimate below, the oldest dropped first;
- only when the channel is one the reply's audience may read
  (``visible_channels``) and not one the guild excluded from memory;
- a thread's own history, plus its starter message (which lives in the
  parent channel) when it is stored and the parent is readable and not
  excluded; when the limits bind, the starter is kept over older history;
- the bot's own earlier replies (``bot_replies``, recorded by
  ``record_bot_reply`` once posted) as ``assistant`` turns; everyone else's
  messages, other bots' included, as ``user`` turns prefixed with the
  author's display name.

Token counts are ``memory.text.estimate_tokens``'s estimate (a quarter of
the characters plus a turn's framing), not a tokenizer's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from memory.clock import iso
from memory.db.core import Connection
from memory.store import window as store_window
from memory.store.window import WindowRow
from memory.text import estimate_tokens

if TYPE_CHECKING:
    from memory.engine import Memory

MIN_RECENT_MESSAGES = 10
MAX_RECENT_MESSAGES = 120
DEFAULT_RECENT_MESSAGES = 35
DEFAULT_RECENT_TOKENS = 2000


def clamp_recent_messages(n: int) -> int:
    """``n`` within the window's bounds (10–120)."""
    return max(MIN_RECENT_MESSAGES, min(MAX_RECENT_MESSAGES, int(n)))


@dataclass(frozen=True)
class WindowTurn:
    """One message of the window as a chat turn."""

    role: Literal["user", "assistant"]
    message_id: str
    channel_id: str
    author_name: str
    text: str
    created_at: str

    @property
    def content(self) -> str:
        """What the model reads: ``Name: text`` for members, the text for the bot's own."""
        if self.role == "assistant":
            return self.text
        return f"{self.author_name}: {self.text}"

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.content)

    def as_message(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class WindowQuery:
    """Where and before when to read a window, and what may be shown."""

    guild_id: str
    channel_id: str
    before: str  # created_at of the message being answered (exclusive)
    # Its id: of messages in the same millisecond, only smaller snowflakes came
    # before ("" when unknown: the millisecond is left out).
    before_id: str
    exclude_ids: tuple[str, ...]
    visible_channels: frozenset[str]
    excluded_channels: frozenset[str]
    starter_message_id: str | None = None
    max_messages: int = DEFAULT_RECENT_MESSAGES
    max_tokens: int = DEFAULT_RECENT_TOKENS


def _turn(row: WindowRow) -> WindowTurn:
    return WindowTurn(
        role="assistant" if row.from_bot_itself else "user",
        message_id=row.message_id,
        channel_id=row.channel_id,
        author_name=" ".join(row.author_name.split()) or "someone",
        text=row.content.strip(),
        created_at=row.created_at,
    )


def _readable(q: WindowQuery, channel_id: str) -> bool:
    return channel_id in q.visible_channels and channel_id not in q.excluded_channels


def read_window(con: Connection, q: WindowQuery) -> list[WindowTurn]:
    """The window's turns, oldest first (runs inside one read transaction)."""
    limit = clamp_recent_messages(q.max_messages)
    budget = max(0, q.max_tokens)
    rows: list[WindowRow] = []
    if _readable(q, q.channel_id):
        rows = [
            *store_window.recent_messages(
                con, q.guild_id, q.channel_id, q.before, q.before_id, q.exclude_ids, limit
            ),
            *store_window.recent_bot_replies(
                con, q.guild_id, q.channel_id, q.before, q.before_id, limit
            ),
        ]
    rows.sort(key=lambda r: (r.created_at, r.message_id), reverse=True)
    newest = [_turn(r) for r in rows if r.content.strip()][:limit]
    starter: WindowTurn | None = None
    if q.starter_message_id and q.starter_message_id not in q.exclude_ids:
        row = store_window.stored_message(con, q.guild_id, q.starter_message_id)
        if (
            row is not None
            and row.content.strip()
            and row.created_at <= q.before
            and row.channel_id != q.channel_id
            and _readable(q, row.channel_id)
        ):
            starter = _turn(row)
            newest = [t for t in newest if t.message_id != starter.message_id]
    kept: list[WindowTurn] = []
    if starter is not None and starter.tokens <= budget:
        budget -= starter.tokens
    else:
        starter = None
    for turn in newest:
        if turn.tokens > budget:
            break  # the window is contiguous: nothing older than a turn that does not fit
        budget -= turn.tokens
        kept.append(turn)
    kept.reverse()
    return [starter, *kept] if starter is not None else kept


async def recent_window(memory: Memory, q: WindowQuery) -> list[WindowTurn]:
    """The reply's short-term window, oldest first."""
    turns: list[WindowTurn] = await memory.db.read(read_window, q)
    return turns


async def record_bot_reply(
    memory: Memory,
    *,
    guild_id: str,
    channel_id: str,
    message_id: str,
    reply_to_id: str | None,
    to_user_id: str,
    text: str,
    created_at: str | None = None,
) -> None:
    """Keep a reply the bot posted for the channel's next windows.

    It goes to ``bot_replies``, never to the inbox: it is not extracted,
    embedded or searched, and it is erased with the member it answered. Not
    kept where the guild has memory off or the channel excluded.
    """
    text = text.strip()
    settings = await memory.guilds.settings(guild_id)
    if not text or not settings.memory_enabled or channel_id in settings.excluded_channels:
        return
    when = created_at or iso(memory.clock())
    await memory.db.write(
        lambda con: store_window.insert_bot_reply(
            con,
            guild_id=guild_id,
            channel_id=channel_id,
            message_id=message_id,
            reply_to_id=reply_to_id,
            to_user_id=to_user_id,
            content=text,
            created_at=when,
            keep_per_channel=MAX_RECENT_MESSAGES,
        )
    )
