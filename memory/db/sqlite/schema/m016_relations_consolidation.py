"""Migration m016: revisions, relations, consolidation. Shipped: never edit,
add a new migration instead."""

from __future__ import annotations

from typing import Any


def apply(con: Any) -> None:
    # Every change to memory writes a history row; a trigger on that one
    # table bumps the guild's revision and appends to the change log in the
    # same transaction, whichever write path made the change. A noop, the
    # store's re-observation of the same text (an ``update`` row with the
    # text unchanged and no reason) and a consent question change no memory. The log names
    # facts by id only (no text), so erasing a fact leaves nothing readable;
    # it keeps the newest 1,000 changes of a guild.
    # Relations are undirected edges stored once (a_id < b_id); they go with
    # either fact when it is deleted. A consolidation run keeps the prior
    # image of every row it changed (consolidation_undo) so an undo restores
    # exactly that; a deleted fact's prior images go with it (they hold its
    # text), which leaves that run's undo refused. Fingerprints skip a checked
    # pair for 14 days. An insight names the facts it rests on
    # (insight_citations); insight_runs keeps a member to one run a day.
    con.executescript(
        """
        CREATE TABLE guild_revisions (
            guild_id TEXT PRIMARY KEY,
            rev INTEGER NOT NULL
        );
        CREATE TABLE memory_changes (
            guild_id TEXT NOT NULL,
            rev INTEGER NOT NULL,
            fact_id INTEGER,
            event TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (guild_id, rev)
        ) WITHOUT ROWID;
        CREATE TABLE channel_revisions (
            guild_id TEXT NOT NULL,
            channel_id TEXT NOT NULL,
            rev INTEGER NOT NULL,
            seen_at TEXT NOT NULL,
            PRIMARY KEY (guild_id, channel_id)
        ) WITHOUT ROWID;
        CREATE TRIGGER fact_history_revision AFTER INSERT ON fact_history WHEN NEW.event NOT IN ('noop', 'consent_asked') AND NOT (NEW.event = 'update' AND NEW.old_text IS NEW.new_text AND NEW.reason IS NULL) BEGIN
            INSERT INTO guild_revisions (guild_id, rev) VALUES (NEW.guild_id, 1) ON CONFLICT (guild_id) DO UPDATE SET rev = rev + 1;
            INSERT INTO memory_changes (guild_id, rev, fact_id, event, created_at) VALUES (NEW.guild_id, (SELECT rev FROM guild_revisions WHERE guild_id = NEW.guild_id), NEW.fact_id, NEW.event, NEW.created_at);
            DELETE FROM memory_changes WHERE guild_id = NEW.guild_id AND rev <= (SELECT rev FROM guild_revisions WHERE guild_id = NEW.guild_id) - 1000;
        END;
        CREATE TABLE fact_relations (
            a_id INTEGER NOT NULL,
            b_id INTEGER NOT NULL,
            guild_id TEXT NOT NULL,
            strength REAL NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (a_id, b_id),
            CHECK (a_id < b_id)
        ) WITHOUT ROWID;
        CREATE INDEX fact_relations_b ON fact_relations (b_id, a_id);
        CREATE TRIGGER fact_relations_fact_deleted AFTER DELETE ON memory_facts BEGIN
            DELETE FROM fact_relations WHERE a_id = OLD.id OR b_id = OLD.id;
        END;
        CREATE TABLE consolidation_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            guild_id TEXT NOT NULL,
            mode TEXT NOT NULL,
            dry_run INTEGER NOT NULL,
            report TEXT NOT NULL,
            started_at TEXT NOT NULL,
            undone_at TEXT
        );
        CREATE INDEX consolidation_runs_guild ON consolidation_runs (guild_id, id);
        CREATE TABLE consolidation_undo (
            run_id INTEGER NOT NULL REFERENCES consolidation_runs (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            table_name TEXT NOT NULL,
            row_key TEXT NOT NULL,
            before TEXT,
            PRIMARY KEY (run_id, seq)
        );
        CREATE INDEX consolidation_undo_row ON consolidation_undo (table_name, row_key);
        CREATE TRIGGER consolidation_undo_fact_deleted AFTER DELETE ON memory_facts BEGIN
            DELETE FROM consolidation_undo WHERE table_name = 'memory_facts' AND row_key = CAST(OLD.id AS TEXT);
        END;
        CREATE TABLE insight_runs (
            guild_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            ran_at TEXT NOT NULL,
            PRIMARY KEY (guild_id, user_id)
        ) WITHOUT ROWID;
        CREATE TABLE insight_citations (
            insight_id INTEGER NOT NULL,
            fact_id INTEGER NOT NULL,
            PRIMARY KEY (insight_id, fact_id)
        ) WITHOUT ROWID;
        CREATE INDEX insight_citations_fact ON insight_citations (fact_id);
        CREATE TRIGGER insight_citations_fact_deleted AFTER DELETE ON memory_facts BEGIN
            DELETE FROM insight_citations WHERE insight_id = OLD.id OR fact_id = OLD.id;
        END;
        CREATE TABLE consolidation_fingerprints (
            guild_id TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            verdict TEXT NOT NULL,
            checked_at TEXT NOT NULL,
            PRIMARY KEY (guild_id, fingerprint)
        ) WITHOUT ROWID;
        """
    )
