"""The shape of the house: import direction, public surface, nothing at import time."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import memory

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ("discord", "aiohttp", "jinja2", "apscheduler", "markdown_it", "playwright")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def test_memory_imports_no_framework_and_nothing_of_bot_or_dashboard() -> None:
    for path in (ROOT / "memory").rglob("*.py"):
        for name in _imports(path):
            top = name.split(".")[0]
            assert top not in FRAMEWORKS, f"{path.name} imports {name}"
            assert top not in ("bot", "dashboard"), f"{path.name} imports {name}"


def test_nothing_imports_bot_and_dashboard_never_imports_discord() -> None:
    for path in (ROOT / "dashboard").rglob("*.py"):
        for name in _imports(path):
            assert name.split(".")[0] not in ("bot", "discord"), f"{path} imports {name}"
    for path in (ROOT / "memory").rglob("*.py"):
        assert "bot" not in {n.split(".")[0] for n in _imports(path)}


def test_the_replies_cog_uses_only_the_memory_facade() -> None:
    engine = {n for n in _imports(ROOT / "bot/cogs/replies.py") if n.split(".")[0] == "memory"}
    assert engine == {"memory"}


def test_only_the_voice_adapter_touches_voice_internals() -> None:
    for path in (ROOT / "bot").rglob("*.py"):
        names = {n.split(".")[0] for n in _imports(path)} | _imports(path)
        if path.name == "discord_adapter.py":
            continue
        assert "davey" not in names, path
        assert "discord.ext.voice_recv" not in names, path


def test_public_surface_is_explicit() -> None:
    assert sorted(memory.__all__) == sorted(set(memory.__all__))
    for name in memory.__all__:
        assert hasattr(memory, name), name
    public = {n for n in dir(memory) if not n.startswith("_") and n[0].isupper()}
    assert public <= set(memory.__all__) | {"LORE_SUBJECT"}


def test_importing_the_packages_has_no_side_effects(tmp_path: Path) -> None:
    code = (
        "import os, memory, memory.engine, memory.retrieval.retriever, evals.locomo, dashboard, bot, bot.cli; "
        "print(sorted(os.listdir('.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == "[]", "importing created files"


def _top_level_names(path: Path) -> set[str]:
    """Names a module defines itself (not the ones it imports)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_extraction_names_come_from_their_defining_module() -> None:
    """No re-export shims and no private names across modules in memory.extract."""
    for folder in ("memory", "bot", "dashboard", "tests", "bench", "evals", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if not (
                    isinstance(node, ast.ImportFrom)
                    and node.level == 0
                    and (node.module or "").startswith("memory.extract")
                ):
                    continue
                assert node.module is not None
                target = ROOT.joinpath(*node.module.split("."))
                for alias in node.names:
                    assert not alias.name.startswith("_"), f"{path}: {node.module}.{alias.name}"
                    if (target / f"{alias.name}.py").exists():
                        continue  # a submodule
                    defined = _top_level_names(target.with_suffix(".py"))
                    assert alias.name in defined, f"{path}: {node.module} re-exports {alias.name}"


def test_the_project_stands_alone_and_skips_only_the_local_stt_extra() -> None:
    """Nothing reads files beside the checkout, and a missing fixture or tool
    fails the suite: the optional local speech-to-text extra is the one skip."""
    outside = re.compile(r"""\.\./shared|parents?\[?\d*\]?\s*/\s*["']shared["']""")
    skip = re.compile(r"pytest\.(skip|importorskip)\(|mark\.skip")
    skips = []
    for folder in ("tests", "bench", "scripts", "evals", "memory", "bot", "dashboard"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == Path(__file__).resolve():
                continue
            text = path.read_text(encoding="utf-8")
            assert not outside.search(text), f"{path} reads outside the repository"
            skips += [
                f"{path.relative_to(ROOT)}: {line.strip()}"
                for line in text.splitlines()
                if skip.search(line)
            ]
    assert len(skips) == 1 and "local_stt_available()" in skips[0], skips
