"""The deployment files: compose.yaml's settings are the app's and work against
a real PostgreSQL, the container entry point runs the real CLI and its
healthcheck, and the systemd units name real commands and settings.

The image itself is built and smoke-tested by ``scripts/container_smoke.sh``
(a container runtime is needed; docs/deployment.md records the run)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli import COMMANDS
from bot.settings import declared

ROOT = Path(__file__).resolve().parents[1]
ENTRYPOINT = ROOT / "deploy" / "entrypoint.sh"
SYSTEMD = ROOT / "deploy" / "systemd"
# Read by libpq, not by guildlore's settings: the password of database.url.
LIBPQ_ENV = {"PGPASSWORD"}
SETTING_ENV = {name for info in declared() for name in info.env}
DASHBOARD_READY = "guildlore dashboard: serving "


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _guildlore_services() -> dict[str, dict[str, Any]]:
    services = _compose()["services"]
    return {name: s for name, s in services.items() if s.get("build") == "."}


_VARIABLE = re.compile(r"\$\{(\w+)(?::([-?])([^}]*))?\}")


def _interpolate(value: str, given: dict[str, str]) -> str:
    """Compose's ${NAME}, ${NAME:-default} and ${NAME:?error} against ``given``."""

    def one(match: re.Match[str]) -> str:
        name, kind, rest = match.groups()
        if given.get(name):
            return given[name]
        if kind == "?":
            raise AssertionError(f"compose would refuse to start: {rest}")
        return rest if kind == "-" else ""

    return _VARIABLE.sub(one, value)


def _service_env(service: str, given: dict[str, str]) -> dict[str, str]:
    env = _guildlore_services()[service]["environment"]
    return {k: _interpolate(str(v), given) for k, v in env.items()}


def _clean_env(**extra: str) -> dict[str, str]:
    """This machine's environment less any guildlore setting, the checkout
    first on the import path, and the venv's ``guildlore`` and ``python3``
    first on PATH (as /opt/guildlore/bin is in the image)."""
    env = {k: v for k, v in os.environ.items() if k not in SETTING_ENV | LIBPQ_ENV}
    env = {k: v for k, v in env.items() if not k.startswith("GUILDLORE_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def _entrypoint(
    *args: str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(ENTRYPOINT), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# -- compose.yaml ---------------------------------------------------------------------------------


def test_compose_runs_bots_the_dashboard_and_postgres_with_pgvector() -> None:
    compose = _compose()
    services = _guildlore_services()
    commands = {name: s["command"][0] for name, s in services.items()}
    assert sorted(commands.values()) == ["dashboard", "run", "run"]
    assert set(commands.values()) <= set(COMMANDS)
    postgres = compose["services"]["postgres"]
    assert "pgvector" in postgres["image"]
    for name, service in services.items():
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy", name
        assert service["init"] is True and service["restart"] == "unless-stopped"
    shards = sorted(
        s["environment"]["GUILDLORE_DISCORD_SHARD_IDS"]
        for s in services.values()
        if "GUILDLORE_DISCORD_SHARD_IDS" in s["environment"]
    )
    assert shards == ["0", "1"]


def test_every_variable_compose_sets_is_a_setting_of_the_app() -> None:
    for name, service in _guildlore_services().items():
        unknown = set(service["environment"]) - SETTING_ENV - LIBPQ_ENV
        assert unknown == set(), f"{name} sets variables guildlore does not read: {unknown}"
    # And the variables compose asks of .env are the documented example's.
    text = (ROOT / "compose.yaml").read_text(encoding="utf-8")
    asked = {m[0] for m in _VARIABLE.findall(text)}
    example = (ROOT / "deploy" / "compose.env.example").read_text(encoding="utf-8")
    offered = set(re.findall(r"^(\w+)=", example, re.M))
    assert asked == offered


def test_compose_refuses_to_start_without_its_secrets() -> None:
    with pytest.raises(AssertionError, match="set DASHBOARD_TOKEN"):
        _service_env("dashboard", {"POSTGRES_PASSWORD": "pw"})


def test_the_dashboard_service_serves_a_real_postgresql_and_passes_the_healthcheck(
    pg_url: str, tmp_path: Path
) -> None:
    given = {
        "POSTGRES_PASSWORD": "not-asked-by-a-trusting-server",
        "DASHBOARD_TOKEN": "compose-test-token-0123456789",
        "DASHBOARD_SECRET": "compose-test-secret-0123456789",
    }
    env = _service_env("dashboard", given)
    # The compose network's "postgres" host is this test's server instead.
    assert env["GUILDLORE_DATABASE_URL"] == "postgresql://guildlore@postgres:5432/guildlore"
    env["GUILDLORE_DATABASE_URL"] = pg_url
    env["GUILDLORE_DASHBOARD_PORT"] = "0"  # compose's 8765 may be taken here
    full = _clean_env(**env, GUILDLORE_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.Popen(
        ["sh", str(ENTRYPOINT), "dashboard"],
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        seen = []
        deadline = time.monotonic() + 120
        port = ""
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if line.startswith(DASHBOARD_READY):
                port = line.rsplit(":", 1)[1].strip(" /\n")
                break
        assert port, "".join(seen)
        assert line.startswith(DASHBOARD_READY + "http://0.0.0.0:")
        healthy = _entrypoint("healthcheck", port, env=full)
        assert healthy.returncode == 0, healthy.stderr
        assert healthy.stdout.startswith("healthy: postgresql, 0 facts, 0 messages")
        wrong = _entrypoint("healthcheck", port, env={**full, "DASHBOARD_TOKEN": "x" * 20})
        assert wrong.returncode == 1
        assert wrong.stderr.strip() == "unhealthy: the dashboard answered 401 Unauthorized"
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0  # exec'd: the entry point's SIGTERM reached guildlore itself


def test_the_bot_services_settings_pass_doctor_against_postgresql(
    pg_url: str, tmp_path: Path
) -> None:
    token = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GhJkLm." + "a" * 38  # well-formed, never sent
    for service in ("bot-shard-0", "bot-shard-1"):
        env = _service_env(service, {"POSTGRES_PASSWORD": "pw", "DISCORD_TOKEN": token})
        env["GUILDLORE_DATABASE_URL"] = pg_url
        result = _entrypoint(
            "doctor",
            "--offline",
            env=_clean_env(**env, GUILDLORE_DATA_DIR=str(tmp_path / service)),
        )
        assert "FAIL" not in result.stdout, result.stdout
        assert result.returncode == 0, result.stdout + result.stderr
        assert "postgresql" in result.stdout.lower()


# -- the entry point ------------------------------------------------------------------------------


def test_the_entrypoint_knows_every_guildlore_command() -> None:
    text = ENTRYPOINT.read_text(encoding="utf-8")
    listed = re.search(r'^GUILDLORE_COMMANDS="([^"]*)"', text, re.M)
    assert listed is not None
    assert listed[1].split() == list(COMMANDS)


def test_the_entrypoint_runs_guildlore_commands_and_other_programs(tmp_path: Path) -> None:
    env = _clean_env(GUILDLORE_DATA_DIR=str(tmp_path / "data"))
    search = _entrypoint("search", "--guild", "1", "anything", env=env)
    assert "usage: guildlore" not in search.stderr  # parsed as guildlore's own command
    assert (tmp_path / "data").is_dir()  # created for the command
    other = _entrypoint("echo", "not a guildlore command", env=env)
    assert other.returncode == 0 and other.stdout == "not a guildlore command\n"
    helped = _entrypoint("--help", env=env)
    assert helped.returncode == 0 and "migrate-db" in helped.stdout


def test_the_entrypoint_explains_a_data_folder_it_cannot_write(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    result = _entrypoint("doctor", env=_clean_env(GUILDLORE_DATA_DIR=str(blocker / "data")))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "not writable by uid" in lines[0] and "chown" in lines[0]


def test_the_healthcheck_fails_in_one_line_when_nothing_listens() -> None:
    import socket

    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    result = _entrypoint("healthcheck", port, env=_clean_env())
    assert result.returncode == 1
    assert result.stderr.startswith(f"unhealthy: no answer from the dashboard at 127.0.0.1:{port}")
    assert len(result.stderr.strip().splitlines()) == 1


# -- systemd --------------------------------------------------------------------------------------


def _unit(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            values.setdefault(key, value)
    return values


def test_the_systemd_units_run_real_commands_with_real_settings() -> None:
    for name, command in (
        ("guildlore.service", "run"),
        ("guildlore-dashboard.service", "dashboard"),
    ):
        unit = _unit(SYSTEMD / name)
        assert unit["ExecStart"] == f"/opt/guildlore/bin/guildlore {command}"
        assert unit["User"] == "guildlore" and unit["StateDirectory"] == "guildlore"
        assert unit["Environment"].split("=", 1)[0] in SETTING_ENV
    example = (SYSTEMD / "guildlore.env.example").read_text(encoding="utf-8")
    names = set(re.findall(r"^#?(\w+)=", example, re.M))
    assert names and names - SETTING_ENV - LIBPQ_ENV == set()


def test_systemd_accepts_the_units(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze is not None, "systemd-analyze: Debian package systemd (scripts/setup.sh --tests)"
    guildlore = Path(sys.executable).parent / "guildlore"
    for name in ("guildlore.service", "guildlore-dashboard.service"):
        text = (SYSTEMD / name).read_text(encoding="utf-8")
        # Only the install paths differ from a real machine's.
        text = text.replace("/opt/guildlore/bin/guildlore", str(guildlore))
        text = text.replace("/etc/guildlore/guildlore.env", str(SYSTEMD / "guildlore.env.example"))
        unit = tmp_path / name
        unit.write_text(text, encoding="utf-8")
        result = subprocess.run(
            [analyze, "verify", str(unit)], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0 and result.stderr == "", result.stderr
