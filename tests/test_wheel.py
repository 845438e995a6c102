"""The wheel works outside the checkout: built, installed into a fresh venv in
another folder, ``guildlore demo`` serves its pages, static files, the bundled
models and the sample guild."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bot", "dashboard", "memory", "evals")
READY = "guildlore demo: dashboard at "

pytestmark = pytest.mark.slow


def _run(*cmd: str | Path, cwd: Path, timeout: float) -> str:
    result = subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        env=_outside_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def _outside_env() -> dict[str, str]:
    """No PYTHONPATH and no guildlore setting: nothing may come from the checkout."""
    return {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("GUILDLORE_")
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # From a clean copy of the sources, as the image's build does: a checkout's
    # build/ and *.egg-info left by earlier builds would add files the
    # package-data declaration misses.
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    # Build isolation: the build backend pyproject.toml asks for, not the venv's.
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "-q",
        src,
        "-w",
        out,
        cwd=out,
        timeout=300,
    )
    (built,) = out.glob("guildlore-*.whl")
    return built


def test_the_wheel_holds_every_file_of_the_packages(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                rel = path.relative_to(ROOT).as_posix()
                if rel not in names:
                    missing.append(rel)
    assert missing == [], "add these to [tool.setuptools.package-data] in pyproject.toml"
    licences = {n for n in names if ".dist-info/licenses/" in n}
    assert any(n.endswith("all-MiniLM-L6-v2/LICENSE.txt") for n in licences)


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv in a folder of its own with the wheel and its dependencies."""
    home = tmp_path_factory.mktemp("elsewhere")
    _run(sys.executable, "-m", "venv", home / "venv", cwd=home, timeout=300)
    pip = home / "venv" / "bin" / "pip"
    _run(pip, "install", "-q", "--disable-pip-version-check", wheel, cwd=home, timeout=900)
    return home


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read()


@pytest.fixture(scope="module")
def demo(installed: Path) -> Iterator[tuple[str, list[str]]]:
    proc = subprocess.Popen(
        [str(installed / "venv" / "bin" / "guildlore"), "demo", "--port", "0"],
        cwd=installed,
        env=_outside_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    base = ""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not base:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith(READY):
            base = line[len(READY) :].split()[0]
    try:
        assert base, "".join(lines)
        # The rest of the banner (the example searches) follows the ready line.
        for _ in range(40):
            line = proc.stdout.readline()
            lines.append(line)
            if line.startswith("Press Ctrl-C"):
                break
        yield base, lines
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0


def test_the_installed_code_is_the_wheels(installed: Path) -> None:
    out = _run(
        installed / "venv" / "bin" / "python",
        "-c",
        "import bot, dashboard, memory; print(bot.__file__, dashboard.__file__, memory.__file__)",
        cwd=installed,
        timeout=60,
    )
    assert str(ROOT) not in out and out.count(str(installed / "venv")) == 3


def test_the_demo_serves_pages_static_files_and_the_sample(demo: tuple[str, list[str]]) -> None:
    base, lines = demo
    banner = "".join(lines)
    sample = json.loads((ROOT / "bot" / "data" / "sample_guild.json").read_text(encoding="utf-8"))
    imported = re.search(r"(\d+) messages imported", banner)
    # Every message of the sample but its system notices and empty posts.
    assert imported is not None and 0.9 * len(sample["messages"]) < int(imported[1])
    for path in ("", "journal", "snapshot", "static/style.css"):
        status, body = _get(base + path)
        assert status == 200 and body, path
    status, css = _get(base + "static/style.css")
    assert css == (ROOT / "dashboard" / "static" / "style.css").read_bytes()


def test_the_demo_embeds_and_searches_with_the_bundled_model(
    demo: tuple[str, list[str]],
) -> None:
    base, lines = demo
    embedded = re.findall(r"embedding messages: (\d+) done", "".join(lines))
    assert embedded and int(embedded[-1]) > 400  # the sample's messages, embedded here
    api = next(line.split()[-1] for line in lines if line.strip().startswith("JSON API:"))
    status, body = _get(api)
    assert status == 200 and json.loads(body)["results"]
    _, health = _get(base + "api/memory/health")
    assert json.loads(health)["embedding_model"] == "local:all-MiniLM-L6-v2-int8"


def test_doctor_finds_the_tokenizer_in_the_installed_package(installed: Path) -> None:
    out = _run(
        installed / "venv" / "bin" / "guildlore",
        "doctor",
        "--offline",
        "--data-dir",
        installed / "data",
        cwd=installed,
        timeout=300,
    )
    line = next(x for x in out.splitlines() if "embedding tokenizer:" in x)
    assert "sha256 verified" in line and str(installed / "venv") in line
