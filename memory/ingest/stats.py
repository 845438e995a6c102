"""What the batch pipeline counts: extraction calls and errors, facts written,
candidates refused, journal errors, retries and each write decision's kind
(exposed through ``Memory.admin.counters()`` and ``/metrics``)."""

from __future__ import annotations

from dataclasses import dataclass

from memory.decision import DecisionKind


@dataclass
class PipelineStats:
    extract_calls: int = 0
    extract_errors: int = 0
    extract_ms_total: float = 0.0
    facts_added: int = 0
    facts_updated: int = 0
    candidates_rejected: int = 0
    guard_refused: int = 0  # candidates the instruction/secret checks refused
    journal_errors: int = 0
    skipped_short: int = 0
    retries_scheduled: int = 0  # failed attempts that wait for a retry
    messages_failed: int = 0  # messages marked failed (given up, or unprocessable)
    # The write decision of each accepted candidate.
    decision_adds: int = 0
    decision_noops: int = 0
    decision_updates: int = 0
    decision_supersedes: int = 0

    def count_decision(self, kind: DecisionKind) -> None:
        name = {"add": "adds", "noop": "noops", "update": "updates", "supersede": "supersedes"}
        attr = f"decision_{name[kind]}"
        setattr(self, attr, getattr(self, attr) + 1)
