"""Migration m023: members in control (issue 31) — memory opt-outs, deletion
receipts, the per-author daily write caps, and messages withheld while their
author decides about a sensitive fact. Portable SQL: the same step runs on
PostgreSQL (``p008_trust``, with BIGINT for INTEGER). Shipped: never edit, add a new migration instead."""

from __future__ import annotations

from typing import Any

STATEMENTS = (
    # A member who asked not to be remembered in a guild from ``since`` on.
    # Consent, not memory: forget and a guild purge keep it.
    "CREATE TABLE IF NOT EXISTS member_opt_outs ("
    "guild_id TEXT NOT NULL, user_id TEXT NOT NULL, since TEXT NOT NULL, "
    "PRIMARY KEY (guild_id, user_id))",
    # What an erase removed, as counts per kind, under an id the member is
    # given: never any erased text. ``guild_id`` is null for an erase across
    # every guild. Kept by a guild purge: it is the proof of the erase.
    "CREATE TABLE IF NOT EXISTS deletion_receipts ("
    "id TEXT PRIMARY KEY, guild_id TEXT, user_id TEXT NOT NULL, scope TEXT NOT NULL, "
    "actor TEXT NOT NULL, counts TEXT NOT NULL, created_at TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS deletion_receipts_user ON deletion_receipts (user_id, created_at)",
    # How many writes of a kind (facts about other members, lore lines) an
    # author made on a UTC day: the poisoning caps count here.
    "CREATE TABLE IF NOT EXISTS write_quota ("
    "guild_id TEXT NOT NULL, author_id TEXT NOT NULL, kind TEXT NOT NULL, day TEXT NOT NULL, "
    "used INTEGER NOT NULL, PRIMARY KEY (guild_id, author_id, kind, day))",
    # A message whose sensitive fact waits for its author's consent: its text
    # is taken out of ``messages`` (so no search, reply window, episode or
    # journal rendering sees it) and kept here until the author decides.
    "CREATE TABLE IF NOT EXISTS held_messages ("
    "guild_id TEXT NOT NULL, message_id TEXT NOT NULL, user_id TEXT NOT NULL, "
    "content TEXT NOT NULL, refused INTEGER NOT NULL DEFAULT 0, since TEXT NOT NULL, "
    "PRIMARY KEY (guild_id, message_id))",
    "CREATE INDEX IF NOT EXISTS held_messages_user ON held_messages (guild_id, user_id)",
)


def apply(con: Any) -> None:
    for sql in STATEMENTS:
        con.execute(sql)
