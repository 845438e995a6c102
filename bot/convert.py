"""discord.py objects → memory models. Pure functions: no I/O, no awaits."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import discord

from memory import IncomingMessage, ReplyRequest, Standing, iso

# Chat messages worth remembering; joins, pins, boosts and the like are not.
INGESTED_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})


def author_name(user: discord.abc.User | Any) -> str:
    """The name people see: server nickname, then global display name, then username."""
    name = getattr(user, "display_name", None) or getattr(user, "name", None) or str(user.id)
    return str(name)[:100]


def message_text(message: discord.Message) -> str:
    """What the message says, with mentions shown as names (``@Alice``, ``#general``)."""
    text = message.clean_content if message.content else ""
    return text.strip()


def is_chat_message(message: discord.Message, me_id: int | None) -> bool:
    """A guild member's chat message (not a DM, not the bot's own, not a join
    or a pin): what the listener and the catch-up hand to memory."""
    if message.guild is None:  # DMs are never ingested
        return False
    if me_id is not None and message.author.id == me_id:
        return False
    return message.type in INGESTED_TYPES


def to_incoming(message: discord.Message) -> IncomingMessage:
    """A guild message as the engine's ``IncomingMessage`` (the caller checks guards first).

    Threads, forum posts and voice-channel text chat all keep their own channel
    id, so visibility checks see the place where the words were written.
    """
    ref = message.reference
    reply_to = str(ref.message_id) if ref is not None and ref.message_id is not None else None
    return IncomingMessage(
        id=str(message.id),
        guild_id=str(message.guild.id) if message.guild is not None else None,
        channel_id=str(message.channel.id),
        author_id=str(message.author.id),
        author_name=author_name(message.author),
        content=message_text(message),
        created_at=iso(message.created_at),
        source="text",
        is_bot=bool(message.author.bot or message.webhook_id is not None),
        reply_to_id=reply_to,
        # Set on a message read back from history that was edited before.
        edited_at=iso(message.edited_at) if message.edited_at is not None else None,
    )


def standing_of(member: discord.Member) -> Standing:
    """What the review policy weighs about a member writing lore: their roles
    (not @everyone) and when their Discord account was made."""
    return Standing(
        frozenset(str(r.id) for r in member.roles if r != member.guild.default_role),
        iso(member.created_at),
    )


def channel_name(channel: Any) -> str:
    name = getattr(channel, "name", None)
    return str(name)[:100] if name else str(getattr(channel, "id", "?"))


def names_of(message: discord.Message) -> tuple[str, str | None, dict[str, str], dict[str, str]]:
    """(guild id, guild name, {channel id: name}, {member id: name}) seen in one message."""
    guild = message.guild
    assert guild is not None
    return (
        str(guild.id),
        guild.name,
        {str(message.channel.id): channel_name(message.channel)},
        {str(message.author.id): author_name(message.author)},
    )


# -- visibility: which channels' memory may be shown to whom --------------------------------


def _can_read(channel: Any, who: discord.Member | discord.Role) -> bool:
    try:
        return bool(channel.permissions_for(who).read_messages)
    except (AttributeError, TypeError, ValueError):
        return False


def visible_channel_ids(guild: discord.Guild, who: discord.Member | discord.Role) -> set[str]:
    """Ids of the channels and cached threads ``who`` can read.

    Threads the bot no longer has cached (long archived) are left out: their
    memory stays hidden rather than risk showing a private thread.
    """
    out: set[str] = set()
    for ch in guild.channels:
        if isinstance(ch, discord.CategoryChannel):
            continue
        if _can_read(ch, who):
            out.add(str(ch.id))
    for thread in guild.threads:
        if thread.parent_id is None or str(thread.parent_id) not in out:
            continue
        if thread.is_private():
            if not isinstance(who, discord.Member):
                continue
            member_ids = {m.id for m in thread.members}
            if (
                who.id not in member_ids
                and who.id != thread.owner_id
                and not _can_manage(thread, who)
            ):
                continue
        out.add(str(thread.id))
    return out


def _can_manage(thread: discord.Thread, member: discord.Member) -> bool:
    try:
        return bool(thread.permissions_for(member).manage_threads)
    except (AttributeError, TypeError, ValueError):
        return False


def is_public(channel: Any, guild: discord.Guild) -> bool:
    """Whether everyone in the server can read ``channel`` (a reply there is public)."""
    if isinstance(channel, discord.Thread) and channel.is_private():
        return False
    return _can_read(channel, guild.default_role)


def reply_visibility(guild: discord.Guild, channel: Any, member: discord.Member) -> set[str]:
    """Channels whose memory may appear in a reply to ``member`` posted in ``channel``.

    A reply is read by the channel's audience, not only the asker: in a public
    channel it may use only memory from channels everyone can read; elsewhere,
    memory from channels the asker can read.
    """
    mine = visible_channel_ids(guild, member)
    if is_public(channel, guild):
        mine &= visible_channel_ids(guild, guild.default_role)
    return mine


# -- replies: the plain values the engine composes a reply from --------------------------------


def replied_message(message: discord.Message, author_id: int) -> discord.Message | None:
    """The message ``message`` is a Discord reply to, if ``author_id`` wrote it."""
    ref = message.reference
    if ref is None:
        return None
    resolved = ref.resolved or ref.cached_message
    if isinstance(resolved, discord.Message) and resolved.author.id == author_id:
        return resolved
    return None


def strip_self_mention(text: str, names: Sequence[str], ids: Sequence[int]) -> str:
    for i in ids:
        text = re.sub(rf"<@!?{i}>", " ", text)
    for name in names:
        if name:
            text = text.replace(f"@{name}", " ")
    return " ".join(text.split())


def reply_request(message: discord.Message, me: discord.abc.User) -> ReplyRequest:
    """A guild member's message to the bot ``me`` as the engine's ``ReplyRequest``."""
    guild, author = message.guild, message.author
    if guild is None or not isinstance(author, discord.Member):
        raise ValueError("only a guild member's message gets a reply")
    shown_as = guild.me or me
    visible = reply_visibility(guild, message.channel, author)
    replied = replied_message(message, me.id)
    return ReplyRequest(
        guild_id=str(guild.id),
        guild_name=guild.name,
        channel_id=str(message.channel.id),
        channel_name=getattr(message.channel, "name", "chat"),
        author_id=str(author.id),
        author_name=author_name(author),
        message_id=str(message.id),
        text=strip_self_mention(
            message.clean_content, [shown_as.display_name, shown_as.name], [me.id]
        ),
        visible_channels=frozenset(visible),
        channel_names={
            str(c.id): c.name for c in [*guild.channels, *guild.threads] if str(c.id) in visible
        },
        replied_text=(replied.content or None) if replied is not None else None,
        replied_id=str(replied.id) if replied is not None else None,
        created_at=iso(message.created_at),
        # A thread started from a message has that message's id; it lives in
        # the parent channel (a forum post's starter is in the thread itself).
        starter_message_id=(
            str(message.channel.id) if isinstance(message.channel, discord.Thread) else None
        ),
        parent_channel_id=(
            str(message.channel.parent_id)
            if isinstance(message.channel, discord.Thread) and message.channel.parent_id
            else None
        ),
        standing=standing_of(author),
    )


def voice_reply_request(
    channel: discord.VoiceChannel,
    utterance: IncomingMessage,
    speaker: discord.Member | None,
) -> ReplyRequest:
    """A transcribed utterance that addressed the bot, as the engine's ``ReplyRequest``.

    The reply is posted in the voice channel's text chat, so its audience is
    that chat's; a speaker missing from the cache is treated as someone who can
    read only what everyone can. Memory of the voice channel is not preferred
    over the rest of the server (no channel bias): spoken questions are rarely
    about what was typed there.
    """
    guild = channel.guild
    visible = (
        reply_visibility(guild, channel, speaker)
        if speaker is not None
        else visible_channel_ids(guild, guild.default_role)
    )
    return ReplyRequest(
        guild_id=str(guild.id),
        guild_name=guild.name,
        channel_id=str(channel.id),
        channel_name=channel_name(channel),
        author_id=utterance.author_id,
        author_name=author_name(speaker) if speaker is not None else utterance.author_name,
        message_id=utterance.id,
        text=" ".join(utterance.content.split()),
        visible_channels=frozenset(visible),
        channel_names={
            str(c.id): c.name for c in [*guild.channels, *guild.threads] if str(c.id) in visible
        },
        created_at=utterance.created_at,
        channel_bias=False,
        consumer="voice",
        standing=standing_of(speaker) if speaker is not None else None,
    )
