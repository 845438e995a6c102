"""pyproject.toml: the licence in PEP 639 form, and no dependency declared but unused."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("memory", "bot", "dashboard", "evals")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _used_modules() -> set[str]:
    """Top-level modules the packages import (anywhere in a file) or locate by name."""
    used: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            for node in ast.walk(ast.parse(text, filename=str(path))):
                if isinstance(node, ast.Import):
                    used.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    used.add(node.module.split(".")[0])
            used.update(re.findall(r"find_spec\(\"(\w+)", text))
    return used


def _project() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_licence_is_an_spdx_expression_with_its_files() -> None:
    project = _project()
    assert project["license"] == "MIT"
    files = project["license-files"]
    assert isinstance(files, list) and files
    for name in files:
        assert (ROOT / name).is_file(), name


def test_every_declared_dependency_is_used() -> None:
    providers = importlib.metadata.packages_distributions()
    used = {_canonical(d) for m in _used_modules() for d in providers.get(m, [])}
    deps = _project()["dependencies"]
    assert isinstance(deps, list)
    declared = {_canonical(re.split(r"[\[<>=!~ ;]", dep, maxsplit=1)[0]) for dep in deps}
    assert declared - used == set(), "declared in pyproject.toml but imported nowhere"
