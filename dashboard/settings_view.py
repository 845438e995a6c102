"""The settings page as people read it: the per-guild settings in groups
(memory, replies, voice, privacy and retention, budgets and expiry), each with
a label, its value in force in words — a blank budget reads as the number in
force, not "default" — where that value comes from, and one form per group.

``POST /settings`` with ``group`` saves the group's fields (``v.<key>``)
that changed, all or nothing: every value is checked before any is stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory import CHOICE_LABELS, GUILD_SETTINGS_BY_KEY, SETTING_GROUPS, InvalidInput, Memory

from . import context

FIELD = "v."


def _plural(n: int, unit: str) -> str:
    return f"{n:,} {unit[:-1] if n == 1 and unit.endswith('s') else unit}".strip()


def in_words(key: str, value: Any, unit: str, channels: Mapping[str, str]) -> str:
    """A setting's value in force as the page says it."""
    spec = GUILD_SETTINGS_BY_KEY[key]
    if spec.kind == "bool":
        return "on" if value else "off"
    if spec.kind == "choice":
        return CHOICE_LABELS.get(key, {}).get(str(value), str(value))
    if spec.kind == "retention":
        text = str(value or "keep")
        if text == "keep":
            return "keep what is remembered"
        action, _, days = text.partition(":")
        n = int(days.rstrip("d") or 0)
        what = "forget them" if action == "forget" else "erase all of it"
        return f"{what} {'at once' if n == 0 else 'after ' + _plural(n, 'days')}"
    if spec.kind == "ids":
        ids = sorted(value or ())
        return ", ".join(f"#{channels[c]}" if c in channels else c for c in ids) or "none"
    if spec.kind == "roles":
        return ", ".join(f"role {r}" for r in sorted(value or ())) or "none"
    if spec.kind == "channel":
        if not value:
            return "none (the dashboard's review page only)"
        return f"#{channels[value]}" if value in channels else str(value)
    if spec.kind == "types":
        return ", ".join(sorted(value)) if value else "none"
    if spec.kind == "int":
        if value == 0 and key.startswith(("ttl_", "purge_")):
            return "never"
        if value == 0 and key.startswith("daily_cap_"):
            return "no limit"
        if value == 0 and key == "review_lore_min_account_days":
            return "no check"
        if unit == "%":
            return f"{value} %"
        return _plural(int(value), unit)
    if key == "voice_wake_words":
        return ", ".join(value) if value else "the bot's server nickname and user name"
    if key == "extract_model":
        return "offline rules (no chat model)" if value in (None, "rules") else str(value)
    if key == "embedding_model":
        return str(value) if value else "none (search by words only)"
    return str(value) if value else "—"


async def settings_groups(mem: Memory, guild: str, items: list[dict[str, Any]]) -> list[Any]:
    """The page's groups: each setting with its label, unit, value in force
    in words and whether this server set it."""
    by_key = {i["key"]: i for i in items}
    in_force = await mem.admin.settings_in_force(guild)
    channels = await context.channel_names(mem, guild)
    groups = []
    for g in SETTING_GROUPS:
        rows = []
        for key, label, unit in g.settings:
            item = by_key[key]
            rows.append(
                {
                    **item,
                    "label": label,
                    "unit": unit,
                    "in_force": in_words(key, in_force.get(key), unit, channels),
                    "set_here": item["stored"] is not None,
                    "limits": list(GUILD_SETTINGS_BY_KEY[key].limits),
                    "choice_labels": CHOICE_LABELS.get(key, {}),
                }
            )
        groups.append({"key": g.key, "title": g.title, "intro": g.intro, "settings": rows})
    return groups


async def save_group(mem: Memory, guild: str, form: Mapping[str, Any]) -> list[str]:
    """Store the group's changed fields; returns their keys. Raises
    ``InvalidInput`` (nothing stored) when a value is refused."""
    name = form.get("group")
    group = next((g for g in SETTING_GROUPS if g.key == name), None)
    if group is None:
        raise InvalidInput(f"unknown settings group {str(name)[:40]!r}")
    stored = await mem.guilds.raw_settings(guild)
    changed: dict[str, str | None] = {}
    for key, _, _ in group.settings:
        raw = form.get(FIELD + key)
        if raw is None:  # not on the form (an unchecked box is sent as "")
            continue
        if not isinstance(raw, str):
            raise InvalidInput(f"{key} must be text")
        value = context.check_setting(key, raw)
        if value != stored.get(key):
            changed[key] = value
    await mem.guilds.check_settings(changed)
    for key, value in changed.items():
        await mem.guilds.set_setting(guild, key, value, actor=context.OPERATOR)
    return list(changed)
