"""Per-guild runtime settings: declared once, stored in ``guild_settings``,
applied without restart (the bot reads them per event; the dashboard edits them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory.errors import InvalidInput
from memory.ingest.validate import ID_RE
from memory.store import ops as store_ops
from memory.store.db import Database

REPLY_MODES = ("mention", "mention_or_reply", "off")
# What happens to an extracted fact about a member in a special category
# (health, religion, …): ask the member first, never keep it, or keep it.
SENSITIVE_MODES = ("ask", "never", "store")


@dataclass(frozen=True)
class SettingSpec:
    key: str
    kind: str  # "bool" | "choice" | "text" | "ids"
    default: Any
    help: str
    choices: tuple[str, ...] = ()


GUILD_SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec("memory_enabled", "bool", True, "Ingest and remember this guild's messages."),
    SettingSpec(
        "reply_mode",
        "choice",
        "mention_or_reply",
        "When the bot answers: on mention, on mention or reply to it, or never.",
        REPLY_MODES,
    ),
    SettingSpec("extract_model", "text", None, "Chat model for fact extraction (blank: default)."),
    SettingSpec(
        "embedding_model",
        "text",
        None,
        "Embedding model for this guild (blank: DEFAULT_MEMORY_EMBEDDING_MODEL or provider "
        "default). Changing it starts a re-index.",
    ),
    SettingSpec("excluded_channels", "ids", (), "Channel ids whose messages are never ingested."),
    SettingSpec("ingest_bots", "bool", True, "Ingest messages of other bots."),
    SettingSpec(
        "sensitive_facts",
        "choice",
        "ask",
        "Facts about a member's health, sexuality, religion, politics, ethnicity, finances, "
        "legal matters, address, contact details or age: ask the member first (kept 7 days "
        "for their answer), never keep them, or store them like any fact.",
        SENSITIVE_MODES,
    ),
)
GUILD_SETTINGS_BY_KEY = {s.key: s for s in GUILD_SETTINGS}


@dataclass(frozen=True)
class GuildSettings:
    memory_enabled: bool = True
    reply_mode: str = "mention_or_reply"
    extract_model: str | None = None
    embedding_model: str | None = None
    excluded_channels: frozenset[str] = frozenset()
    ingest_bots: bool = True
    sensitive_facts: str = "ask"


def parse_guild_setting(key: str, raw: str | None) -> str | None:
    """Validate operator input; returns the stored text (None = back to default)."""
    spec = GUILD_SETTINGS_BY_KEY.get(key)
    if spec is None:
        raise InvalidInput(f"unknown setting {key!r}")
    if raw is None or str(raw).strip() == "":
        return None
    value = str(raw).strip()
    if spec.kind == "bool":
        low = value.lower()
        if low in ("1", "true", "on", "yes"):
            return "true"
        if low in ("0", "false", "off", "no"):
            return "false"
        raise InvalidInput(f"{key} must be true or false")
    if spec.kind == "choice":
        if value not in spec.choices:
            raise InvalidInput(f"{key} must be one of {', '.join(spec.choices)}")
        return value
    if spec.kind == "ids":
        ids = [v.strip() for v in value.replace("\n", ",").split(",") if v.strip()]
        bad = [v for v in ids if not ID_RE.match(v)]
        if bad:
            raise InvalidInput(f"{key}: not channel ids: {', '.join(b[:30] for b in bad[:3])}")
        return ",".join(sorted(set(ids)))
    if len(value) > 120:
        raise InvalidInput(f"{key} is too long")
    return value


def resolve(stored: dict[str, str]) -> GuildSettings:
    def flag(key: str, default: bool) -> bool:
        v = stored.get(key)
        return default if v is None else v == "true"

    mode = stored.get("reply_mode", "mention_or_reply")
    return GuildSettings(
        memory_enabled=flag("memory_enabled", True),
        reply_mode=mode if mode in REPLY_MODES else "mention_or_reply",
        extract_model=stored.get("extract_model") or None,
        embedding_model=stored.get("embedding_model") or None,
        excluded_channels=frozenset(
            v for v in (stored.get("excluded_channels") or "").split(",") if v
        ),
        ingest_bots=flag("ingest_bots", True),
        sensitive_facts=(
            stored["sensitive_facts"] if stored.get("sensitive_facts") in SENSITIVE_MODES else "ask"
        ),
    )


class GuildSettingsCache:
    """Resolved settings per guild, read from the database once and dropped
    on every change: a setting applies from the next event without a read per
    event. The engine (ingest checks, operator edits) and the pipeline (the
    guild's extraction model) share one."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._resolved: dict[str, GuildSettings] = {}

    async def get(self, guild_id: str) -> GuildSettings:
        found = self._resolved.get(guild_id)
        if found is None:
            found = resolve(await self._db.read(store_ops.get_guild_settings, guild_id))
            self._resolved[guild_id] = found
        return found

    def invalidate(self, guild_id: str) -> None:
        self._resolved.pop(guild_id, None)
