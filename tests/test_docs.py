"""The README and the documentation site: short, true to the code, and built
without a warning."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from bot.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_the_readme_is_short_and_names_its_set_up_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    for script in ("scripts/run.sh", "scripts/test.sh"):
        assert f"bash {script}" in text and (ROOT / script).is_file()
    assert ".venv/bin/guildlore" in text and "source .venv/bin/activate" in text


def test_the_readme_command_table_lists_every_command() -> None:
    text = README.read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `guildlore ([a-z-]+)", text, re.M))
    assert listed == set(COMMANDS)


def test_every_link_of_the_readme_into_the_docs_exists() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\((docs/[^)#]+)", text)
    assert targets
    assert [t for t in targets if not (ROOT / t).is_file()] == []


def test_every_page_is_in_the_navigation() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def pages(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, list):
            return [p for item in node for p in pages(item)]
        if isinstance(node, dict):
            return [p for value in node.values() for p in pages(value)]
        return []

    in_nav = set(pages(config["nav"]))
    on_disk = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert in_nav == on_disk


def test_the_performance_page_is_generated_from_the_current_results() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "performance_page.py"),
            "--check",
            str(ROOT / "docs" / "performance.md"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    # Every section shows the command that wrote its figures.
    sections = page.split("\n## ")[1:]
    assert sections and all("```sh\n.venv/bin/" in s for s in sections)


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs is not None, "mkdocs is in the dev extra: run scripts/setup.sh --tests"
    result = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "operating" / "settings" / "index.html").is_file()
