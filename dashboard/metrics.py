"""``/metrics`` in the Prometheus text exposition format (version 0.0.4), a pure function."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from memory import USAGE_SERIES

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PREFIX = "guildlore_"

# counters() key → (metric name, type, help). Keys not listed are exported as gauges.
_COUNTERS: dict[str, tuple[str, str, str]] = {
    "queue_depth": ("ingest_queue_depth", "gauge", "Jobs waiting in the ingest queue."),
    "queue_in_flight": ("ingest_in_flight", "gauge", "Jobs being processed."),
    "queue_capacity": ("ingest_queue_capacity", "gauge", "Ingest queue capacity."),
    "ingest_accepted": ("ingest_accepted_total", "counter", "Messages accepted for ingest."),
    "ingest_duplicates": ("ingest_duplicates_total", "counter", "Duplicate ingests (no-ops)."),
    "ingest_rejected": ("ingest_rejected_total", "counter", "Messages refused at ingest."),
    "ingest_dropped": ("ingest_dropped_total", "counter", "Jobs dropped by queue overflow."),
    "ingest_processed": ("ingest_processed_total", "counter", "Messages processed."),
    "ingest_replayed": ("ingest_replayed_total", "counter", "Unfinished messages replayed."),
    "ingest_failed_batches": ("ingest_failed_batches_total", "counter", "Failed batches."),
    "extract_calls": ("extract_calls_total", "counter", "Extraction calls."),
    "extract_errors": ("extract_errors_total", "counter", "Extraction failures."),
    "extract_ms_avg": ("extract_latency_ms_avg", "gauge", "Mean extraction latency (ms)."),
    "facts_added": ("facts_added_total", "counter", "Facts added."),
    "facts_updated": ("facts_updated_total", "counter", "Facts updated."),
    "decision_adds": ("decision_adds_total", "counter", "Write decisions: new facts."),
    "decision_noops": (
        "decision_noops_total",
        "counter",
        "Write decisions: paraphrases of a current fact (no new row).",
    ),
    "decision_updates": (
        "decision_updates_total",
        "counter",
        "Write decisions: a current fact took more specific text.",
    ),
    "decision_supersedes": (
        "decision_supersedes_total",
        "counter",
        "Write decisions: a contradiction closed a current fact.",
    ),
    "decision_llm_calls": (
        "decision_llm_calls_total",
        "counter",
        "LLM write-decision calls (one per batch with facts to compare).",
    ),
    "decision_llm_errors": (
        "decision_llm_errors_total",
        "counter",
        "LLM write-decision calls that failed (the offline rules decided the batch).",
    ),
    "decision_llm_fallbacks": (
        "decision_llm_fallbacks_total",
        "counter",
        "Candidates the offline rules decided because the LLM's decision failed or was unusable.",
    ),
    "guard_refused": (
        "guard_refused_total",
        "counter",
        "Candidates the injection and secret checks refused.",
    ),
    "sensitive_queued": (
        "sensitive_queued_total",
        "counter",
        "Sensitive facts queued for the member's consent (sensitive_facts = ask).",
    ),
    "sensitive_dropped": (
        "sensitive_dropped_total",
        "counter",
        "Sensitive facts dropped (sensitive_facts = never).",
    ),
    "sensitive_stored": (
        "sensitive_stored_total",
        "counter",
        "Sensitive facts stored without asking (sensitive_facts = store).",
    ),
    "candidates_rejected": (
        "candidates_rejected_total",
        "counter",
        "Candidates the guards refused.",
    ),
    "review_queued": (
        "review_queued_total",
        "counter",
        "Memories the write path held for a moderator (review_policy).",
    ),
    "journal_errors": ("journal_errors_total", "counter", "Journal write failures."),
    "ingest_retries_scheduled": (
        "ingest_retries_scheduled_total",
        "counter",
        "Failed processing attempts that wait for a retry.",
    ),
    "ingest_failed": (
        "ingest_failed_total",
        "counter",
        "Messages marked failed (given up, or unprocessable).",
    ),
    "embedding_calls": ("embedding_calls_total", "counter", "Embedding calls."),
    "embedding_errors": ("embedding_errors_total", "counter", "Embedding failures."),
    "embedding_backlog": ("embedding_backlog", "gauge", "Facts and messages awaiting vectors."),
    "snapshot_runs": ("snapshot_runs_total", "counter", "MEMORY.md refreshes."),
    "snapshot_errors": ("snapshot_errors_total", "counter", "MEMORY.md refresh failures."),
    "search_calls": ("search_calls_total", "counter", "Retrievals (searches and prompt slices)."),
    "search_ms_total": ("search_ms_total", "counter", "Time spent in retrievals (ms)."),
    "search_ms_avg": ("search_latency_ms_avg", "gauge", "Mean retrieval latency (ms)."),
}


def _escape_label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: Any) -> str | None:
    if isinstance(value, bool):
        return "1" if value else "0"
    if not isinstance(value, int | float):
        return None
    f = float(value)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    return str(int(f)) if f.is_integer() else repr(f)


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self._declared: set[str] = set()

    def metric(
        self,
        name: str,
        kind: str,
        help_text: str,
        samples: Iterable[tuple[Mapping[str, Any], Any]],
    ) -> None:
        full = PREFIX + name
        rows = [(labels, _number(v)) for labels, v in samples]
        rows = [(labels, v) for labels, v in rows if v is not None]
        if not rows:
            return
        if full not in self._declared:
            self._declared.add(full)
            self.lines.append(f"# HELP {full} {help_text}")
            self.lines.append(f"# TYPE {full} {kind}")
        for labels, v in rows:
            if labels:
                inner = ",".join(f'{k}="{_escape_label(val)}"' for k, val in labels.items())
                self.lines.append(f"{full}{{{inner}}} {v}")
            else:
                self.lines.append(f"{full} {v}")


def render_metrics(
    counters: Mapping[str, Any],
    health: Mapping[str, Any],
    guilds: Iterable[Mapping[str, Any]] = (),
    usage_total: Iterable[tuple[str, str, float]] = (),
    usage_today: Iterable[tuple[str, str, float]] = (),
) -> str:
    """``usage_total``/``usage_today``: (guild id, series, value) of the daily
    series (``Memory.usage``), all days / today's UTC day."""
    w = _Writer()
    for key, value in counters.items():
        if key in _COUNTERS:
            name, kind, help_text = _COUNTERS[key]
            w.metric(name, kind, help_text, [({}, value)])
        elif key == "rejected_reasons" and isinstance(value, Mapping):
            w.metric(
                "ingest_rejected_by_reason_total",
                "counter",
                "Messages refused at ingest, by reason.",
                [({"reason": r}, n) for r, n in sorted(value.items())],
            )
        elif isinstance(value, int | float) and not isinstance(value, bool):
            w.metric(key, "gauge", f"Engine counter {key}.", [({}, value)])
    facts = health.get("facts", {})
    w.metric(
        "facts",
        "gauge",
        "Facts by state.",
        [({"state": "active"}, facts.get("active")), ({"state": "all"}, facts.get("total"))],
    )
    w.metric("fact_fts_rows", "gauge", "Rows in the fact FTS index.", [({}, facts.get("fts_rows"))])
    msgs = health.get("messages", {})
    w.metric("messages", "gauge", "Stored messages.", [({}, msgs.get("total"))])
    w.metric(
        "message_fts_rows", "gauge", "Rows in the message FTS index.", [({}, msgs.get("fts_rows"))]
    )
    w.metric(
        "messages_by_state",
        "gauge",
        "Stored messages by processing state.",
        [({"state": s}, n) for s, n in sorted((msgs.get("states") or {}).items())],
    )
    vector_rows: list[tuple[Mapping[str, Any], Any]] = []
    for model, kinds in sorted((health.get("vectors") or {}).items()):
        if isinstance(kinds, Mapping):
            for kind, n in sorted(kinds.items()):
                vector_rows.append(({"model": model, "kind": kind}, n))
    w.metric("vectors", "gauge", "Stored vectors by model and kind.", vector_rows)
    w.metric(
        "sqlite_vec_loaded",
        "gauge",
        "1 if sqlite-vec is loaded.",
        [({}, health.get("sqlite_vec_loaded"))],
    )
    storage = health.get("storage") or {}
    if storage:
        w.metric(
            "journal_owed_lines",
            "gauge",
            "Journal lines the disk refused, waiting to be written.",
            [({}, storage.get("journal_owed"))],
        )
        checked = storage.get("quick_check")
        w.metric(
            "database_file_ok",
            "gauge",
            "1 if the database file is the one opened and PRAGMA quick_check finds it whole.",
            [
                (
                    {},
                    int(storage.get("database_file") in (None, "ok") and checked in (None, ["ok"])),
                )
            ],
        )
    w.metric(
        "health_warnings",
        "gauge",
        "Number of health warnings (0 is healthy).",
        [({}, len(health.get("warnings") or []))],
    )
    _database(w, health.get("database_connection") or {})
    guild_rows = list(guilds)
    w.metric(
        "guild_active_facts",
        "gauge",
        "Active facts per guild.",
        [({"guild_id": g["guild_id"]}, g.get("active_facts")) for g in guild_rows],
    )
    w.metric(
        "guild_messages",
        "gauge",
        "Stored messages per guild.",
        [({"guild_id": g["guild_id"]}, g.get("messages")) for g in guild_rows],
    )
    # The daily series from the database: counters that survive restarts and
    # read the same from every process on one database (scrape one of them,
    # or take the max, not the sum). Days are not labels: Prometheus keeps
    # its own time, so ``increase(guildlore_usage_total[1d])`` is a day.
    w.metric(
        "usage_total",
        "counter",
        "Daily series summed over every day, from the database "
        "(series: " + ", ".join(s.name for s in USAGE_SERIES) + ").",
        [({"guild_id": g, "series": name}, v) for g, name, v in usage_total],
    )
    w.metric(
        "usage_today",
        "gauge",
        "Daily series of today (UTC), from the database.",
        [({"guild_id": g, "series": name}, v) for g, name, v in usage_today],
    )
    return "\n".join(w.lines) + "\n"


def _database(w: _Writer, db: Mapping[str, Any]) -> None:
    """The database's reachability as this process sees it (memory.db.status)."""
    if not db:
        return
    w.metric(
        "database_reachable",
        "gauge",
        "1 if the database answers, 0 while it is unreachable.",
        [({}, bool(db.get("reachable")) and not db.get("failure"))],
    )
    w.metric(
        "database_unreachable_seconds",
        "gauge",
        "Seconds since the database became unreachable (0 while it answers).",
        [({}, db.get("unreachable_s"))],
    )
    w.metric(
        "database_outages_total",
        "counter",
        "Times the database became unreachable.",
        [({}, db.get("outages"))],
    )
    w.metric(
        "database_reconnect_attempts_total",
        "counter",
        "Connection attempts that failed while the database was unreachable.",
        [({}, db.get("reconnect_attempts"))],
    )
    w.metric(
        "database_reconnects_total",
        "counter",
        "Times the database was reached again after an outage.",
        [({}, db.get("reconnects"))],
    )
