"""The moderators' review queue on Discord: each memory waiting for review
(``Memory.review``) is a message in the guild's ``review_channel`` with
**Approve**, **Edit**, **Merge** and **Reject** buttons; a contradiction
shows the fact it contradicts beside it.

The buttons are ``DynamicItem``s: their custom id carries the action and the
item (``review:approve:12``), so a click on a message posted before a
restart still reaches the handler. Only moderators decide — Manage Server,
or a role in ``review_moderator_roles`` — and the engine decides each item
once, whoever clicks first. Edit and Merge open a modal with the text to
keep and an optional reason.

A background task posts what waits (woken by the engine when something is
queued, else every ``POLL_S``) and updates the messages of items decided
elsewhere — on the dashboard, by expiry, or withdrawn because their message
or member went: the message then says how it ended, and a rejected item's
text leaves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import Any

import discord
from discord.ext import commands

from bot.client import GuildloreBot
from bot.cogs.answers import NO_PINGS
from memory import (
    LORE_SUBJECT,
    InvalidInput,
    Memory,
    ReviewCard,
    ReviewItem,
    ReviewResult,
    may_decide,
    parse_iso,
)

log = logging.getLogger(__name__)

CUSTOM_ID = r"review:(?P<action>approve|edit|merge|reject):(?P<item>[0-9]{1,18})"
POLL_S = 30.0
POST_BATCH = 10  # messages per guild per round: Discord's rate limits are per channel
FIELD_MAX = 1024
TEXT_MAX = 190  # a fact's longest text
NOT_MODERATOR = (
    "Only moderators can decide review items: Manage Server, or a role named in "
    "the server's review_moderator_roles setting."
)
PENDING_COLOUR = discord.Colour.orange()
OUTCOME_COLOURS = {
    "approved": discord.Colour.green(),
    "edited": discord.Colour.green(),
    "merged": discord.Colour.teal(),
    "rejected": discord.Colour.red(),
    "expired": discord.Colour.dark_grey(),
    "withdrawn": discord.Colour.dark_grey(),
}
LABELS = {"approve": "Approve", "edit": "Edit", "merge": "Merge", "reject": "Reject"}
STYLES = {
    "approve": discord.ButtonStyle.success,
    "edit": discord.ButtonStyle.primary,
    "merge": discord.ButtonStyle.secondary,
    "reject": discord.ButtonStyle.danger,
}


def _clip(text: str, limit: int = FIELD_MAX) -> str:
    text = text.strip() or "—"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def jump_link(guild_id: str, channel_id: str | None, message_id: str | None) -> str | None:
    if not channel_id or not message_id:
        return None
    return f"https://discord.com/channels/{guild_id}/{channel_id}/{message_id}"


def who(actor: str | None) -> str:
    """A history actor as a moderator reads it."""
    if not actor:
        return "someone"
    if actor.startswith("user:"):
        return f"<@{actor.removeprefix('user:')}>"
    if actor == "review:expiry":
        return "expiry (nobody decided in time)"
    if actor.startswith("operator"):
        return "an operator on the dashboard"
    return actor


def _about(item: ReviewItem) -> str:
    if item.subject == LORE_SUBJECT:
        return "Server lore"
    return f"<@{item.subject}>" if item.subject else "—"


def review_embed(card: ReviewCard) -> discord.Embed:
    """A waiting item: what it says, about whom, from where, why it waits and,
    beside it, the fact it contradicts or corrects."""
    item = card.item
    kind = {
        "fact": "Fact from a message",
        "lore": "Server lore line",
        "correction": "Correction of someone else's fact",
    }.get(item.kind, item.kind)
    embed = discord.Embed(
        title=f"Memory waiting for review · #{item.id}",
        description=f"**{kind}**",
        colour=PENDING_COLOUR,
    )
    target = card.target
    if target is not None and (card.target_pinned or item.kind == "correction"):
        # Side by side: what memory holds now, and what would replace it.
        now_title = f"Now in memory · fact #{target.id}" + (
            " (pinned)" if card.target_pinned else ""
        )
        embed.add_field(name=now_title, value=_clip(target.fact), inline=True)
        embed.add_field(name="Proposed", value=_clip(item.fact), inline=True)
    else:
        embed.add_field(name="Proposed", value=_clip(item.fact), inline=False)
        if target is not None:
            embed.add_field(
                name=f"Closest current fact · #{target.id} (Merge folds it in)",
                value=_clip(target.fact),
                inline=False,
            )
    embed.add_field(name="About", value=_about(item), inline=True)
    if item.author_id:
        label = "Proposed by" if item.kind == "correction" else "In the words of"
        embed.add_field(name=label, value=f"<@{item.author_id}>", inline=True)
    link = jump_link(item.guild_id, item.channel_id, item.source_message_id)
    if link:
        embed.add_field(name="Source", value=f"[jump to the message]({link})", inline=True)
    reasons = "\n".join(f"• **{f.title}**: {f.why}" for f in item.flags)
    embed.add_field(name="Why it waits", value=_clip(reasons), inline=False)
    expires = int(parse_iso(item.expires_at).timestamp())
    embed.add_field(name="Confidence", value=f"{item.confidence * 100:.0f} %", inline=True)
    embed.add_field(name="Rejected unless decided", value=f"<t:{expires}:R>", inline=True)
    embed.set_footer(
        text="Approve stores it · Edit changes the text first · Merge folds it into the "
        "fact shown · Reject stores nothing and deletes its text"
    )
    return embed


def closed_embed(item: ReviewItem, fact_text: str | None = None) -> discord.Embed:
    """A decided item: how it ended, by whom, why; nothing of a rejected text."""
    outcome = item.outcome or "decided"
    embed = discord.Embed(
        title=f"Review #{item.id} · {outcome}",
        colour=OUTCOME_COLOURS.get(outcome, discord.Colour.dark_grey()),
    )
    if outcome in ("approved", "edited", "merged") and item.result_fact_id is not None:
        text = fact_text if fact_text is not None else item.fact
        embed.description = f"Fact #{item.result_fact_id} now reads: {_clip(text, 300)}"
    else:
        embed.description = "Nothing stored; its text was deleted."
    if outcome == "withdrawn" and not item.decided_by:
        # Nobody decided: its message or its member went first.
        embed.add_field(name="Why", value=_clip(item.note or "nothing left to decide"))
        return embed
    embed.add_field(name="Decided by", value=who(item.decided_by), inline=True)
    if item.note:
        embed.add_field(name="Reason", value=_clip(item.note), inline=True)
    return embed


def review_view(item: ReviewItem, *, can_merge: bool) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    for action in ("approve", "edit", "merge", "reject"):
        button = ReviewButton(action, item.id)
        if action == "merge" and not can_merge:
            button.item.disabled = True
        view.add_item(button)
    return view


def _memory(interaction: discord.Interaction) -> Memory:
    client = interaction.client
    assert isinstance(client, GuildloreBot)
    return client.memory


async def is_moderator(memory: Memory, interaction: discord.Interaction) -> bool:
    guild, user = interaction.guild, interaction.user
    if guild is None or not isinstance(user, discord.Member):
        return False
    settings = await memory.guilds.settings(str(guild.id))
    return may_decide(
        user.guild_permissions.manage_guild,
        [str(r.id) for r in user.roles],
        settings.review_moderator_roles,
    )


async def _apply(
    interaction: discord.Interaction,
    action: str,
    item_id: int,
    *,
    text: str | None = None,
    note: str | None = None,
) -> None:
    """Decide, then turn the review message into its outcome; a refusal is
    said to the moderator alone."""
    memory = _memory(interaction)
    assert interaction.guild is not None
    gid = str(interaction.guild.id)
    actor = f"user:{interaction.user.id}"
    try:
        result: ReviewResult = await memory.review.decide(
            gid, item_id, action, actor=actor, note=note, text=text
        )
    except InvalidInput as exc:  # decided already, gone, or text the checks refuse
        await interaction.response.send_message(f"Not done: {exc}.", ephemeral=True)
        return
    except Exception:
        log.exception("review decision failed")
        await interaction.response.send_message(
            "Sorry, that failed; nothing changed.", ephemeral=True
        )
        return
    fact_text = result.fact.fact if result.fact is not None else None
    await interaction.response.edit_message(
        embed=closed_embed(result.item, fact_text), view=None, allowed_mentions=NO_PINGS
    )
    await memory.review.forget_post(gid, item_id)


class ReviewButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=CUSTOM_ID):
    """One of a review message's four buttons, for any item, after any restart."""

    def __init__(self, action: str, item_id: int) -> None:
        super().__init__(
            discord.ui.Button(
                label=LABELS[action],
                style=STYLES[action],
                custom_id=f"review:{action}:{item_id}",
            )
        )
        self.action = action
        self.item_id = item_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction,
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> ReviewButton:
        return cls(match["action"], int(match["item"]))

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        if await is_moderator(_memory(interaction), interaction):
            return True
        await interaction.response.send_message(NOT_MODERATOR, ephemeral=True)
        return False

    async def callback(self, interaction: discord.Interaction) -> None:
        if self.action in ("approve", "reject"):
            await _apply(interaction, self.action, self.item_id)
            return
        memory = _memory(interaction)
        assert interaction.guild is not None
        item = await memory.review.get(str(interaction.guild.id), self.item_id)
        if item is None or not item.pending:
            await interaction.response.send_message(
                f"Not done: review item {self.item_id} is no longer waiting.", ephemeral=True
            )
            return
        if self.action == "edit":
            await interaction.response.send_modal(ReviewModal("edit", item, item.fact))
            return
        card = await memory.review.card(item)
        if card.target is None or item.kind == "correction":
            await interaction.response.send_message(
                "Not done: there is no current fact to merge it with.", ephemeral=True
            )
            return
        await interaction.response.send_modal(ReviewModal("merge", item, card.target.fact))


class ReviewModal(discord.ui.Modal):
    """The text to keep (the item's own for Edit, the fact's for Merge) and a reason."""

    def __init__(self, action: str, item: ReviewItem, text: str) -> None:
        title = f"Edit review item #{item.id}" if action == "edit" else f"Merge item #{item.id}"
        super().__init__(title=title, custom_id=f"review-modal:{action}:{item.id}")
        self.action = action
        self.item_id = item.id
        self.text: discord.ui.TextInput[ReviewModal] = discord.ui.TextInput(
            label="Text to remember" if action == "edit" else "The merged fact reads",
            style=discord.TextStyle.paragraph,
            default=text[:TEXT_MAX],
            max_length=TEXT_MAX,
            min_length=4,
        )
        self.reason: discord.ui.TextInput[ReviewModal] = discord.ui.TextInput(
            label="Reason (optional, kept in the history)",
            required=False,
            max_length=300,
        )
        self.add_item(self.text)
        self.add_item(self.reason)

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        if await is_moderator(_memory(interaction), interaction):
            return True
        await interaction.response.send_message(NOT_MODERATOR, ephemeral=True)
        return False

    async def on_submit(self, interaction: discord.Interaction) -> None:
        await _apply(
            interaction,
            self.action,
            self.item_id,
            text=self.text.value,
            note=self.reason.value or None,
        )


# -- posting and updating the review messages ---------------------------------------------


class ReviewQueue(commands.Cog):
    def __init__(self, bot: GuildloreBot) -> None:
        self.bot = bot
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # one round at a time: an item is posted once
        self._warned: set[tuple[str, Any]] = set()  # lasting problems already logged

    async def cog_load(self) -> None:
        self.bot.add_dynamic_items(ReviewButton)

    async def cog_unload(self) -> None:
        self.bot.remove_dynamic_items(ReviewButton)
        await self.stop()

    @property
    def memory(self) -> Memory:
        return self.bot.memory

    @commands.Cog.listener()
    async def on_ready(self) -> None:
        self.start()  # on_ready comes again after a reconnect: started once

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="review-queue")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while not self.bot.is_closed():
            sent = 0
            try:
                sent = await self.sync_all()
            except Exception:  # one bad round must not end the task
                log.exception("review queue round failed")
            if sent >= POST_BATCH:
                await asyncio.sleep(1.0)  # a backlog (after downtime): on at once
            else:
                await self.memory.review.wait_for_work(POLL_S)

    async def sync_all(self) -> int:
        """Post what waits and update what was decided, in every guild this
        connection holds; how many messages were sent or edited."""
        n = 0
        async with self._lock:
            for guild in list(self.bot.guilds):
                if self.bot.accepting:
                    n += await self._sync_guild(guild)
        return n

    async def sync_guild(self, guild: discord.Guild) -> int:
        async with self._lock:
            return await self._sync_guild(guild)

    async def _sync_guild(self, guild: discord.Guild) -> int:
        gid = str(guild.id)
        n = await self._close_decided(guild)
        settings = await self.memory.guilds.settings(gid)
        if not settings.review_channel:
            # Items wait on the dashboard. (With the policy turned off since,
            # what waited before is still posted: it only waits to be decided.)
            return n
        channel = guild.get_channel_or_thread(int(settings.review_channel))
        if not isinstance(channel, discord.TextChannel | discord.Thread):
            self._warn_once(
                ("missing", settings.review_channel),
                "guild %s: review_channel %s is not a text channel I can see; "
                "its items wait on the dashboard",
                gid,
                settings.review_channel,
            )
            return n
        self._warn_if_public(channel)
        for item in await self.memory.review.unposted(gid, POST_BATCH):
            try:
                n += await self.post(channel, item)
            except discord.HTTPException as exc:
                self._warn_once(
                    ("post", channel.id),
                    "guild %s: could not post review item %d in #%s: %s",
                    gid,
                    item.id,
                    channel.name,
                    exc,
                )
                break  # no permission or rate-limited: the next round tries again
        return n

    async def post(self, channel: discord.TextChannel | discord.Thread, item: ReviewItem) -> int:
        gid = str(channel.guild.id)
        card = await self.memory.review.card(item)
        can_merge = card.target is not None and item.kind != "correction"
        message = await channel.send(
            embed=review_embed(card),
            view=review_view(item, can_merge=can_merge),
            allowed_mentions=NO_PINGS,
        )
        if await self.memory.review.mark_posted(gid, item.id, str(channel.id), str(message.id)):
            return 1
        # Decided (on the dashboard) while it was being posted.
        fresh = await self.memory.review.get(gid, item.id)
        if fresh is not None and not fresh.pending:
            await message.edit(embed=closed_embed(fresh), view=None)
            await self.memory.review.forget_post(gid, item.id)
        else:
            await message.edit(content="Decided meanwhile.", embed=None, view=None)
        return 2

    async def _close_decided(self, guild: discord.Guild) -> int:
        """Review messages of items decided elsewhere say how they ended."""
        gid = str(guild.id)
        n = 0
        for item in await self.memory.review.closed_posts(gid, POST_BATCH):
            channel = guild.get_channel_or_thread(int(item.post_channel_id or 0))
            if isinstance(channel, discord.TextChannel | discord.Thread) and item.post_message_id:
                try:
                    message = await channel.fetch_message(int(item.post_message_id))
                    fact = (
                        await self.memory.facts.get(gid, item.result_fact_id)
                        if item.result_fact_id is not None
                        else None
                    )
                    await message.edit(
                        embed=closed_embed(item, fact.fact if fact else None),
                        view=None,
                        allowed_mentions=NO_PINGS,
                    )
                    n += 1
                except discord.NotFound:
                    pass  # the message is gone: nothing left to update
                except discord.HTTPException as exc:
                    log.warning("guild %s: could not update review item %d: %s", gid, item.id, exc)
                    continue
            await self.memory.review.forget_post(gid, item.id)
        return n

    def _warn_if_public(self, channel: discord.TextChannel | discord.Thread) -> None:
        if channel.permissions_for(channel.guild.default_role).read_messages:
            self._warn_once(
                ("public", channel.id),
                "guild %s: the review channel #%s is readable by everyone; "
                "waiting memories are meant for moderators",
                channel.guild.id,
                channel.name,
            )

    def _warn_once(self, key: tuple[str, Any], message: str, *args: Any) -> None:
        """A problem that lasts (a channel's permissions) is logged once, not every round."""
        if key in self._warned:
            log.debug(message, *args)
            return
        self._warned.add(key)
        log.warning(message, *args)


async def setup(bot: commands.Bot) -> None:
    assert isinstance(bot, GuildloreBot)
    await bot.add_cog(ReviewQueue(bot))
