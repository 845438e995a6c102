"""The relevance gate's thresholds for each embedding model.

Cosine similarity has no common scale across embedding models: a small
sentence model puts unrelated chat lines at 0.2-0.3 where another model puts
them at 0.7. The gate's semantic thresholds (``ScoringWeights.sem_min`` and
the ones that back a combined score) therefore belong to the model that made
the vectors, not to the engine. Each model's calibration is measured on
development data by ``bench/calibrate_gate.py`` and shipped in
``memory/data/gate_calibration.json``, keyed by the model's name; a model
without one keeps the default thresholds. An operator's own calibration file
(``RetrievalConfig.gate_calibration``, the ``retrieval.gate_calibration``
setting) replaces the shipped entry of each model it names.

The file is a JSON object: model name → an object with the threshold fields
below (any subset; the rest keep their defaults) and optionally ``measured``,
free-form figures of the run that produced it (kept, never used to rank).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

from memory.errors import InvalidInput
from memory.models import Hit, ScoreParts
from memory.retrieval.scoring import DEFAULT_WEIGHTS, ScoringWeights

__all__ = [
    "GateCalibration",
    "GateTable",
    "bundled_calibrations",
    "dump_calibrations",
    "load_calibration_file",
    "parse_calibrations",
]

BUNDLED_FILE = "gate_calibration.json"
# The per-hit thresholds that depend on the embedding model (the gate with a
# semantic score, ``ScoringWeights``); the lexical-only gate does not.
HIT_THRESHOLDS: tuple[str, ...] = (
    "sem_min",
    "lex_min_with_semantic",
    "combined_min_with_semantic",
    "support_sem_min",
    "support_lex_min",
)
# Whether strict search answers at all (``GateCalibration.covers``).
THRESHOLDS: tuple[str, ...] = (
    *HIT_THRESHOLDS,
    "cover_sem_min",
    "cover_lex_min",
    "cover_named_sem_min",
    "cover_rival_margin",
)
_EPS = 1e-9


@dataclass(frozen=True)
class GateCalibration:
    """One model's gate thresholds: the per-hit ones (see ``ScoringWeights``)
    and the query's coverage. A query is covered when one of strict search's
    passing hits reaches ``cover_sem_min`` in meaning or ``cover_lex_min`` in
    word overlap; otherwise nothing in memory is about it and strict search
    answers with no hit. Per-hit thresholds judge each hit alone, so raising
    them drops weak evidence of answerable questions too; coverage judges the
    query by its best hits and leaves an answered query's hits as they are.
    0 (uncalibrated): any passing hit covers the query.

    ``cover_named_sem_min``: when the query names members, the least semantic
    similarity at which a message of theirs that shares no word with the
    query counts as about them (``memory.retrieval.attribution``); 0: no floor.
    ``cover_rival_margin``: how much closer to the query (a hit's own
    relevance: meaning and BM25) another member's own story may be than a
    hit about the named member that still covers the query; above 1: any.
    """

    sem_min: float = DEFAULT_WEIGHTS.sem_min
    lex_min_with_semantic: float = DEFAULT_WEIGHTS.lex_min_with_semantic
    combined_min_with_semantic: float = DEFAULT_WEIGHTS.combined_min_with_semantic
    support_sem_min: float = DEFAULT_WEIGHTS.support_sem_min
    support_lex_min: float = DEFAULT_WEIGHTS.support_lex_min
    cover_sem_min: float = 0.0
    cover_lex_min: float = 0.0
    cover_named_sem_min: float = 0.0
    cover_rival_margin: float = 1.5
    measured: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def apply(self, weights: ScoringWeights) -> ScoringWeights:
        """``weights`` with this calibration's gate thresholds."""
        return replace(weights, **{name: getattr(self, name) for name in HIT_THRESHOLDS})

    def covers(self, parts: Iterable[ScoreParts]) -> bool:
        """Whether strict search's passing hits (their parts) show that memory
        covers the query; a hit without a semantic score counts by its words."""
        for p in parts:
            if p.semantic is not None and p.semantic >= self.cover_sem_min - _EPS:
                return True
            if p.lexical >= self.cover_lex_min - _EPS:
                return True
        return False

    def without_fillers(self, hits: Sequence[Hit]) -> list[Hit]:
        """Strict search's passing hits for a question that asks who has
        something, less the fillers: once a hit holds the query's words
        (``cover_lex_min``), a hit that shares no word with the query (no
        overlap, no BM25) stays only if its meaning alone reaches
        ``cover_sem_min`` — "ilsedevos's husband is a computer scientist"
        (0.31 under MiniLM) does not answer "who here studies Greek?" beside
        "Justus is only starting to learn greek letters". Only for those
        questions: "what activities does Melanie do?" is answered by
        "swimming with the kids", which shares no word with it (applied to
        every question, LoCoMo's strict R@10 fell 73.8 → 72.1). Uncalibrated
        (both thresholds 0), nothing is dropped."""
        if not any(h.parts.lexical >= self.cover_lex_min - _EPS for h in hits):
            return list(hits)
        return [
            h
            for h in hits
            if h.parts.lexical > 0.0
            or h.parts.bm25 > 0.0
            or h.parts.semantic is None
            or h.parts.semantic >= self.cover_sem_min - _EPS
        ]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in THRESHOLDS}
        if self.measured:
            out["measured"] = dict(self.measured)
        return out


def parse_calibrations(data: Any, *, where: str = "gate calibration") -> dict[str, GateCalibration]:
    """model name → calibration, from the file's decoded JSON; a clear
    ``InvalidInput`` for anything else (an unknown field, a value outside 0..1.5)."""
    if not isinstance(data, dict):
        raise InvalidInput(f"{where}: expected a JSON object of model name → thresholds")
    known = {f.name for f in fields(GateCalibration)}
    out: dict[str, GateCalibration] = {}
    for model, raw in data.items():
        if not isinstance(model, str) or not model.strip():
            raise InvalidInput(f"{where}: a model name must be non-empty text")
        if not isinstance(raw, dict):
            raise InvalidInput(f"{where}: {model!r} must map to an object of thresholds")
        unknown = sorted(set(raw) - known)
        if unknown:
            raise InvalidInput(
                f"{where}: {model!r} has unknown field(s) {', '.join(unknown)}; "
                f"known: {', '.join(THRESHOLDS)}, measured"
            )
        values: dict[str, Any] = {}
        for name in THRESHOLDS:
            if name not in raw:
                continue
            value = raw[name]
            # Above 1 turns a branch of the gate off (no score reaches it).
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or not 0.0 <= value <= 1.5
            ):
                raise InvalidInput(f"{where}: {model!r} {name} must be a number in 0..1.5")
            values[name] = float(value)
        measured = raw.get("measured", {})
        if not isinstance(measured, dict):
            raise InvalidInput(f"{where}: {model!r} measured must be an object")
        out[model] = GateCalibration(**values, measured=measured)
    return out


def load_calibration_file(path: Path) -> dict[str, GateCalibration]:
    """A calibration file (blocking: read it at start-up, not on the event loop)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"gate calibration {path} cannot be read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"gate calibration {path} is not valid JSON: {exc}") from None
    return parse_calibrations(data, where=f"gate calibration {path}")


def dump_calibrations(calibrations: Mapping[str, GateCalibration]) -> str:
    """The file's text for ``calibrations`` (what ``load_calibration_file`` reads)."""
    payload = {model: c.to_json() for model, c in sorted(calibrations.items())}
    return json.dumps(payload, indent=2) + "\n"


def bundled_calibrations() -> dict[str, GateCalibration]:
    """The calibrations shipped with the package (none if the file is absent)."""
    resource = resources.files("memory").joinpath("data", BUNDLED_FILE)
    if not resource.is_file():
        return {}
    data = json.loads(resource.read_text(encoding="utf-8"))
    return parse_calibrations(data, where=f"bundled {BUNDLED_FILE}")


# Read once at import (start-up), never on the event loop.
_BUNDLED = bundled_calibrations()


class GateTable:
    """The gate weights for each model: the shipped calibrations, the
    configured ones on top, built once per model."""

    def __init__(
        self, base: ScoringWeights, overrides: Mapping[str, GateCalibration] | None = None
    ) -> None:
        self.base = base
        self.calibrations = {**_BUNDLED, **(overrides or {})}
        self._weights: dict[str, ScoringWeights] = {}
        self._uncalibrated = GateCalibration()

    def weights_for(self, model: str | None) -> ScoringWeights:
        """The weights for vectors of ``model`` (None: no query vector, the
        lexical gate, which no calibration changes)."""
        if model is None:
            return self.base
        cached = self._weights.get(model)
        if cached is None:
            calibration = self.calibrations.get(model)
            cached = self.base if calibration is None else calibration.apply(self.base)
            self._weights[model] = cached
        return cached

    def calibration_for(self, model: str | None) -> GateCalibration:
        """``model``'s calibration (an uncalibrated model, or no query vector:
        the defaults, under which any passing hit covers a query)."""
        found = None if model is None else self.calibrations.get(model)
        return self._uncalibrated if found is None else found
