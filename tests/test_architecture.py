"""The shape of the house: import direction, public surface, nothing at import time."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import memory

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ("discord", "aiohttp", "jinja2", "apscheduler", "markdown_it", "playwright")
PACKAGES = ("memory", "bot", "dashboard", "evals")
# Adapters and harnesses that may use the engine only through ``from memory import <name>``.
FACADE_ONLY = ("bot", "dashboard", "evals")
# The size alarm: a module past this many lines is listed in LONG_MODULES with
# the one concept it holds (cut by concept, never by size; never shorten a
# comment to fit).
MAX_LINES = 500
LONG_MODULES: dict[str, str] = {
    "memory/ingest/pipeline.py": "one batch of queued messages, from cleaning to the snapshot",
    "memory/embed/service.py": "background embedding: the queue of ids, models, re-index",
    "memory/importer/reader.py": "the reading side's public face: paths, headers, records",
}
# The engine's working parts: callers outside memory/ ask the facade instead.
ENGINE_PARTS = frozenset(
    {"db", "embeddings", "queue", "pipeline", "snapshot", "journal", "retriever", "extractor"}
)
MEMORY_HOLDERS = frozenset({"mem", "memory", "memory_of"})

# Private names still imported across modules, (importing file, module) → names.
# Being removed by the helpers re-cutting these modules; the lead empties this
# after merging them.
PRIVATE_IMPORTS_BEING_REMOVED: dict[tuple[str, str], tuple[str, ...]] = {}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def _files(*packages: str) -> Iterator[Path]:
    for package in packages:
        yield from sorted((ROOT / package).rglob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


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


def facade_violations(path: Path, public: set[str]) -> list[str]:
    """Imports of the engine in ``path`` other than ``from memory import <public name>``."""
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "memory" or alias.name.startswith("memory."):
                    found.append(f"{_rel(path)}:{node.lineno} import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("memory."):
                found.append(f"{_rel(path)}:{node.lineno} from {node.module} import ...")
            elif node.module == "memory":
                found.extend(
                    f"{_rel(path)}:{node.lineno} from memory import {a.name} (not in __all__)"
                    for a in node.names
                    if a.name not in public
                )
    return found


def test_adapters_use_only_the_facade() -> None:
    public = set(memory.__all__)
    found = [v for path in _files(*FACADE_ONLY) for v in facade_violations(path, public)]
    assert found == [], "\n".join(found)


def test_the_facade_check_sees_every_way_past_it(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import memory\n"
        "import memory.engine\n"
        "from memory import Memory, NotExported\n"
        "from memory.store import db\n"
        "def f():\n"
        "    from memory.llm import ChatModel\n"
    )
    found = facade_violations(sample, {"Memory"})
    assert [v.split(":", 1)[1].split(" ", 1)[0] for v in found] == ["1", "2", "3", "4", "6"]


def engine_reaches(path: Path) -> list[str]:
    """``memory.db``, ``self.bot.memory.embeddings``, ``memory_of(request).journal``,
    ``mem._x``: reaching past the facade into the engine's working parts."""
    found = []
    for node in ast.walk(_tree(path)):
        if not isinstance(node, ast.Attribute):
            continue
        if node.attr not in ENGINE_PARTS and not node.attr.startswith("_"):
            continue
        holder = node.value.func if isinstance(node.value, ast.Call) else node.value
        last = ast.unparse(holder).rsplit(".", 1)[-1]
        if last in MEMORY_HOLDERS:
            found.append(f"{_rel(path)}:{node.lineno} {ast.unparse(node)}")
    return found


def test_adapters_do_not_reach_into_the_engine() -> None:
    found = [v for path in _files(*FACADE_ONLY) for v in engine_reaches(path)]
    assert found == [], "\n".join(found)


def test_the_reach_check_sees_the_usual_holders(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "memory.db.read\n"
        "self.bot.memory.embeddings.stats\n"
        "context.memory_of(request).journal\n"
        "mem._started\n"
        "memory.facts.find\n"
        "settings.snapshot_interval_s\n"
    )
    lines = sorted(v.split(":")[1].split(" ")[0] for v in engine_reaches(sample))
    assert lines == ["1", "2", "3", "4"]


def private_imports(path: Path) -> list[tuple[str, str, str]]:
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            found.extend(
                (_rel(path), module, a.name)
                for a in node.names
                if a.name.startswith("_") and not a.name.startswith("__")
            )
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    found = {v for path in _files(*PACKAGES) for v in private_imports(path)}
    allowed = {(p, m, n) for (p, m), names in PRIVATE_IMPORTS_BEING_REMOVED.items() for n in names}
    unexpected = sorted(found - allowed)
    assert unexpected == [], "\n".join(" ".join(v) for v in unexpected)
    gone = sorted(allowed - found)
    assert gone == [], "no longer imported; drop from the allowlist: " + repr(gone)


def test_a_long_module_says_the_one_concept_it_holds() -> None:
    sizes = {_rel(path): len(path.read_text().splitlines()) for path in _files(*PACKAGES)}
    big = {name: n for name, n in sizes.items() if n > MAX_LINES and name not in LONG_MODULES}
    assert big == {}, (
        f"past {MAX_LINES} lines: if it holds one concept, list it in LONG_MODULES with that "
        f"concept; if it holds two, give the second its own module: {big}"
    )
    stale = sorted(name for name in LONG_MODULES if sizes.get(name, 0) <= MAX_LINES)
    assert stale == [], f"no longer long (or gone); drop from LONG_MODULES: {stale}"


# -- the rings of memory/ (DESIGN.md §1) ---------------------------------------------------


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _memory_modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((ROOT / "memory").rglob("*.py"))}


def _unit(module: str) -> str:
    """A top-level module of memory/, or a sub-package (``store/``)."""
    parts = module.split(".")
    return parts[1] + "/" if len(parts) >= 3 else (parts[1] if len(parts) > 1 else "__init__")


def _targets(node: ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The modules an ``from X import a, b`` reaches: ``X.a`` when it is a module, else X."""
    assert node.module is not None
    out = set()
    for alias in node.names:
        full = f"{node.module}.{alias.name}"
        out.add(full if full in modules else node.module)
    return {t for t in out if t in modules}


def module_imports(*, type_checking: bool) -> dict[str, set[str]]:
    """memory/'s module → the memory modules it imports (lazy imports included;
    ``TYPE_CHECKING`` ones only when asked)."""
    modules = _memory_modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for m, path in modules.items():
        tree = _tree(path)
        skip: set[int] = set()
        if not type_checking:
            for n in ast.walk(tree):
                if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
                    skip |= {id(s) for s in ast.walk(n)}
        for n in ast.walk(tree):
            if id(n) in skip:
                continue
            if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module in modules:
                graph[m] |= _targets(n, modules)
            elif isinstance(n, ast.Import):
                graph[m] |= {a.name for a in n.names if a.name in modules}
        graph[m].discard(m)
    return graph


def test_no_two_units_of_memory_import_each_other() -> None:
    """The sub-packages are layers: one may use another, never both ways
    (``TYPE_CHECKING`` imports aside: they name types, they run nothing)."""
    units: dict[str, set[str]] = {}
    for m, targets in module_imports(type_checking=False).items():
        for t in targets:
            if _unit(m) != _unit(t):
                units.setdefault(_unit(m), set()).add(_unit(t))
    mutual = sorted(
        f"{a} <-> {b}" for a, bs in units.items() for b in bs if a < b and a in units.get(b, ())
    )
    assert mutual == [], mutual


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_file_level_import_circle() -> None:
    """Every import counts here, lazy and ``TYPE_CHECKING`` ones included."""
    assert _circles(module_imports(type_checking=True)) == []


def test_the_circle_check_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_db_names_nothing_of_guild_memory() -> None:
    """memory/db/ reaches a database; what it may use of memory is errors, text and config."""
    allowed = {"memory.errors", "memory.text", "memory.config"}
    found = sorted(
        f"{m} imports {t}"
        for m, targets in module_imports(type_checking=True).items()
        if m.startswith("memory.db")
        for t in targets
        if not t.startswith("memory.db") and t not in allowed
    )
    assert found == [], found


def test_nothing_below_the_engine_imports_its_clients() -> None:
    """reply/ and importer/ use the facade; the engine's own parts never use them."""
    clients = ("memory.reply", "memory.importer")
    found = sorted(
        f"{m} imports {t}"
        for m, targets in module_imports(type_checking=True).items()
        if m != "memory" and not m.startswith(clients)
        for t in targets
        if t.startswith(clients)
    )
    assert found == [], found


def test_postgres_implements_the_database_protocol_without_inheriting_sqlite(
    tmp_path: Path,
) -> None:
    """Both backends are ``Database``s by shape (mypy checks the signatures
    where ``open_database`` returns them), and neither is the other's subclass."""
    from memory.db.core import Database
    from memory.db.postgres.database import PgDatabase
    from memory.db.sqlite.database import SqliteDatabase

    assert PgDatabase.__mro__ == (PgDatabase, object)
    assert SqliteDatabase.__mro__ == (SqliteDatabase, object)
    members = {n for n in vars(Database) if not n.startswith("_")} | set(Database.__annotations__)
    unopened = (SqliteDatabase(tmp_path / "x.sqlite3"), PgDatabase("postgresql://u@localhost/x"))
    for db in unopened:
        assert sorted(n for n in members if not hasattr(db, n)) == [], type(db).__name__


def test_public_surface_is_explicit() -> None:
    """httpx style: ``__all__`` is exactly the facade's public, non-module attributes."""
    assert sorted(memory.__all__) == sorted(set(memory.__all__)), "duplicates in __all__"
    public = {
        name
        for name, value in vars(memory).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert set(memory.__all__) == public


def test_every_exported_name_is_used_outside_the_engine() -> None:
    """``__all__`` is what the adapters need: nothing exported for nobody."""
    used: set[str] = set()
    for path in _files(*FACADE_ONLY):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "memory":
                used.update(a.name for a in node.names)
    assert sorted(set(memory.__all__) - used) == []


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
