"""How ``guildlore doctor`` reports: one line per check (``ok``, ``warn``,
``FAIL`` or ``info``), with what to do about it underneath."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Check:
    status: str  # ok | warn | FAIL | info
    name: str
    detail: str
    fix: str = ""


class Report:
    def __init__(self, stream: Any = None) -> None:
        self.checks: list[Check] = []
        self.stream = stream or sys.stdout

    def add(self, status: str, name: str, detail: str, fix: str = "") -> Check:
        check = Check(status, name, detail, fix)
        self.checks.append(check)
        print(f"  {status:<5} {name}: {detail}", file=self.stream, flush=True)
        if fix:
            for line in fix.splitlines():
                print(f"        → {line}", file=self.stream, flush=True)
        return check

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == "FAIL"]

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.status == "warn"]


def guard(report: Report, name: str, fn: Callable[[], None]) -> None:
    """A check that crashes is itself a failure, with the error shown."""
    try:
        fn()
    except Exception as exc:  # doctor must report, not crash
        report.add("FAIL", name, f"{type(exc).__name__}: {exc}")


def short_error(exc: BaseException) -> str:
    """The first line of an error, with its type, for one report line."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text.splitlines()[0][:200]
