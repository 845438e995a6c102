"""What every slash-command cog shares: the answer type, sending it without
pinging anyone, the confirm/cancel buttons of destructive commands, and the
last-resort error reply.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import discord
from discord import app_commands

log = logging.getLogger(__name__)

ANSWER_LIMIT = 1900
NO_PINGS = discord.AllowedMentions.none()


@dataclass
class Answer:
    text: str
    ephemeral: bool = True
    view: discord.ui.View | None = None
    files: list[discord.File] = field(default_factory=list)


def clip_answer(text: str, limit: int = ANSWER_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def fit_lines(head: str, lines: list[str], tail: str = "") -> str:
    """``head`` and as many ``lines`` as fit one message, then ``tail``."""
    out = head
    for line in lines:
        if len(out) + len(line) + len(tail) + 2 > ANSWER_LIMIT:
            out += "\n…"
            break
        out += "\n" + line
    return out + (("\n" + tail) if tail else "")


def fact_id_of(value: str) -> int | None:
    """The fact id an autocomplete choice (or a typed number) carries; None for
    anything else, so a made-up value is answered, not looked up."""
    value = value.strip()
    return int(value) if value.isascii() and value.isdigit() and len(value) < 19 else None


def is_operator(member: discord.Member) -> bool:
    return bool(member.guild_permissions.manage_guild)


# -- confirmation ----------------------------------------------------------------------------


class ConfirmView(discord.ui.View):
    """Two buttons for the member who asked; the action runs at most once."""

    def __init__(
        self,
        owner_id: int,
        action: Callable[[], Awaitable[str]],
        *,
        confirm_label: str,
        timeout: float = 60.0,
    ) -> None:
        super().__init__(timeout=timeout)
        self.owner_id = owner_id
        self.action = action
        self.done = False
        self.confirm.label = confirm_label
        # Set by the command once the prompt is shown, so a timeout can update it.
        self.interaction: discord.Interaction | None = None

    async def on_timeout(self) -> None:
        if self.done or self.interaction is None:
            return
        self.done = True
        try:
            await self.interaction.edit_original_response(
                content="Timed out; nothing was erased.", view=None
            )
        except discord.HTTPException:
            pass

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        if interaction.user.id != self.owner_id:
            await interaction.response.send_message("This isn't your button.", ephemeral=True)
            return False
        return True

    @discord.ui.button(label="Confirm", style=discord.ButtonStyle.danger)
    async def confirm(
        self, interaction: discord.Interaction, button: discord.ui.Button[Any]
    ) -> None:
        if self.done:
            return
        self.done = True
        self.stop()
        await interaction.response.edit_message(content="Working on it…", view=None)
        try:
            text = await self.action()
        except Exception:
            log.exception("confirmed action failed")
            text = "Sorry, that failed. Nothing was changed that I know of; please try again."
        await interaction.edit_original_response(content=text)

    @discord.ui.button(label="Cancel", style=discord.ButtonStyle.secondary)
    async def cancel(
        self, interaction: discord.Interaction, button: discord.ui.Button[Any]
    ) -> None:
        self.done = True
        self.stop()
        await interaction.response.edit_message(content="Cancelled; nothing was erased.", view=None)


async def send_answer(interaction: discord.Interaction, answer: Answer) -> None:
    """Reply to a slash command (or follow up if it was deferred), never pinging."""
    kwargs: dict[str, Any] = {
        "ephemeral": answer.ephemeral,
        "allowed_mentions": NO_PINGS,
    }
    if answer.files:
        kwargs["files"] = answer.files
    if answer.view is not None:
        kwargs["view"] = answer.view
        if isinstance(answer.view, ConfirmView):
            answer.view.interaction = interaction
    text = clip_answer(answer.text)
    if interaction.response.is_done():
        await interaction.followup.send(text, **kwargs)
    else:
        await interaction.response.send_message(text, **kwargs)


def guild_member(interaction: discord.Interaction) -> tuple[discord.Guild, discord.Member]:
    """The server and member of a slash command; outside a server it refuses."""
    guild, member = interaction.guild, interaction.user
    if guild is None or not isinstance(member, discord.Member):
        raise app_commands.NoPrivateMessage()
    return guild, member


async def answer_command_error(
    interaction: discord.Interaction, error: app_commands.AppCommandError
) -> None:
    """Every cog's last resort: log the failure, tell the member briefly."""
    log.warning(
        "/%s failed: %s",
        interaction.command.qualified_name if interaction.command else "?",
        error,
    )
    text = (
        "This command only works in a server."
        if isinstance(error, app_commands.NoPrivateMessage)
        else "Sorry, that command failed. Please try again."
    )
    try:
        await send_answer(interaction, Answer(text))
    except discord.HTTPException:
        pass
