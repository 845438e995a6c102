"""The per-guild settings as people read them: in groups, with a label, a unit
and words for each choice. The declaration itself (keys, kinds, defaults,
help) is ``memory.guild_settings``; a test holds every declared setting to
exactly one group here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SettingGroup:
    key: str
    title: str
    intro: str
    # (setting key, label, unit of a number: "days", "minutes", … or "")
    settings: tuple[tuple[str, str, str], ...]


SETTING_GROUPS: tuple[SettingGroup, ...] = (
    SettingGroup(
        "memory",
        "Memory",
        "What the bot remembers of this server, and with which models.",
        (
            ("memory_enabled", "Remember this server", ""),
            ("excluded_channels", "Channels never remembered", ""),
            ("ingest_bots", "Remember other bots' messages", ""),
            ("extract_model", "Model that extracts facts", ""),
            ("embedding_model", "Embedding model", ""),
            (
                "episode_idle_minutes",
                "Quiet time before a conversation becomes an episode",
                "minutes",
            ),
            (
                "episode_min_messages",
                "New messages a channel needs for its next episode",
                "messages",
            ),
        ),
    ),
    SettingGroup(
        "replies",
        "Replies",
        "When the bot answers, and which kinds of memory an answer may draw on.",
        (
            ("reply_mode", "When the bot replies", ""),
            ("reply_memory_types", "Memory replies may use", ""),
            ("tool_memory_types", "Memory the model may look up", ""),
            ("api_memory_types", "Memory the search API may return", ""),
        ),
    ),
    SettingGroup(
        "voice",
        "Voice",
        "Answers to what is said in a voice channel the bot transcribes.",
        (
            ("voice_replies", "Answer in voice channels", ""),
            ("voice_wake_words", "Names that address the bot", ""),
            ("voice_memory_types", "Memory voice replies may use", ""),
        ),
    ),
    SettingGroup(
        "privacy",
        "Privacy and retention",
        "Sensitive facts, and what happens to memory when people or the bot leave.",
        (
            ("sensitive_facts", "Sensitive facts (health, religion, address …)", ""),
            ("member_leave_policy", "When a member leaves", ""),
            ("guild_leave_policy", "When the bot is removed from the server", ""),
        ),
    ),
    SettingGroup(
        "moderation",
        "Moderator review and limits",
        "Which new memories wait for a moderator, where they are posted, who decides, and "
        "what one member may write a day about others.",
        (
            ("review_policy", "Memories that wait for a moderator", ""),
            ("review_channel", "Channel where waiting memories are posted", ""),
            ("review_moderator_roles", "Roles that may decide, besides Manage Server", ""),
            ("review_min_confidence", "Flag facts the extractor is less sure of than", "%"),
            ("review_lore_roles", "Roles whose lore is not flagged", ""),
            ("review_lore_min_account_days", "Flag lore from accounts younger than", "days"),
            ("review_expire_days", "A waiting memory is rejected after", "days"),
            (
                "daily_cap_facts_about_others",
                "Facts one member may write about others a day",
                "facts",
            ),
            ("daily_cap_lore_lines", "Lore lines one member may add a day", "lines"),
        ),
    ),
    SettingGroup(
        "budgets",
        "Budgets and expiry",
        "How many current facts are kept and for how long; pinned facts and canon count in "
        "no budget and never expire. Blank: the deployment's default, shown as in force.",
        (
            ("budget_member_facts", "Facts kept per member", "facts"),
            ("budget_lore", "Lore facts kept for the server", "facts"),
            ("budget_channel_episodes", "Episodes kept per channel", "episodes"),
            ("budget_guild_total", "Facts kept for the whole server", "facts"),
            ("ttl_days_project", "A project fact not seen again expires after", "days"),
            ("ttl_days_episode", "An episode expires after", "days"),
            ("ttl_days_other", "A plain fact not seen again expires after", "days"),
            ("purge_after_days", "An archived fact is deleted for good after", "days"),
        ),
    ),
)

# Words for the values of choice and retention settings.
CHOICE_LABELS: dict[str, dict[str, str]] = {
    "reply_mode": {
        "mention": "when mentioned",
        "mention_or_reply": "when mentioned or replied to",
        "off": "never",
    },
    "review_policy": {
        "off": "none: memories are stored at once",
        "flagged": "the flagged ones",
        "all": "every new memory",
    },
    "sensitive_facts": {
        "review": "a moderator decides (with the review queue on)",
        "ask": "ask the member first",
        "never": "never keep them",
        "store": "keep them like any fact",
    },
}
