"""The change header of a reply's memory section: what changed in the guild's
memory since the channel's previous reply.

``Memory updates since rev N:`` and at most three bullets, newest first, one
per fact; omitted when nothing the channel may see changed. Only facts that
still exist and come from a channel the reply may show (or from none) are
named, so the header never leaks what the memory sections would hide."""

from __future__ import annotations

from collections.abc import Collection

from memory.db.core import Database
from memory.store.revisions import ChangeRow, changes_since, see_rev

MAX_BULLETS = 3
MAX_TEXT = 120

# History event -> the bullet's label.
LABELS: dict[str, str] = {
    "add": "+added",
    "restore": "+restored",
    "supersede": "↻superseded",
    "update": "↑updated",
    "edit": "↑updated",
    "reopen": "↑updated",
    "merge": "↔merged",
    "archive": "−archived",
    "expire": "−archived",
}


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def bullets(changes: list[ChangeRow], visible_channels: Collection[str] | None) -> list[str]:
    """Up to ``MAX_BULLETS`` lines for ``changes`` (newest first)."""
    out: list[str] = []
    named: set[int] = set()
    for c in changes:
        label = LABELS.get(c.event)
        if label is None or c.fact_id is None or c.fact is None or c.fact_id in named:
            continue
        if visible_channels is not None and c.channel_id and c.channel_id not in visible_channels:
            continue
        if c.event == "supersede" and not c.is_current:
            continue  # the closed side of a supersede: the new fact names it
        named.add(c.fact_id)
        out.append(f"{label}: {_short(c.fact)}")
        if len(out) == MAX_BULLETS:
            break
    return out


def render(since: int, lines: list[str]) -> str:
    return "\n".join([f"Memory updates since rev {since}:", *(f"- {line}" for line in lines)])


async def change_header(
    db: Database,
    guild_id: str,
    channel_id: str,
    now: str,
    visible_channels: Collection[str] | None = None,
) -> str:
    """The header for a reply in ``channel_id`` ('' when nothing changed since
    the channel's previous reply, or for its first); records that this reply
    saw the current revision."""
    seen, rev = await db.write(see_rev, guild_id, channel_id, now)
    if seen is None or rev <= seen:
        return ""
    lines = bullets(await db.read(changes_since, guild_id, seen), visible_channels)
    return render(seen, lines) if lines else ""
