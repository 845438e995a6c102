"""Per-guild runtime settings: declared once, stored in ``guild_settings``,
applied without restart (the bot reads them per event; the dashboard edits them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory.db.changes import Change, ExternalCommit, SettingsChanged
from memory.db.core import Database
from memory.errors import InvalidInput
from memory.memory_types import DEFAULT_ALLOWLISTS, parse_types
from memory.models import ID_RE
from memory.store import ops as store_ops

REPLY_MODES = ("mention", "mention_or_reply", "off")
# A retention policy: "keep", or "<action>:<N>d" (the action N days after
# the member left / the bot was removed; 0d: at once).
KEEP = "keep"
RETENTION_MAX_DAYS = 3650
_RETENTION = re.compile(r"^(?P<action>[a-z]+)\s*:\s*(?P<days>\d{1,5})\s*d?$")
# What happens to an extracted fact about a member in a special category
# (health, religion, …): ask the member first, never keep it, keep it, or
# let a moderator decide (the review queue; "ask" while review is off).
SENSITIVE_MODES = ("ask", "never", "store", "review")
# Which new memories wait for a moderator: none, the flagged ones, all.
REVIEW_POLICIES = ("off", "flagged", "all")


@dataclass(frozen=True)
class SettingSpec:
    key: str
    kind: str  # "bool" | "choice" | "text" | "ids" | "types" | "retention" (choices: the action)
    # | "int" (limits: the smallest and largest value) | "channel" (one channel id)
    # | "roles" (role ids)
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    limits: tuple[int, int] = (0, 0)


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
        "default; local:multilingual-e5-small-q4 for guilds that do not talk in English). "
        "Changing it starts a re-index.",
    ),
    SettingSpec("excluded_channels", "ids", (), "Channel ids whose messages are never ingested."),
    SettingSpec("ingest_bots", "bool", True, "Ingest messages of other bots."),
    SettingSpec(
        "voice_replies",
        "bool",
        False,
        "Answer voice utterances that address the bot by name, in the voice channel's "
        "text chat (while it transcribes that channel).",
    ),
    SettingSpec(
        "voice_wake_words",
        "text",
        None,
        "Comma-separated names that address the bot in voice (blank: its server nickname "
        "and user name).",
    ),
    SettingSpec(
        "reply_memory_types",
        "types",
        DEFAULT_ALLOWLISTS["replies"],
        "Memory types replies may use (facts, lore, episodes, procedures, insights).",
    ),
    SettingSpec(
        "voice_memory_types",
        "types",
        DEFAULT_ALLOWLISTS["voice"],
        "Memory types voice replies may use.",
    ),
    SettingSpec(
        "tool_memory_types",
        "types",
        DEFAULT_ALLOWLISTS["tool"],
        "Memory types the model's memory_query tool may return (within the reply's own list).",
    ),
    SettingSpec(
        "api_memory_types",
        "types",
        DEFAULT_ALLOWLISTS["api"],
        "Memory types the dashboard's public search API may return.",
    ),
    SettingSpec(
        "member_leave_policy",
        "retention",
        KEEP,
        "When a member leaves: keep what is remembered about them, or forget:30d (erase it "
        "30 days later unless they rejoin first).",
        ("forget",),
    ),
    SettingSpec(
        "guild_leave_policy",
        "retention",
        KEEP,
        "When the bot is removed from this server: keep its memory, or purge:30d (erase all "
        "of it 30 days later unless the bot is added back first).",
        ("purge",),
    ),
    SettingSpec(
        "sensitive_facts",
        "choice",
        "ask",
        "Facts about a member's health, sexuality, religion, politics, ethnicity, finances, "
        "legal matters, address, contact details or age: ask the member first (kept 7 days "
        "for their answer), never keep them, store them like any fact, or review: a "
        "moderator decides in the review queue and sees the text (ask while review_policy "
        "is off).",
        SENSITIVE_MODES,
    ),
    SettingSpec(
        "episode_idle_minutes",
        "int",
        30,
        "Minutes a channel must be quiet before its conversation is summarised as an episode.",
        limits=(1, 10080),
    ),
    SettingSpec(
        "episode_min_messages",
        "int",
        6,
        "New messages a channel needs since its last episode before it gets another.",
        limits=(2, 1000),
    ),
)
# Budgets (current facts a scope keeps; pinned facts and canon do not count),
# expiry (days without a new observation before a fact of that type is
# archived; 0: never) and the purge of archived facts (0: never). A budget
# left blank takes the deployment's default (IngestConfig).
INT_MAX = 1_000_000
BUDGET_SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec(
        "budget_member_facts", "int", 80, "Current facts kept per member.", limits=(1, INT_MAX)
    ),
    SettingSpec(
        "budget_lore", "int", 120, "Current lore facts kept for the server.", limits=(1, INT_MAX)
    ),
    SettingSpec(
        "budget_channel_episodes", "int", 50, "Episodes kept per channel.", limits=(1, INT_MAX)
    ),
    SettingSpec(
        "budget_guild_total",
        "int",
        20_000,
        "Current facts kept for the whole server.",
        limits=(1, INT_MAX),
    ),
    SettingSpec(
        "ttl_days_project",
        "int",
        180,
        "Days before an unobserved project fact expires (0: never).",
        limits=(0, INT_MAX),
    ),
    SettingSpec(
        "ttl_days_episode",
        "int",
        180,
        "Days before an episode expires (0: never).",
        limits=(0, INT_MAX),
    ),
    SettingSpec(
        "ttl_days_other",
        "int",
        365,
        "Days before an unobserved plain fact expires (0: never).",
        limits=(0, INT_MAX),
    ),
    SettingSpec(
        "purge_after_days",
        "int",
        365,
        "Days an archived fact stays restorable before it is deleted for good (0: never).",
        limits=(0, INT_MAX),
    ),
)
# The moderators' review queue (memory/roles/review.py): off by default, so
# nothing changes for a guild that does not ask for it.
REVIEW_SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec(
        "review_policy",
        "choice",
        "off",
        "Which new memories wait for a moderator before any reply, search or MEMORY.md "
        "uses them: off, flagged (low confidence, near-misses of the safety checks, "
        "contradictions of pinned facts or canon, corrections of someone else's fact, "
        "lore from members below review_lore_roles or review_lore_min_account_days, "
        "sensitive facts under sensitive_facts = review) or all.",
        REVIEW_POLICIES,
    ),
    SettingSpec(
        "review_channel",
        "channel",
        None,
        "Channel id where each waiting memory is posted with Approve, Reject, Edit and "
        "Merge buttons; keep it to moderators (blank: the dashboard's review page only).",
    ),
    SettingSpec(
        "review_moderator_roles",
        "roles",
        (),
        "Role ids whose members may decide review items, besides Manage Server.",
    ),
    SettingSpec(
        "review_min_confidence",
        "int",
        50,
        "Flag a fact the extractor is less sure of than this many percent.",
        limits=(0, 100),
    ),
    SettingSpec(
        "review_lore_roles",
        "roles",
        (),
        "Flag lore from members who have none of these role ids (blank: no role needed).",
    ),
    SettingSpec(
        "review_lore_min_account_days",
        "int",
        0,
        "Flag lore from Discord accounts younger than this many days (0: no check).",
        limits=(0, 3650),
    ),
    SettingSpec(
        "review_expire_days",
        "int",
        7,
        "Days an item waits for a decision; then it is rejected: not stored, its text deleted.",
        limits=(1, 90),
    ),
)
# Poisoning limits (memory/ingest/write_caps.py): what one author may write
# a day that is not about themself; beyond it a write is held back and shown
# to moderators in the action log. 0: no cap.
CAP_SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec(
        "daily_cap_facts_about_others",
        "int",
        5,
        "Facts one member may write about other members a day (e.g. correcting their "
        "facts); more are held back for moderators (0: no cap).",
        limits=(0, 10_000),
    ),
    SettingSpec(
        "daily_cap_lore_lines",
        "int",
        20,
        "Lore lines one member may add a day (/memory remember, or asking the bot to "
        "remember); more are held back for moderators (0: no cap).",
        limits=(0, 10_000),
    ),
)
GUILD_SETTINGS = GUILD_SETTINGS + BUDGET_SETTINGS + REVIEW_SETTINGS + CAP_SETTINGS
GUILD_SETTINGS_BY_KEY = {s.key: s for s in GUILD_SETTINGS}


@dataclass(frozen=True)
class GuildSettings:
    memory_enabled: bool = True
    reply_mode: str = "mention_or_reply"
    extract_model: str | None = None
    embedding_model: str | None = None
    excluded_channels: frozenset[str] = frozenset()
    ingest_bots: bool = True
    voice_replies: bool = False
    voice_wake_words: tuple[str, ...] = ()
    reply_memory_types: frozenset[str] = DEFAULT_ALLOWLISTS["replies"]
    voice_memory_types: frozenset[str] = DEFAULT_ALLOWLISTS["voice"]
    tool_memory_types: frozenset[str] = DEFAULT_ALLOWLISTS["tool"]
    api_memory_types: frozenset[str] = DEFAULT_ALLOWLISTS["api"]
    member_leave_policy: str = KEEP
    guild_leave_policy: str = KEEP
    sensitive_facts: str = "ask"
    episode_idle_minutes: int = 30
    episode_min_messages: int = 6
    # Budgets and day counts; None: not set here (the deployment's default).
    budget_member_facts: int | None = None
    budget_lore: int | None = None
    budget_channel_episodes: int | None = None
    budget_guild_total: int | None = None
    ttl_days_project: int | None = None
    ttl_days_episode: int | None = None
    ttl_days_other: int | None = None
    purge_after_days: int | None = None
    review_policy: str = "off"
    review_channel: str | None = None
    review_moderator_roles: frozenset[str] = frozenset()
    review_min_confidence: int = 50
    review_lore_roles: frozenset[str] = frozenset()
    review_lore_min_account_days: int = 0
    review_expire_days: int = 7
    daily_cap_facts_about_others: int = 5
    daily_cap_lore_lines: int = 20

    @property
    def sensitive_mode(self) -> str:
        """``sensitive_facts`` as it applies: moderators can only decide
        while the review queue is on; until then the member is asked."""
        if self.sensitive_facts == "review" and self.review_policy == "off":
            return "ask"
        return self.sensitive_facts

    def number(self, key: str, default: int | None = None) -> int:
        """An int setting: the guild's value, else ``default``, else the declared one."""
        found = getattr(self, key)
        if isinstance(found, int):
            return found
        return default if default is not None else int(GUILD_SETTINGS_BY_KEY[key].default)

    def allowed_types(self, consumer: str) -> frozenset[str]:
        """The memory types ``consumer`` (replies, voice, tool, api) may see."""
        lists = {
            "replies": self.reply_memory_types,
            "voice": self.voice_memory_types,
            "tool": self.tool_memory_types,
            "api": self.api_memory_types,
        }
        if consumer not in lists:
            raise InvalidInput(f"unknown memory consumer {consumer!r}")
        return lists[consumer]


def wake_words(raw: str | None) -> tuple[str, ...]:
    """The comma-separated wake words of a setting, trimmed, blanks and repeats dropped."""
    words = (" ".join(w.split()) for w in (raw or "").split(","))
    return tuple(dict.fromkeys(w for w in words if w))


def retention_days(policy: str) -> tuple[str, int] | None:
    """(action, days) of a stored policy; None for ``keep``."""
    m = _RETENTION.match(policy.strip().lower())
    if m is None:
        return None
    return m["action"], int(m["days"])


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
    if spec.kind == "retention":
        low = value.lower()
        if low == KEEP:
            return KEEP
        m = _RETENTION.match(low)
        if m is None or m["action"] not in spec.choices:
            raise InvalidInput(f"{key} must be {KEEP} or {spec.choices[0]}:<days>d, e.g. 30d")
        days = int(m["days"])
        if days > RETENTION_MAX_DAYS:
            raise InvalidInput(f"{key}: at most {RETENTION_MAX_DAYS} days")
        return f"{m['action']}:{days}d"
    if spec.kind == "int":
        lo, hi = spec.limits
        try:
            number = int(value)
        except ValueError:
            raise InvalidInput(f"{key} must be a whole number") from None
        if not lo <= number <= hi:
            raise InvalidInput(f"{key} must be between {lo} and {hi}")
        return str(number)
    if spec.kind in ("ids", "roles"):
        ids = [v.strip() for v in value.replace("\n", ",").split(",") if v.strip()]
        bad = [v for v in ids if not ID_RE.match(v)]
        what = "role" if spec.kind == "roles" else "channel"
        if bad:
            raise InvalidInput(f"{key}: not {what} ids: {', '.join(b[:30] for b in bad[:3])}")
        return ",".join(sorted(set(ids)))
    if spec.kind == "channel":
        if not ID_RE.match(value):
            raise InvalidInput(f"{key}: not a channel id: {value[:30]}")
        return value
    if spec.kind == "types":
        # "none" is an empty list: the consumer gets no facts of any type.
        if value.lower() == "none":
            return "none"
        chosen = parse_types(value.replace("\n", ",").split(","))
        return ",".join(sorted(chosen)) if chosen else "none"
    if len(value) > 120:
        raise InvalidInput(f"{key} is too long")
    if key == "voice_wake_words":
        words = wake_words(value)
        if not words:
            raise InvalidInput(f"{key}: give at least one name, separated by commas")
        return ", ".join(words)
    return value


def resolve(stored: dict[str, str]) -> GuildSettings:
    def flag(key: str, default: bool) -> bool:
        v = stored.get(key)
        return default if v is None else v == "true"

    def types(key: str, consumer: str) -> frozenset[str]:
        v = stored.get(key)
        if v is None:
            return DEFAULT_ALLOWLISTS[consumer]
        if v == "none":
            return frozenset()
        try:
            return parse_types(v.split(","))
        except InvalidInput:
            # Written by a newer or older version: the safe reading is the default.
            return DEFAULT_ALLOWLISTS[consumer]

    def number(key: str) -> int:
        spec = GUILD_SETTINGS_BY_KEY[key]
        try:
            value = int(stored.get(key) or spec.default)
        except ValueError:
            return int(spec.default)
        lo, hi = spec.limits
        return min(max(value, lo), hi)

    def ids(key: str) -> frozenset[str]:
        return frozenset(v for v in (stored.get(key) or "").split(",") if v)

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
        voice_replies=flag("voice_replies", False),
        voice_wake_words=wake_words(stored.get("voice_wake_words")),
        reply_memory_types=types("reply_memory_types", "replies"),
        voice_memory_types=types("voice_memory_types", "voice"),
        tool_memory_types=types("tool_memory_types", "tool"),
        api_memory_types=types("api_memory_types", "api"),
        member_leave_policy=stored.get("member_leave_policy") or KEEP,
        guild_leave_policy=stored.get("guild_leave_policy") or KEEP,
        sensitive_facts=(
            stored["sensitive_facts"] if stored.get("sensitive_facts") in SENSITIVE_MODES else "ask"
        ),
        **{
            s.key: int(stored[s.key])
            for s in BUDGET_SETTINGS
            if (stored.get(s.key) or "").isdigit()
        },
        episode_idle_minutes=number("episode_idle_minutes"),
        episode_min_messages=number("episode_min_messages"),
        review_policy=(
            stored["review_policy"] if stored.get("review_policy") in REVIEW_POLICIES else "off"
        ),
        review_channel=stored.get("review_channel") or None,
        review_moderator_roles=ids("review_moderator_roles"),
        review_min_confidence=number("review_min_confidence"),
        review_lore_roles=ids("review_lore_roles"),
        review_lore_min_account_days=number("review_lore_min_account_days"),
        review_expire_days=number("review_expire_days"),
        **{s.key: number(s.key) for s in CAP_SETTINGS},
    )


class GuildSettingsCache:
    """Resolved settings per guild, read from the database once and dropped
    on every change: a setting applies from the next event without a read per
    event. The engine (ingest checks, operator edits) and the pipeline (the
    guild's extraction model) share one.

    Another process on the same database (a dashboard process, a bot process
    holding other shards) changes settings without this process's calls:
    when the database learns of another connection's commit, the guilds it
    changed are dropped (all of them when the database cannot tell which:
    SQLite notices a commit, not what it did)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._resolved: dict[str, GuildSettings] = {}
        # Bumped by every drop, from whichever thread noticed the commit: a
        # read that started before a drop must not store what it read.
        self._generation = 0
        db.subscribe(self._changed)

    async def get(self, guild_id: str) -> GuildSettings:
        found = self._resolved.get(guild_id)
        if found is None:
            generation = self._generation
            found = resolve(await self._db.read(store_ops.get_guild_settings, guild_id))
            if generation == self._generation:
                self._resolved[guild_id] = found
        return found

    def invalidate(self, guild_id: str) -> None:
        self._resolved.pop(guild_id, None)

    def _changed(self, changes: Sequence[Change]) -> None:
        """Drop what a committed transaction changed (a database subscriber):
        the guilds it names, or everything when it cannot say."""
        drop: set[str] | None = set()
        for change in changes:
            if isinstance(change, SettingsChanged) and drop is not None:
                drop.add(change.guild_id)
            elif isinstance(change, ExternalCommit):
                if change.settings_guilds is None:
                    drop = None
                elif drop is not None:
                    drop.update(change.settings_guilds)
        if drop is None:
            self._generation += 1
            self._resolved = {}
        elif drop:
            self._generation += 1
            self._resolved = {g: v for g, v in self._resolved.items() if g not in drop}
