"""Shared bits for the benchmark scripts: percentiles, tables, JSON output, sample texts."""

from __future__ import annotations

import json
import math
import os
import platform
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from memory.clock import iso, system_clock
from memory.models import IncomingMessage

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
# The real DiscordChatExporter export the tests ship (tests/data/README.md).
EXPORT = ROOT / "tests" / "data" / "vesuvius-papyrology.json"


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def write_json(name: str, payload: dict[str, Any], out: Path | None = None) -> Path:
    path = out or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    # A payload's own "machine" entries (load averages) join the common ones.
    machine = {"cpus": _cpus(), "python": platform.python_version(), **payload.get("machine", {})}
    payload = {
        "benchmark": name,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine,
        **{k: v for k, v in payload.items() if k != "machine"},
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print(" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("-|-".join("-" * w for w in widths))
    for r in cells:
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def export_texts(path: Path = EXPORT) -> list[tuple[str, str]]:
    """(author name, content) of the non-empty messages of a DiscordChatExporter export."""
    data = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for m in data["messages"]:
        content = (m.get("content") or "").strip()
        if content:
            author = m.get("author", {})
            out.append((author.get("nickname") or author.get("name") or "someone", content))
    return out


def export_message(n: int, author: str, text: str, guild: str, channel: str) -> IncomingMessage:
    """The ``n``-th offered message, now: an export text under a snowflake-like
    id, its author's id derived from the author's name (the same member each
    time they speak)."""
    return IncomingMessage(
        id=str(10**17 + n),
        guild_id=guild,
        channel_id=channel,
        author_id=str(920_000_000_000_000_000 + zlib.crc32(author.encode())),
        author_name=author,
        content=text,
        created_at=iso(system_clock()),
    )


def cycle(items: Sequence[Any]) -> Iterator[Any]:
    while True:
        yield from items


def loadavg() -> list[float] | None:
    """The 1/5/15-minute load averages, rounded; None where the OS has none.
    Printed beside timings: on a shared machine timings move with the load."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
