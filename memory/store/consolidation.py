"""All SQL of consolidation: the candidate pool and its pairs, fingerprints,
applying a run's merges and supersedes with the prior image of every row
it changes, the run records, and undo.

Functions run inside the caller's transaction. A run changes
``memory_facts`` rows (a merged duplicate is archived, a contradicted fact
closed, the kept fact's observation span widened) and inserts
``fact_sources`` rows (the duplicate's sources move to the kept fact); each
change first stores the row as it was (``consolidation_undo``), so an undo
puts back exactly that. Every change writes a history row with its reason;
the undo writes its own."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory.db.core import Connection
from memory.errors import InvalidInput
from memory.store.fact_time import observe
from memory.store.facts import add_history, delete_fact, get_fact, upsert_fact
from memory.store.usage import count
from memory.store.vectors import delete_fact_vectors_index, index_fact_vector_if_present

INSIGHT_CONFIDENCE = 0.4
# A pair checked once is not checked again for this long.
FINGERPRINT_DAYS = 14


@dataclass(frozen=True)
class PoolFact:
    id: int
    subject: str
    fact: str
    fact_type: str
    observed_at: str
    last_observed_at: str
    updated_at: str


@dataclass(frozen=True)
class Action:
    """``merge``: ``drop`` is the same fact as ``keep`` and goes into it;
    ``supersede``: ``drop`` is closed by the newer ``keep``."""

    kind: str
    keep: int
    drop: int
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.kind, "keep": self.keep, "drop": self.drop, "reason": self.reason}


def _pool_fact(r: Any) -> PoolFact:
    seen = r["observed_at"] or r["created_at"]
    return PoolFact(
        int(r["id"]),
        r["subject"],
        r["fact"],
        r["fact_type"],
        seen,
        r["last_observed_at"] or seen,
        r["updated_at"],
    )


_POOL_COLUMNS = (
    "f.id, f.subject, f.fact, f.fact_type, f.observed_at, f.last_observed_at, f.created_at, "
    "f.updated_at"
)
# Current facts consolidation may change: active, not closed, not an insight, not canon (a
# pinned message's lore is the operators' word).
_CURRENT = (
    "f.guild_id = ? AND f.is_active = 1 AND f.valid_to IS NULL "
    "AND f.fact_type NOT IN ('canon', 'insight') "
    "AND NOT EXISTS (SELECT 1 FROM canon_pins p WHERE p.fact_id = f.id) "
    # Pinned memory is never merged away or closed by a consolidation run.
    "AND NOT EXISTS (SELECT 1 FROM memory_pins mp WHERE mp.fact_id = f.id)"
)


def candidate_pool(
    con: Connection, guild_id: str, since: str, limit: int, often: int
) -> list[PoolFact]:
    """Current facts changed since ``since``, newest first, and the ``often``
    most retrieved ones; at most ``limit`` in all."""
    changed = con.execute(
        f"SELECT {_POOL_COLUMNS} FROM memory_facts f WHERE {_CURRENT} AND f.updated_at >= ? "
        "ORDER BY f.updated_at DESC, f.id DESC LIMIT ?",
        (guild_id, since, limit),
    ).fetchall()
    used = con.execute(
        f"SELECT {_POOL_COLUMNS} FROM memory_facts f JOIN (SELECT fact_id, count(*) AS n "
        "FROM memory_traces WHERE guild_id = ? AND fact_id IS NOT NULL GROUP BY fact_id "
        f"ORDER BY n DESC LIMIT ?) t ON t.fact_id = f.id WHERE {_CURRENT}",
        (guild_id, often, guild_id),
    ).fetchall()
    out: dict[int, PoolFact] = {}
    for r in [*changed, *used]:
        if len(out) >= limit:
            break
        out.setdefault(int(r["id"]), _pool_fact(r))
    return list(out.values())


def subject_facts(
    con: Connection, guild_id: str, subjects: Sequence[str]
) -> dict[str, list[PoolFact]]:
    """The current facts of each subject (the partners of its candidates)."""
    out: dict[str, list[PoolFact]] = {}
    for s in subjects:
        rows = con.execute(
            f"SELECT {_POOL_COLUMNS} FROM memory_facts f WHERE {_CURRENT} AND f.subject = ? "
            "ORDER BY f.id LIMIT 400",
            (guild_id, s),
        ).fetchall()
        out[s] = [_pool_fact(r) for r in rows]
    return out


def pair_vectors(con: Connection, guild_id: str, ids: Sequence[int]) -> dict[int, bytes]:
    """The facts' stored vectors of the model most of them have (one model,
    so that every cosine compares like with like)."""
    if not ids:
        return {}
    held = ",".join("?" * len(ids))
    top = con.execute(
        f"SELECT model FROM memory_fact_vectors WHERE guild_id = ? AND fact_id IN ({held}) "
        "GROUP BY model ORDER BY count(*) DESC LIMIT 1",
        [guild_id, *ids],
    ).fetchone()
    if top is None:
        return {}
    return {
        int(r[0]): bytes(r[1])
        for r in con.execute(
            f"SELECT fact_id, embedding FROM memory_fact_vectors WHERE model = ? "
            f"AND fact_id IN ({held})",
            [top[0], *ids],
        )
    }


def fingerprint(a: PoolFact, b: PoolFact) -> str:
    """The pair's ids and texts: an edited fact makes a new pair."""
    lo, hi = (a, b) if a.id < b.id else (b, a)
    raw = f"{lo.id}\x1f{hi.id}\x1f{lo.fact}\x1f{hi.fact}"
    return hashlib.sha1(raw.encode()).hexdigest()[:20]


def fresh_fingerprints(con: Connection, guild_id: str, since: str) -> set[str]:
    return {
        r[0]
        for r in con.execute(
            "SELECT fingerprint FROM consolidation_fingerprints WHERE guild_id = ? "
            "AND checked_at >= ?",
            (guild_id, since),
        )
    }


def save_fingerprints(
    con: Connection, guild_id: str, verdicts: Sequence[tuple[str, str]], now: str, older_than: str
) -> None:
    con.execute(
        "DELETE FROM consolidation_fingerprints WHERE guild_id = ? AND checked_at < ?",
        (guild_id, older_than),
    )
    con.executemany(
        "INSERT INTO consolidation_fingerprints (guild_id, fingerprint, verdict, checked_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (guild_id, fingerprint) DO UPDATE SET "
        "verdict = excluded.verdict, checked_at = excluded.checked_at",
        [(guild_id, fp, verdict, now) for fp, verdict in verdicts],
    )


def row_image(con: Connection, fact_id: int) -> dict[str, Any] | None:
    """The fact's whole row, every column (those added by later migrations too)."""
    row = con.execute("SELECT * FROM memory_facts WHERE id = ?", (fact_id,)).fetchone()
    return None if row is None else {k: row[k] for k in row.keys()}


def image_hash(image: dict[str, Any] | None) -> str:
    return hashlib.sha1(json.dumps(image, sort_keys=True).encode()).hexdigest()


# -- runs ---------------------------------------------------------------------------------------


def start_run(con: Connection, guild_id: str, mode: str, dry_run: bool, now: str) -> int:
    cur = con.execute(
        "INSERT INTO consolidation_runs (guild_id, mode, dry_run, report, started_at) "
        "VALUES (?, ?, ?, '{}', ?)",
        (guild_id, mode, int(dry_run), now),
    )
    return int(cur.lastrowid)


def finish_run(con: Connection, run_id: int, report: dict[str, Any]) -> None:
    con.execute(
        "UPDATE consolidation_runs SET report = ? WHERE id = ?",
        (json.dumps(report, sort_keys=True), run_id),
    )


@dataclass(frozen=True)
class RunRecord:
    id: int
    guild_id: str
    mode: str
    dry_run: bool
    started_at: str
    undone_at: str | None
    report: dict[str, Any]


def _run_record(r: Any) -> RunRecord:
    return RunRecord(
        int(r["id"]),
        r["guild_id"],
        r["mode"],
        bool(r["dry_run"]),
        r["started_at"],
        r["undone_at"],
        json.loads(r["report"] or "{}"),
    )


def list_runs(con: Connection, guild_id: str, limit: int = 50) -> list[RunRecord]:
    rows = con.execute(
        "SELECT * FROM consolidation_runs WHERE guild_id = ? ORDER BY id DESC LIMIT ?",
        (guild_id, limit),
    ).fetchall()
    return [_run_record(r) for r in rows]


def get_run(con: Connection, guild_id: str, run_id: int) -> RunRecord | None:
    r = con.execute(
        "SELECT * FROM consolidation_runs WHERE guild_id = ? AND id = ?", (guild_id, run_id)
    ).fetchone()
    return _run_record(r) if r else None


# -- applying a run, with its prior images ----------------------------------------------------


class RunWriter:
    """Applies one run's actions in the caller's transaction, keeping the
    prior image of each row before its first change."""

    def __init__(self, con: Connection, guild_id: str, run_id: int, now: str, actor: str) -> None:
        self.con, self.guild_id, self.run_id = con, guild_id, run_id
        self.now, self.actor = now, actor
        self._seq = 0
        self._kept: set[int] = set()
        self._added: set[int] = set()

    def _note(self, table: str, key: str, before: dict[str, Any] | None) -> None:
        self._seq += 1
        self.con.execute(
            "INSERT INTO consolidation_undo (run_id, seq, table_name, row_key, before) "
            "VALUES (?, ?, ?, ?, ?)",
            (self.run_id, self._seq, table, key, None if before is None else json.dumps(before)),
        )

    def _keep_fact(self, fact_id: int) -> None:
        if fact_id in self._kept:
            return
        self._note("memory_facts", str(fact_id), row_image(self.con, fact_id))
        self._kept.add(fact_id)

    def after_images(self) -> dict[str, str]:
        """A hash of each changed fact's row after the run: an undo refuses
        to overwrite a fact that changed again since."""
        ids = sorted(self._kept | self._added)
        return {str(i): image_hash(row_image(self.con, i)) for i in ids}

    def add_insight(self, user_id: str, text: str, cites: Sequence[int]) -> int | None:
        """A new insight fact citing ``cites``; None when that text is known already."""
        held = self.con.execute(
            "SELECT 1 FROM memory_facts WHERE guild_id = ? AND subject = ? AND fact = ?",
            (self.guild_id, user_id, text),
        ).fetchone()
        if held is not None:
            return None
        up = upsert_fact(
            self.con,
            guild_id=self.guild_id,
            channel_id=None,
            subject=user_id,
            fact=text,
            fact_type="insight",
            evidence=None,
            source_message_id=None,
            confidence=INSIGHT_CONFIDENCE,
            now=self.now,
            actor="insight",
            observed_at=self.now,
        )
        self._note("memory_facts", str(up.fact.id), None)
        self._added.add(up.fact.id)
        self.con.executemany(
            "INSERT OR IGNORE INTO insight_citations (insight_id, fact_id) VALUES (?, ?)",
            [(up.fact.id, c) for c in cites],
        )
        return up.fact.id

    def insight_runs(self, user_ids: Sequence[str]) -> None:
        self.con.executemany(
            "INSERT INTO insight_runs (guild_id, user_id, ran_at) VALUES (?, ?, ?) "
            "ON CONFLICT (guild_id, user_id) DO UPDATE SET ran_at = excluded.ran_at",
            [(self.guild_id, u, self.now) for u in user_ids],
        )

    def _history(self, fact_id: int, event: str, reason: str, linked: int, text: str) -> None:
        fact = get_fact(self.con, self.guild_id, fact_id)
        assert fact is not None
        add_history(
            self.con,
            self.guild_id,
            fact_id,
            fact.subject,
            event,
            fact.fact,
            text,
            self.actor,
            reason=f"consolidation run {self.run_id}: {reason}",
            now=self.now,
            linked_fact_id=linked,
        )

    def apply(self, action: Action) -> bool:
        """Apply ``action``; False when either fact is no longer current."""
        con = self.con
        keep, drop = (
            get_fact(con, self.guild_id, action.keep),
            get_fact(con, self.guild_id, action.drop),
        )
        if keep is None or drop is None:
            return False
        if not (keep.is_active and drop.is_active and keep.valid_to is None):
            return False
        if drop.valid_to is not None:
            return False
        self._keep_fact(keep.id)
        self._keep_fact(drop.id)
        if action.kind == "merge":
            sources = con.execute(
                "SELECT message_id, observed_at FROM fact_sources WHERE fact_id = ?", (drop.id,)
            ).fetchall()
            for s in sources:
                held = con.execute(
                    "SELECT 1 FROM fact_sources WHERE fact_id = ? AND message_id = ?",
                    (keep.id, s["message_id"]),
                ).fetchone()
                if held is None:
                    self._note("fact_sources", f"{keep.id}\x1f{s['message_id']}", None)
                observe(con, self.guild_id, keep.id, s["message_id"], s["observed_at"])
            for t in (drop.observed_at, drop.last_observed_at):
                if t:
                    observe(con, self.guild_id, keep.id, None, t)
            con.execute(
                "UPDATE memory_facts SET is_active = 0, updated_at = ? WHERE id = ?",
                (self.now, drop.id),
            )
            delete_fact_vectors_index(con, [drop.id])
            count(con, self.guild_id, self.now, "facts_archived")
            self._history(
                drop.id, "merge", f"{action.reason}: merged into fact {keep.id}", keep.id, keep.fact
            )
            self._history(
                keep.id, "merge", f"{action.reason}: took in fact {drop.id}", drop.id, keep.fact
            )
        elif action.kind == "supersede":
            closed_at = keep.last_observed_at or keep.observed_at or self.now
            con.execute(
                "UPDATE memory_facts SET valid_to = ?, updated_at = ? WHERE id = ?",
                (closed_at, self.now, drop.id),
            )
            count(con, self.guild_id, self.now, "facts_superseded")
            self._history(
                drop.id,
                "supersede",
                f"{action.reason}: superseded by fact {keep.id}",
                keep.id,
                keep.fact,
            )
            self._history(
                keep.id,
                "supersede",
                f"{action.reason}: supersedes fact {drop.id}",
                drop.id,
                keep.fact,
            )
        else:
            raise ValueError(f"unknown consolidation action {action.kind!r}")
        return True


def undo_run(con: Connection, guild_id: str, run_id: int, actor: str, now: str) -> list[int]:
    """Put back every row ``run_id`` changed as it was before; the facts
    restored. Refused (InvalidInput) for an unknown, dry or undone run, or
    when a fact it changed has changed again or is gone since."""
    run = get_run(con, guild_id, run_id)
    if run is None:
        raise InvalidInput(f"no consolidation run {run_id} in this guild")
    if run.dry_run:
        raise InvalidInput(f"run {run_id} was a dry run: it changed nothing")
    if run.undone_at is not None:
        raise InvalidInput(f"run {run_id} was undone already")
    rows = con.execute(
        "SELECT table_name, row_key, before FROM consolidation_undo WHERE run_id = ? "
        "ORDER BY seq DESC",
        (run_id,),
    ).fetchall()
    facts = [
        (int(r["row_key"]), json.loads(r["before"]))
        for r in rows
        if r["table_name"] == "memory_facts" and r["before"] is not None
    ]
    added = [
        int(r["row_key"]) for r in rows if r["table_name"] == "memory_facts" and r["before"] is None
    ]
    after = run.report.get("after", {})
    for fid in [*(f for f, _ in facts), *added]:
        if row_image(con, fid) is None:
            raise InvalidInput(f"fact {fid} of run {run_id} is gone: the run cannot be undone")
        if image_hash(row_image(con, fid)) != after.get(str(fid)):
            raise InvalidInput(
                f"fact {fid} changed after run {run_id}: change it back on the fact's page"
            )
    for r in rows:
        if r["table_name"] == "fact_sources":
            fact_id, message_id = r["row_key"].split("\x1f", 1)
            con.execute(
                "DELETE FROM fact_sources WHERE fact_id = ? AND message_id = ?",
                (int(fact_id), message_id),
            )
    for fid in added:
        delete_fact(con, guild_id, fid, actor, now)
        con.execute(
            "UPDATE fact_history SET reason = ? WHERE id = (SELECT max(id) FROM fact_history "
            "WHERE fact_id = ? AND event = 'delete')",
            (f"undo of consolidation run {run_id}", fid),
        )
    restored: list[int] = []
    for fid, before in facts:
        was = row_image(con, fid)
        if was == before:
            continue  # the run read this fact (the kept side of a supersede) but left it
        cols = [k for k in before if k != "id"]
        con.execute(
            f"UPDATE memory_facts SET {', '.join(f'{c} = ?' for c in cols)} WHERE id = ?",
            [*(before[c] for c in cols), fid],
        )
        if was is not None and not was["is_active"] and before.get("is_active"):
            index_fact_vector_if_present(con, fid)
        add_history(
            con,
            guild_id,
            fid,
            before["subject"],
            "restore",
            was["fact"] if was else None,
            before["fact"],
            actor,
            reason=f"undo of consolidation run {run_id}",
            now=now,
        )
        restored.append(fid)
    con.execute("UPDATE consolidation_runs SET undone_at = ? WHERE id = ?", (now, run_id))
    return restored
