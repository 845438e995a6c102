"""Migration p001, part 3: the triggers that keep side tables in step (every
SQLite trigger but the full-text ones, which live with their tables in
``p001_fts``). Shipped: never edit, add a new migration instead.

Each is a PL/pgSQL function plus a row trigger of the SQLite trigger's name,
on the same event with the same WHEN condition, doing the same statements.
"""

from __future__ import annotations


def _trigger(name: str, event: str, body: str, when: str = "") -> tuple[str, str]:
    """The function and the trigger for one SQLite trigger ``name``."""
    function = (
        f"CREATE FUNCTION guildlore_{name}() RETURNS trigger LANGUAGE plpgsql AS $fn$\n"
        f"BEGIN\n{body}\nRETURN NULL;\nEND\n$fn$"
    )
    condition = f" WHEN ({when})" if when else ""
    trigger = (
        f"CREATE TRIGGER {name} {event} FOR EACH ROW{condition} EXECUTE FUNCTION guildlore_{name}()"
    )
    return function, trigger


# The change log: every history row that changes memory bumps the guild's
# revision and is logged under it; the log keeps a guild's newest 1,000.
_FACT_HISTORY_REVISION = _trigger(
    "fact_history_revision",
    "AFTER INSERT ON fact_history",
    """
    DECLARE
        current_rev BIGINT;
    BEGIN
        INSERT INTO guild_revisions (guild_id, rev) VALUES (NEW.guild_id, 1)
        ON CONFLICT (guild_id) DO UPDATE SET rev = guild_revisions.rev + 1
        RETURNING rev INTO current_rev;
        INSERT INTO memory_changes (guild_id, rev, fact_id, event, created_at)
        VALUES (NEW.guild_id, current_rev, NEW.fact_id, NEW.event, NEW.created_at);
        DELETE FROM memory_changes WHERE guild_id = NEW.guild_id AND rev <= current_rev - 1000;
    END;""",
    when=(
        "NEW.event NOT IN ('noop', 'consent_asked') AND NOT (NEW.event = 'update' "
        "AND NEW.old_text IS NOT DISTINCT FROM NEW.new_text AND NEW.reason IS NULL)"
    ),
)

_TRIGGERS: tuple[tuple[str, str], ...] = (
    # m007: a fact's sources go with the fact, and with the message.
    _trigger(
        "fact_sources_fact_deleted",
        "AFTER DELETE ON memory_facts",
        "DELETE FROM fact_sources WHERE fact_id = OLD.id;",
    ),
    _trigger(
        "fact_sources_message_deleted",
        "AFTER DELETE ON messages",
        "DELETE FROM fact_sources WHERE guild_id = OLD.guild_id AND message_id = OLD.id;",
    ),
    # m011: a pending consent question goes with its message, deleted or edited.
    _trigger(
        "consent_message_deleted",
        "AFTER DELETE ON messages",
        "DELETE FROM consent_queue WHERE guild_id = OLD.guild_id AND message_id = OLD.id;",
    ),
    _trigger(
        "consent_message_edited",
        "AFTER UPDATE OF content ON messages",
        "DELETE FROM consent_queue WHERE guild_id = OLD.guild_id AND message_id = OLD.id;",
    ),
    _trigger(
        "canon_pins_fact_deleted",
        "AFTER DELETE ON memory_facts",
        "DELETE FROM canon_pins WHERE fact_id = OLD.id;",
    ),
    # m014
    _trigger(
        "episodes_fact_deleted",
        "AFTER DELETE ON memory_facts",
        "DELETE FROM episodes WHERE fact_id = OLD.id;",
        when="OLD.fact_type = 'episode'",
    ),
    # m015: pins go with their fact; archived_at follows is_active.
    _trigger(
        "memory_pins_fact_deleted",
        "AFTER DELETE ON memory_facts",
        "DELETE FROM memory_pins WHERE fact_id = OLD.id;",
    ),
    _trigger(
        "facts_archived_at",
        "AFTER UPDATE OF is_active ON memory_facts",
        "UPDATE memory_facts SET archived_at = NEW.updated_at WHERE id = NEW.id;",
        when="NEW.is_active = 0 AND OLD.is_active = 1",
    ),
    _trigger(
        "facts_restored_at",
        "AFTER UPDATE OF is_active ON memory_facts",
        "UPDATE memory_facts SET archived_at = NULL WHERE id = NEW.id;",
        when="NEW.is_active = 1 AND OLD.is_active = 0",
    ),
    # m016
    _FACT_HISTORY_REVISION,
    _trigger(
        "fact_relations_fact_deleted",
        "AFTER DELETE ON memory_facts",
        "DELETE FROM fact_relations WHERE a_id = OLD.id OR b_id = OLD.id;",
    ),
    _trigger(
        "consolidation_undo_fact_deleted",
        "AFTER DELETE ON memory_facts",
        "DELETE FROM consolidation_undo WHERE table_name = 'memory_facts' "
        "AND row_key = CAST(OLD.id AS TEXT);",
    ),
    _trigger(
        "insight_citations_fact_deleted",
        "AFTER DELETE ON memory_facts",
        "DELETE FROM insight_citations WHERE insight_id = OLD.id OR fact_id = OLD.id;",
    ),
)

STATEMENTS: tuple[str, ...] = tuple(sql for pair in _TRIGGERS for sql in pair)
