"""The settings declaration: precedence, refusals, one report for every problem, docs table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.settings import Settings, SettingsError, declared, load_settings

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "guildlore.toml"
    path.write_text(text, encoding="utf-8")
    return path


def problems(**kw: object) -> list[str]:
    with pytest.raises(SettingsError) as info:
        load_settings(**kw)  # type: ignore[arg-type]
    return info.value.problems


def test_defaults() -> None:
    s = load_settings(env={})
    cfg = s.memory_config()
    assert cfg.db_path == Path("data/guildlore.sqlite3")
    assert cfg.journal_dir == Path("memory_journal")
    assert cfg.timezone == "UTC" and cfg.ingest.queue_capacity == 400
    assert not cfg.llm.enabled and not s.use_llm_extractor
    assert s.discord_token is None and s.dashboard_host == "127.0.0.1"


def test_action_log_retention_reaches_the_engine() -> None:
    env = {"GUILDLORE_JOBS_ACTION_LOG_KEEP_DAYS": "7", "GUILDLORE_JOBS_ACTION_LOG_MAX_ROWS": "500"}
    cfg = load_settings(env=env).memory_config()
    assert (cfg.action_log.keep_days, cfg.action_log.max_rows) == (7, 500)
    assert "jobs.action_log_keep_days" in " ".join(
        problems(env={**env, "GUILDLORE_JOBS_ACTION_LOG_KEEP_DAYS": "-1"})
    )


def test_the_reply_window_reaches_the_reply_config() -> None:
    cfg = load_settings(env={}).reply_config()
    assert (cfg.max_recent_messages, cfg.recent_tokens) == (35, 2000)
    env = {"GUILDLORE_REPLY_MAX_RECENT_MESSAGES": "60", "GUILDLORE_REPLY_RECENT_TOKENS": "900"}
    cfg = load_settings(env=env).reply_config()
    assert (cfg.max_recent_messages, cfg.recent_tokens) == (60, 900)
    # The message count is clamped to 10–120; a bad token bound is refused.
    high = load_settings(env={"GUILDLORE_REPLY_MAX_RECENT_MESSAGES": "500"})
    low = load_settings(env={"GUILDLORE_REPLY_MAX_RECENT_MESSAGES": "2"})
    assert (high.reply_max_recent_messages, low.reply_max_recent_messages) == (120, 10)
    assert problems(env={"GUILDLORE_REPLY_RECENT_TOKENS": "-1"})


def test_data_dir_holds_database_and_journal() -> None:
    s = load_settings(env={"GUILDLORE_DATA_DIR": "/srv/gl"})
    assert s.resolved_db_path == Path("/srv/gl/guildlore.sqlite3")
    assert s.resolved_journal_dir == Path("/srv/gl/memory_journal")
    s = load_settings(env={"GUILDLORE_DATA_DIR": "/srv/gl"}, overrides={"data_dir": Path("/x")})
    assert s.resolved_db_path == Path("/x/guildlore.sqlite3")


def test_precedence_defaults_file_env_cli(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'timezone = "Europe/Berlin"\n'
        '[llm]\nchat_model = "from-file"\ntimeout_s = 12\n'
        "[ingest]\nworkers = 2\n",
    )
    env = {"GUILDLORE_LLM_CHAT_MODEL": "from-env", "GUILDLORE_CONFIG": str(path)}
    s = load_settings(env=env, overrides={"data_dir": tmp_path / "cli"})
    assert s.timezone == "Europe/Berlin"  # file over default
    assert s.llm_chat_model == "from-env"  # environment over file
    assert s.llm_timeout_s == 12.0 and s.ingest_workers == 2
    assert s.data_dir == tmp_path / "cli"  # command line over everything


def test_secrets_and_aliases_from_environment() -> None:
    s = load_settings(
        env={
            "DISCORD_TOKEN": " tok ",
            "LLM_API_KEY": "sk-1",
            "OPENAI_BASE_URL": "http://127.0.0.1:1/v1",
            "DEFAULT_MEMORY_EMBEDDING_MODEL": "text-embedding-3-small",
            "DASHBOARD_TOKEN": "x" * 20,
            "OPENAI_API_KEY": "",  # empty counts as unset
        }
    )
    assert s.discord_token == "tok"
    assert s.llm_api_key == "sk-1" and s.llm_config().enabled and s.use_llm_extractor
    assert s.memory_config().llm.base_url == "http://127.0.0.1:1/v1"
    assert s.embedding_default_model == "text-embedding-3-small"
    assert s.dashboard_config().token == "x" * 20


def test_secret_in_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[discord]\ntoken = "abc"\n')
    (p,) = problems(config_file=path, env={})
    assert "'discord.token' is a secret" in p and "DISCORD_TOKEN" in p
    assert "abc" not in p


def test_unknown_keys_are_refused_with_a_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path, 'timezon = "UTC"\n[llm]\nchat_modle = "x"\n[colour]\nx = 1\n')
    found = problems(config_file=path, env={})
    assert len(found) == 3
    assert "unknown setting 'timezon' (did you mean 'timezone'?)" in found[0]
    assert "'llm.chat_modle'" in found[1] and "llm.chat_model" in found[1]
    assert "unknown section [colour]" in found[2]


def test_unknown_guildlore_environment_variable_is_refused() -> None:
    (p,) = problems(env={"GUILDLORE_DATADIR": "/x"})
    assert p == "unknown environment variable GUILDLORE_DATADIR (did you mean GUILDLORE_DATA_DIR?)"


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, "[reply]\ntemperature = 9\n")
    found = problems(
        config_file=path,
        env={
            "GUILDLORE_INGEST_WORKERS": "many",
            "GUILDLORE_TIMEZONE": "Mars/Olympus",
            "GUILDLORE_DASHBOARD_HOST": "0.0.0.0",
            "GUILDLORE_LLM_EXTRACTOR": "llm",
            "DASHBOARD_SECRET": "short",
        },
    )
    text = "\n".join(found)
    assert "reply.temperature from config file" in text and "less than or equal to 2" in text
    assert "ingest.workers from environment variable GUILDLORE_INGEST_WORKERS" in text
    assert "unknown time zone 'Mars/Olympus'" in text
    assert "not loopback: set DASHBOARD_TOKEN" in text
    assert "llm.extractor is 'llm' but no LLM is configured" in text
    assert len(found) == 5, found


def test_secret_values_are_not_echoed() -> None:
    found = problems(env={"DASHBOARD_TOKEN": "tooshort"})
    assert any("at least 16 characters" in p for p in found)
    assert not any("tooshort" in p for p in found)


def test_missing_or_broken_file(tmp_path: Path) -> None:
    (p,) = problems(config_file=tmp_path / "nope.toml", env={})
    assert "does not exist" in p
    (p,) = problems(config_file=write(tmp_path, "timezone = \n"), env={})
    assert "not valid TOML" in p


def test_report_format() -> None:
    err = SettingsError(["a is wrong", "b is wrong"])
    assert err.report().splitlines() == [
        "guildlore: 2 problems in the configuration:",
        "  - a is wrong",
        "  - b is wrong",
    ]


def test_declaration_is_complete() -> None:
    infos = declared()
    assert [i.name for i in infos] == list(Settings.model_fields)
    assert all(i.help for i in infos)
    secrets = {i.name for i in infos if i.secret}
    assert secrets == {
        "discord_token",
        "llm_api_key",
        "dashboard_token",
        "dashboard_secret",
        "voice_stt_api_key",
    }
    envs = [e for i in infos for e in i.env]
    assert len(envs) == len(set(envs))


def test_docs_table_is_generated_from_the_declaration() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "settings_table.py"),
            "--check",
            str(ROOT / "docs" / "operating" / "settings.md"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    doc = (ROOT / "docs" / "operating" / "settings.md").read_text(encoding="utf-8")
    for info in declared():
        assert f"`{info.env[0]}`" in doc
    discord = (ROOT / "docs" / "operating" / "discord.md").read_text(encoding="utf-8")
    for needle in ("Message Content Intent", "applications.commands", "scope=bot+"):
        assert needle in discord
