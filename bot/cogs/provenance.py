"""Provenance inside Discord: the message commands (Apps menu) "Why do you know
this?" on a bot reply and "What did you take from this?" on a member's
message, ``/memory why`` (the last reply here), and the why card they share.

The card lists each memory a reply used or stored (or a message gave), why
it ranked in words a member understands ("about you", "you said this in
#general on 3 May", "it matched “Leiden”"), and its source messages as
Discord jump links. Privacy: a memory learned in a channel the viewer cannot
read is left out entirely — not listed, not counted — and a source in such a
channel gets no link; readability is the viewer's permissions in that
channel (``bot.convert.visible_channel_ids``). The card is ephemeral, with
**This is wrong** (a modal → the correction flow) and **Forget this** (a
member's own facts; moderators — Manage Server — any fact) under a menu of
its facts.

The bodies are plain functions returning an ``Answer`` and the view's work is
plain methods (``WhyView.correct``, ``WhyView.forget``): dpytest does not
dispatch interactions, so tests call them with real guild objects.
"""

from __future__ import annotations

import logging
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from bot.client import GuildloreBot
from bot.cogs.answers import (
    Answer,
    answer_command_error,
    clip_answer,
    fit_lines,
    guild_member,
    is_operator,
    send_answer,
)
from bot.cogs.why_card import (
    Names,
    card_lines,
    forgotten_text,
    jump_link,
    missing_or_refused,
    shown,
)
from bot.convert import visible_channel_ids
from memory import (
    CapReached,
    Explained,
    InvalidInput,
    Memory,
)

log = logging.getLogger(__name__)

WHY_MENU = "Why do you know this?"
TAKEN_MENU = "What did you take from this?"
SELECT_LABEL_MAX = 100  # Discord's limit for a select option's label
VIEW_TIMEOUT_S = 15 * 60
MODAL_MAX = 190  # a fact's length


# -- the card's buttons --------------------------------------------------------------------


class CorrectionModal(discord.ui.Modal):
    """**This is wrong**: what is true instead, for one fact."""

    def __init__(self, view: WhyView, fact: Explained) -> None:
        super().__init__(title="This is wrong", timeout=VIEW_TIMEOUT_S)
        self.view = view
        self.fact = fact
        self.truth: discord.ui.TextInput[CorrectionModal] = discord.ui.TextInput(
            label="What is true instead?",
            style=discord.TextStyle.paragraph,
            placeholder=(
                "e.g. I live in Leiden now."
                if fact.subject == str(view.viewer.id)
                else "The corrected fact, e.g. Bob lives in Leiden."
            ),
            default=None,
            min_length=4,
            max_length=MODAL_MAX,
        )
        self.add_item(self.truth)

    async def on_submit(self, interaction: discord.Interaction) -> None:
        answer = await self.view.correct(self.fact, self.truth.value)
        await interaction.response.send_message(
            clip_answer(answer), ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
        )


class WhyView(discord.ui.View):
    """A menu of the card's facts and the two buttons, for the viewer only."""

    def __init__(
        self, memory: Memory, guild: discord.Guild, viewer: discord.Member, facts: list[Explained]
    ) -> None:
        super().__init__(timeout=VIEW_TIMEOUT_S)
        self.memory = memory
        self.guild = guild
        self.viewer = viewer
        self.facts = [f for f in facts if f.kind == "fact" and f.fact_id is not None]
        self.chosen = self.facts[0] if self.facts else None
        self.pick: discord.ui.Select[WhyView] = discord.ui.Select(
            placeholder="Which memory?",
            options=[
                discord.SelectOption(
                    label=f"{n}. {f.text}"[:SELECT_LABEL_MAX],
                    value=str(f.fact_id),
                    default=n == 1,
                )
                for n, f in enumerate(self.facts, start=1)
            ][:25],
            row=0,
        )
        self.pick.callback = self._picked  # type: ignore[method-assign]
        self.add_item(self.pick)
        wrong: discord.ui.Button[WhyView] = discord.ui.Button(
            label="This is wrong", style=discord.ButtonStyle.primary, row=1
        )
        wrong.callback = self._wrong  # type: ignore[method-assign]
        forget: discord.ui.Button[WhyView] = discord.ui.Button(
            label="Forget this", style=discord.ButtonStyle.danger, row=1
        )
        forget.callback = self._forget  # type: ignore[method-assign]
        self.add_item(wrong)
        self.add_item(forget)

    @property
    def moderator(self) -> bool:
        return is_operator(self.viewer)

    def choose(self, fact_id: int) -> Explained | None:
        self.chosen = next((f for f in self.facts if f.fact_id == fact_id), self.chosen)
        return self.chosen

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        if interaction.user.id != self.viewer.id:
            await interaction.response.send_message("This isn't your card.", ephemeral=True)
            return False
        return True

    async def _picked(self, interaction: discord.Interaction) -> None:
        if self.pick.values:
            self.choose(int(self.pick.values[0]))
        await interaction.response.defer()

    async def _wrong(self, interaction: discord.Interaction) -> None:
        if self.chosen is None:
            await interaction.response.send_message("Pick a memory first.", ephemeral=True)
            return
        await interaction.response.send_modal(CorrectionModal(self, self.chosen))

    async def _forget(self, interaction: discord.Interaction) -> None:
        if self.chosen is None:
            await interaction.response.send_message("Pick a memory first.", ephemeral=True)
            return
        answer = await self.forget(self.chosen)
        await interaction.response.send_message(
            clip_answer(answer), ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
        )

    # -- the work, as plain methods -----------------------------------------------------
    async def correct(self, fact: Explained, text: str) -> str:
        """Apply **This is wrong** with ``text``; the answer for the viewer."""
        assert fact.fact_id is not None
        gid, me = str(self.guild.id), str(self.viewer.id)
        visible = visible_channel_ids(self.guild, self.viewer)
        try:
            if fact.subject == me:
                changed = await self.memory.corrections.correct(
                    gid, me, fact.fact_id, text, visible, name=self.viewer.display_name
                )
            elif (
                not self.moderator
                and (await self.memory.guilds.settings(gid)).review_policy != "off"
            ):
                # Where the server reviews memories, a member's correction of
                # someone else's fact is one of the flagged kinds: it waits.
                queued = await self.memory.review.propose_correction(
                    gid, me, fact.fact_id, text, visible
                )
                return (
                    "That memory is not about you, so the moderators decide: I sent them your "
                    f"correction ({queued.fact}). Until one of them approves it, I keep what I had."
                )
            else:
                changed = await self.memory.corrections.correct_other(
                    gid, me, fact.fact_id, text, visible, moderator=self.moderator
                )
        except CapReached as exc:
            return (
                f"Not stored: you have reached today's limit of {exc.limit} corrections of "
                "other members' facts here. I kept it for the moderators to look at."
            )
        except InvalidInput as exc:
            return missing_or_refused(exc, "correct")
        return f"Thanks — corrected. I now remember: {changed.fact}"

    async def forget(self, fact: Explained) -> str:
        """Apply **Forget this**; the answer for the viewer."""
        assert fact.fact_id is not None
        gid, me = str(self.guild.id), str(self.viewer.id)
        visible = visible_channel_ids(self.guild, self.viewer)
        try:
            if fact.subject == me:
                gone = await self.memory.corrections.forget_fact(gid, me, fact.fact_id, visible)
            elif self.moderator:
                gone = await self.memory.corrections.forget_any(gid, me, fact.fact_id)
            else:
                return (
                    "You can only make me forget facts about yourself. If this one is wrong, "
                    "use This is wrong, or ask a moderator."
                )
        except InvalidInput as exc:
            return missing_or_refused(exc, "forget")
        return forgotten_text(gone.fact.fact, gone.receipt.id, gone.receipt.counts)


# -- the cards ---------------------------------------------------------------------------


def _with_view(
    memory: Memory, guild: discord.Guild, viewer: discord.Member, text: str, facts: list[Explained]
) -> Answer:
    view = WhyView(memory, guild, viewer, facts) if any(f.fact_id for f in facts) else None
    return Answer(text, view=view)


async def why_reply_card(
    memory: Memory, guild: discord.Guild, viewer: discord.Member, message: discord.Message
) -> Answer:
    """ "Why do you know this?" on one of the bot's messages."""
    me = guild.me
    if me is None or message.author.id != me.id:
        return Answer(
            "That isn't one of my replies. On a member's message, use “What did you take "
            "from this?” instead."
        )
    gid = str(guild.id)
    found = await memory.provenance.for_reply(gid, str(message.id))
    if found is None:
        return Answer("That reply didn't use or store any memory I have a record of.")
    visible = visible_channel_ids(guild, viewer)
    used = shown([m for m in found if m.action == "used"], visible)
    stored = shown([m for m in found if m.action != "used"], visible)
    if not used and not stored:
        return Answer("That reply didn't use any memory you can see.")
    names = await Names.of(memory, guild)
    lines, numbered = card_lines(
        [("What I used", used), ("What I stored", stored)], viewer, visible, names, gid
    )
    head = f"**Why I know this** — the memory behind [that reply](<{message.jump_url}>):"
    return _with_view(memory, guild, viewer, fit_lines(head, lines), numbered)


async def taken_card(
    memory: Memory, guild: discord.Guild, viewer: discord.Member, message: discord.Message
) -> Answer:
    """ "What did you take from this?" on a member's message."""
    me = guild.me
    if me is not None and message.author.id == me.id:
        return await why_reply_card(memory, guild, viewer, message)
    gid = str(guild.id)
    visible = visible_channel_ids(guild, viewer)
    if str(message.channel.id) not in visible:
        return Answer("I can't tell you about a message in a channel you can't read.")
    found = await memory.provenance.for_message(gid, str(message.id))
    own = message.author.id == viewer.id
    taken = shown(list(found.taken), visible)
    used = shown(list(found.used), visible)
    lines: list[str] = []
    numbered: list[Explained] = []
    if taken or used:
        names = await Names.of(memory, guild)
        lines, numbered = card_lines(
            [("What I took from it", taken), ("What I used answering it", used)],
            viewer,
            visible,
            names,
            gid,
        )
    tail: list[str] = []
    if own and found.pending:
        tail.append(
            f"{found.pending} personal detail(s) from it wait for your answer "
            "(`/memory pending`); until then I keep the message out of search and replies."
            if found.held
            else f"{found.pending} personal detail(s) from it wait for your answer "
            "(`/memory pending`)."
        )
    elif own and found.held:
        tail.append("I keep this message out of search and replies (you chose so).")
    if not found.stored:
        if own and await memory.opt_outs.is_out(gid, str(viewer.id)):
            tail.append("I don't keep your messages here: you opted out (`/memory opt-in`).")
        elif not lines:
            return Answer("I kept nothing from this message.")
    if not lines and not tail:
        return Answer("I kept this message, but took no facts from it.")
    head = f"**What I took from [this message](<{message.jump_url}>):**"
    return _with_view(memory, guild, viewer, fit_lines(head, lines, "\n".join(tail)), numbered)


async def why_last_card(
    memory: Memory, guild: discord.Guild, channel: Any, viewer: discord.Member
) -> Answer:
    """``/memory why``: the card of the last reply in this channel that used memory."""
    gid = str(guild.id)
    message_id = await memory.traces.last_traced(gid, str(channel.id))
    if message_id is None:
        return Answer("I haven't used or written any memory for a reply in this channel.")
    found = await memory.provenance.for_reply(gid, message_id) or []
    visible = visible_channel_ids(guild, viewer)
    used = shown([m for m in found if m.action == "used"], visible)
    stored = shown([m for m in found if m.action != "used"], visible)
    link = jump_link(gid, channel.id, message_id)
    head = f"**Memory behind my last reply here** (to [this message](<{link}>)):"
    if not used and not stored:
        return Answer(head + "\nNothing you can see.")
    names = await Names.of(memory, guild)
    lines, numbered = card_lines(
        [("What I used", used), ("What I stored", stored)], viewer, visible, names, gid
    )
    return _with_view(memory, guild, viewer, fit_lines(head, lines), numbered)


# -- the cog -------------------------------------------------------------------------------


class ProvenanceCommands(commands.Cog):
    def __init__(self, bot: GuildloreBot) -> None:
        self.bot = bot
        self.menus = [
            app_commands.ContextMenu(name=WHY_MENU, callback=self.why_menu),
            app_commands.ContextMenu(name=TAKEN_MENU, callback=self.taken_menu),
        ]
        for menu in self.menus:
            app_commands.guild_only(menu)
            menu.error(self._menu_error)

    async def cog_load(self) -> None:
        for menu in self.menus:
            self.bot.tree.add_command(menu)

    async def cog_unload(self) -> None:
        for menu in self.menus:
            self.bot.tree.remove_command(menu.name, type=menu.type)

    async def why_menu(self, interaction: discord.Interaction, message: discord.Message) -> None:
        guild, member = guild_member(interaction)
        await interaction.response.defer(ephemeral=True, thinking=True)
        await send_answer(
            interaction, await why_reply_card(self.bot.memory, guild, member, message)
        )

    async def taken_menu(self, interaction: discord.Interaction, message: discord.Message) -> None:
        guild, member = guild_member(interaction)
        await interaction.response.defer(ephemeral=True, thinking=True)
        await send_answer(interaction, await taken_card(self.bot.memory, guild, member, message))

    async def _menu_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        await answer_command_error(interaction, error)


async def setup(bot: commands.Bot) -> None:
    assert isinstance(bot, GuildloreBot)
    await bot.add_cog(ProvenanceCommands(bot))
