"""The privacy notice, generated from the live configuration: what is
collected, where it is kept, for how long, who sees what, what a member can
do about it, the sensitive-fact policy, the caps against misuse, and which
model endpoints receive data (none when everything runs offline).

One pure function of a guild's resolved settings and the deployment's
facts (``Deployment``, built by the process from its settings), so the
dashboard's ``/privacy`` page and ``/memory privacy`` in Discord say the same
thing and follow every setting change at once. Items are plain sentences;
commands are marked with backticks (Discord shows them as code, the
dashboard as ``<code>``). Nothing secret goes in: endpoints are named by
host, never with a key or a path; the database by kind, never its location.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from memory.config import MemoryConfig
from memory.guild_settings import GuildSettings, retention_days

OPENAI_HOST = "api.openai.com"
CONSENT_DAYS = 7  # memory.ingest.consent_gate.CONSENT_DAYS (the ground floor cannot import it)


def endpoint_host(base_url: str | None, api_key_only: bool = False) -> str | None:
    """The host a client talks to: the base URL's, OpenAI's for a key without
    one, None for no endpoint. Never the URL's path, user or password."""
    if base_url:
        try:
            parts = urlsplit(base_url.strip())
        except ValueError:
            return "a configured endpoint"
        host = parts.hostname or "a configured endpoint"
        return f"{host}:{parts.port}" if parts.port else host
    return OPENAI_HOST if api_key_only else None


@dataclass(frozen=True)
class Deployment:
    """What the process is made of, as far as a member's data is concerned."""

    storage: str = "sqlite"  # "sqlite" | "postgresql"
    chat_endpoint: str | None = None  # host of the reply model; None: no replies in chat
    extract_endpoint: str | None = None  # host of the extraction model; None: offline rules
    embedding: str = "local"  # "local" | "remote" | "none"
    embedding_endpoint: str | None = None
    voice: bool = False  # transcription is offered (a moderator starts it per channel)
    stt_endpoint: str | None = None  # None with voice: transcribed on this machine
    action_log_days: float = 30.0
    member_budget: int = 80  # current facts per member, unless the guild sets its own

    @property
    def offline(self) -> bool:
        return not (
            self.chat_endpoint
            or self.extract_endpoint
            or self.embedding_endpoint
            or (self.voice and self.stt_endpoint)
        )


def deployment_of(
    config: MemoryConfig,
    *,
    chat: bool,
    llm_extraction: bool,
    voice: bool = False,
    stt_base_url: str | None = None,
    stt_remote: bool = False,
) -> Deployment:
    """``Deployment`` of an engine configuration and what the process adds:
    a chat model (``chat``), the LLM extractor, voice and its transcription
    endpoint (``stt_remote`` with ``stt_base_url`` None: the LLM's)."""
    llm = config.llm
    llm_host = endpoint_host(llm.base_url, api_key_only=bool(llm.api_key))
    remote_embeddings = config.embedding.provider == "openai"
    stt = None
    if voice and stt_remote:
        stt = endpoint_host(stt_base_url) or llm_host
    return Deployment(
        storage="postgresql" if config.database_url else "sqlite",
        chat_endpoint=llm_host if chat and llm.enabled else None,
        extract_endpoint=llm_host if llm_extraction and llm.enabled else None,
        embedding=(
            "none"
            if config.embedding.provider == "none"
            else ("remote" if remote_embeddings else "local")
        ),
        embedding_endpoint=llm_host if remote_embeddings else None,
        voice=voice,
        stt_endpoint=stt,
        action_log_days=config.action_log.keep_days,
        member_budget=config.ingest.keep_facts_per_subject,
    )


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    items: tuple[str, ...]


@dataclass(frozen=True)
class PrivacyNotice:
    guild_name: str | None
    sections: tuple[Section, ...]

    def section(self, key: str) -> Section:
        return next(s for s in self.sections if s.key == key)

    def text(self) -> str:
        """The whole notice as plain text (tests, logs)."""
        return "\n".join(
            f"{s.title}\n" + "\n".join(f"- {i}" for i in s.items) for s in self.sections
        )


def _days(n: int) -> str:
    return "1 day" if n == 1 else f"{n} days"


def _collected(s: GuildSettings, d: Deployment) -> tuple[str, ...]:
    items = []
    if not s.memory_enabled:
        items.append("Memory is turned off in this server: nothing new is stored.")
    items.append(
        "The text of messages in channels the bot can read (threads, forum posts and "
        "voice-channel chats included), with their author, channel and time"
        + (
            f", except in the {len(s.excluded_channels)} channels the moderators excluded."
            if s.excluded_channels
            else "."
        )
    )
    items.append(
        "Other bots' messages are collected too."
        if s.ingest_bots
        else "Other bots' messages are not collected."
    )
    if d.voice:
        items.append(
            "Voice: only while a moderator has the bot transcribe a voice channel "
            "(`/voice join`, announced in the channel); what is said there is transcribed to "
            "text and kept like a message. `/memory voice-opt-out` stops it for you."
        )
    else:
        items.append("Voice: not collected (voice transcription is off on this bot).")
    items += [
        "From messages, short facts about their author (e.g. “Alice lives in Leiden.”) with "
        "a quote of the words they came from, and summaries of past conversations.",
        "Server lore: lines members ask the bot to remember, and pinned messages.",
        "Display names of members and channels, to show who said what where.",
        "Not collected: direct messages, the bot's own messages, reactions, attachments.",
    ]
    return tuple(items)


def _stored(d: Deployment) -> tuple[str, ...]:
    where = (
        "a PostgreSQL database run by the bot's operator"
        if d.storage == "postgresql"
        else "a database file on the bot operator's machine"
    )
    return (
        f"Everything is kept in {where}, per server: no server's memory is ever used in another.",
        "A daily journal of messages and a MEMORY.md summary are kept beside it for the "
        "operator to read.",
        "Nothing is sent anywhere else than the model endpoints listed below.",
    )


def _ttl(s: GuildSettings, key: str, what: str) -> str:
    n = s.number(key)
    return f"{what}: never expire" if n == 0 else f"{what}: expire after {_days(n)} unmentioned"


def _retention(s: GuildSettings, d: Deployment) -> tuple[str, ...]:
    items = [
        "Messages and facts are kept until they expire, are deleted on Discord, or are "
        "forgotten on request. Deleting or editing a message on Discord deletes or updates "
        "the bot's copy at once.",
        "; ".join(
            [
                _ttl(s, "ttl_days_project", "Facts about projects"),
                _ttl(s, "ttl_days_other", "other plain facts"),
                _ttl(s, "ttl_days_episode", "conversation summaries"),
            ]
        )
        + "; profile, preference, relationship facts and lore do not expire.",
    ]
    purge = s.number("purge_after_days")
    items.append(
        "Archived facts are kept (restorable) until forgotten."
        if purge == 0
        else f"Archived facts are deleted for good {_days(purge)} after they were archived."
    )
    items.append(
        f"At most {s.number('budget_member_facts', d.member_budget)} current facts are kept "
        "per member; beyond that the least useful are archived."
    )
    leave = retention_days(s.member_leave_policy)
    items.append(
        f"When a member leaves the server, everything about them is erased "
        f"{_days(leave[1])} later, unless they rejoin."
        if leave is not None
        else "When a member leaves the server, what is kept about them stays until they "
        "ask for it to be forgotten."
    )
    gone = retention_days(s.guild_leave_policy)
    items.append(
        f"If the bot is removed from the server, all of its memory is erased "
        f"{_days(gone[1])} later, unless it is added back."
        if gone is not None
        else "If the bot is removed from the server, its memory is kept (a moderator or the "
        "operator can purge it)."
    )
    keep = d.action_log_days
    items.append(
        "An operations log (what was stored or erased, without message text) is kept for "
        + (f"{_days(int(keep))}." if keep > 0 else "as long as the operator keeps it.")
    )
    return tuple(items)


def _reviewed(s: GuildSettings) -> tuple[str, ...]:
    """What the review queue shows moderators, when the server has one on."""
    if s.review_policy == "off":
        return ()
    which = (
        "Every new memory"
        if s.review_policy == "all"
        else "A new memory the bot is unsure of, one that contradicts a pinned fact or "
        "canon, a correction of someone else's fact, and lore from newer members"
    )
    roles = " or a moderator role" if s.review_moderator_roles else ""
    return (
        f"{which} waits for a moderator before the bot uses it: moderators (Manage "
        f"Server{roles}) see it with the message it came from, and approve, edit or "
        f"reject it; one nobody decides is dropped after {_days(s.review_expire_days)}.",
    )


def _who_sees(s: GuildSettings) -> tuple[str, ...]:
    return (
        "Anyone in the server can ask the bot; its answers use only memory from channels "
        "the asker can read, and in a channel everyone can read, only memory from channels "
        "everyone can read.",
        "A fact learned in a channel is shown only to members who can read that channel — "
        "not even counted for anyone else.",
        "What the bot tells you about yourself (`/memory about-me`, `export-me`, the "
        "answers to corrections) is shown to you alone.",
        "Moderators (Manage Server) can change these settings and forget any member or fact.",
        "The bot's operator can see all of the server's memory on the dashboard.",
        *_reviewed(s),
    )


def _controls() -> tuple[str, ...]:
    return (
        "`/memory about-me`: every fact kept about you, with where it came from and its history.",
        "`/memory export-me`: a copy of everything kept about you and your stored messages.",
        "`/memory correct`, `/memory forget-fact`: change or erase one fact about you; or, on "
        "any message, Apps → “Why do you know this?” / “What did you take from this?” with "
        "the buttons This is wrong and Forget this.",
        "`/memory forget-me`: erase everything about you in this server, optionally also "
        "stopping the bot from remembering you; you get a receipt id listing what was erased.",
        "`/memory opt-out`: from now on nothing you write is stored, journaled, extracted or "
        "embedded here; `/memory opt-in` undoes it.",
        "If you delete your Discord account, the bot's operator can erase you from every "
        "server at once.",
    )


def _sensitive(s: GuildSettings, d: Deployment) -> tuple[str, ...]:
    kinds = (
        "Facts about your health, sexuality, religion, politics, ethnicity, finances, "
        "legal matters, address, contact details or age"
    )
    if s.sensitive_facts == "never":
        return (
            f"{kinds} are never stored. The message they were in is kept like any other "
            "message (searchable, and shown to the chat model when relevant) unless you "
            "delete it or use `/memory forget-me`.",
        )
    if s.sensitive_facts == "store":
        return (f"{kinds} are stored like any other fact, without asking (this server's choice).",)
    if s.sensitive_mode == "review":
        return (
            f"{kinds} are not stored until a moderator approves them in the review queue: "
            "moderators see the fact and the message it came from. The message itself is kept "
            "like any other message meanwhile (searchable).",
            "If a moderator rejects the fact, or nobody decides in "
            f"{_days(s.review_expire_days)}, it is never stored.",
        )
    reading = (
        f" To find such a fact the message is read by the extraction model at {d.extract_endpoint}."
        if d.extract_endpoint
        else " Finding such a fact happens offline on the bot's machine."
    )
    return (
        f"{kinds} are not stored until you agree: the bot asks you once, privately, and "
        f"waits {_days(CONSENT_DAYS)}.",
        "Until you answer, the message the fact came from waits too: it is not searchable, "
        "not shown to the chat model, not summarised and not embedded, and its journal line "
        "says it is withheld." + reading,
        "If you say no, or do not answer in time, the fact is never stored and the bot's "
        "copy of that message's text is deleted. If you say yes, both are kept like any other.",
    )


def _endpoints(d: Deployment) -> tuple[str, ...]:
    if d.offline:
        return (
            "None: everything runs on the bot's machine (offline extraction and embeddings"
            + (", no chat model" if d.chat_endpoint is None else "")
            + "). No message or fact is sent to any model provider.",
        )
    items = []
    items.append(
        f"Replies: the chat model at {d.chat_endpoint} receives the recent messages of the "
        "channel, the question, and the memories used for it."
        if d.chat_endpoint
        else "Replies: no chat model is configured; the bot does not answer in chat."
    )
    items.append(
        f"Fact extraction: messages are sent to {d.extract_endpoint}."
        if d.extract_endpoint
        else "Fact extraction: offline rules on the bot's machine; no message leaves it."
    )
    if d.embedding == "remote":
        items.append(f"Search vectors: messages and facts are sent to {d.embedding_endpoint}.")
    elif d.embedding == "local":
        items.append("Search vectors: computed on the bot's machine.")
    else:
        items.append("Search vectors: none (word search only).")
    if d.voice:
        items.append(
            f"Voice: audio is sent to {d.stt_endpoint} to be transcribed."
            if d.stt_endpoint
            else "Voice: transcribed on the bot's machine."
        )
    return tuple(items)


def _limits(s: GuildSettings) -> tuple[str, ...]:
    others = s.number("daily_cap_facts_about_others")
    lore = s.number("daily_cap_lore_lines")
    if others == 0 and lore == 0:
        return ("No daily limits are set on what members write about others or as lore.",)
    parts = []
    if others:
        parts.append(f"at most {others} fact{'' if others == 1 else 's'} about other members")
    if lore:
        parts.append(f"at most {lore} lore line{'' if lore == 1 else 's'}")
    return (
        "Each member may write " + " and ".join(parts) + " a day; anything beyond is not "
        "stored but held back for moderators to see.",
    )


def privacy_notice(
    settings: GuildSettings | None, deployment: Deployment, *, guild_name: str | None = None
) -> PrivacyNotice:
    """The notice for a guild with ``settings`` on ``deployment`` (None: the
    declared defaults, what a guild gets until its moderators change them)."""
    s, d = settings or GuildSettings(), deployment
    return PrivacyNotice(
        guild_name,
        (
            Section("collected", "What is collected", _collected(s, d)),
            Section("stored", "Where it is kept", _stored(d)),
            Section("retention", "For how long", _retention(s, d)),
            Section("visibility", "Who sees what", _who_sees(s)),
            Section("controls", "What you can do", _controls()),
            Section("sensitive", "Sensitive facts", _sensitive(s, d)),
            Section("limits", "Limits against misuse", _limits(s)),
            Section("endpoints", "Which model endpoints receive data", _endpoints(d)),
        ),
    )
