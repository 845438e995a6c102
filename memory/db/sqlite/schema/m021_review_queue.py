"""Migration m021: the moderators' review queue.
Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any

# Statements both backends run as they are (the PostgreSQL step p007 adds
# the identity column and its own triggers around them).
INDEXES: tuple[str, ...] = (
    # One pending item per text about a subject: the same claim said twice
    # waits once.
    "CREATE UNIQUE INDEX review_pending_text ON review_queue (guild_id, subject, fact) "
    "WHERE state = 'pending'",
    "CREATE INDEX review_guild_state ON review_queue (guild_id, state, id)",
    "CREATE INDEX review_expiry ON review_queue (expires_at) WHERE state = 'pending'",
    "CREATE INDEX review_source ON review_queue (guild_id, source_message_id)",
)

# An item whose source message is deleted or edited is withdrawn: deleted
# when no review message shows it, else kept without its text until the bot
# has updated that message (state ``decided``, outcome ``withdrawn``).
WITHDRAW_UNPOSTED = (
    "DELETE FROM review_queue WHERE guild_id = {old}.guild_id "
    "AND source_message_id = {old}.id AND state = 'pending' AND post_message_id IS NULL;"
)
WITHDRAW_POSTED = (
    "UPDATE review_queue SET state = 'decided', outcome = 'withdrawn', fact = '', "
    "evidence_text = NULL, source_message_id = NULL, note = 'its message was deleted or edited' "
    "WHERE guild_id = {old}.guild_id AND source_message_id = {old}.id AND state = 'pending';"
)


def apply(con: Any) -> None:
    # review_queue: a memory waiting for a moderator (guild setting
    # review_policy). It is not a fact until approved, so no read path of the
    # facts (search, prompt slices, MEMORY.md, about-me, export) can show it.
    # kind: fact (extracted from a member's message), lore (a lore line), or
    # correction (a member's new text for someone else's fact,
    # target_fact_id). flags: JSON list of [code, words] saying why it waits.
    # A decided row stays only while a review message still shows it
    # (post_message_id), for the bot to update; then it is deleted.
    con.executescript(
        """
        CREATE TABLE review_queue (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            guild_id TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('fact', 'lore', 'correction')),
            subject TEXT NOT NULL,
            author_id TEXT,
            channel_id TEXT,
            source_message_id TEXT,
            fact TEXT NOT NULL,
            fact_type TEXT NOT NULL,
            evidence_text TEXT,
            confidence REAL NOT NULL,
            observed_at TEXT,
            target_fact_id INTEGER,
            flags TEXT NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'decided')),
            outcome TEXT,
            decided_by TEXT,
            decided_at TEXT,
            note TEXT,
            result_fact_id INTEGER,
            created_at TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            post_channel_id TEXT,
            post_message_id TEXT
        );
        """
    )
    for statement in INDEXES:
        con.execute(statement)
    for name, event in (
        ("review_message_deleted", "AFTER DELETE ON messages"),
        ("review_message_edited", "AFTER UPDATE OF content ON messages"),
    ):
        con.execute(
            f"CREATE TRIGGER {name} {event} BEGIN\n"
            f"    {WITHDRAW_UNPOSTED.format(old='old')}\n"
            f"    {WITHDRAW_POSTED.format(old='old')}\n"
            "END"
        )
