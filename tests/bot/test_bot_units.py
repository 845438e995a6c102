"""Pure parts of the bot (reply splitting, mention stripping), the jobs, the run command."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from bot.cogs.replies import split_message
from bot.convert import strip_self_mention
from bot.jobs import Jobs


def test_split_message() -> None:
    assert split_message("short") == ["short"]
    text = ("para one " * 150).strip() + "\n\n" + ("para two " * 150).strip()
    chunks = split_message(text)
    assert all(len(c) <= 2000 for c in chunks) and len(chunks) == 2
    assert chunks[0].endswith("one") and chunks[1].startswith("para two")
    unbroken = "x" * 4500
    assert [len(c) for c in split_message(unbroken)] == [2000, 2000, 500]
    capped = split_message("y" * 20000)
    assert len(capped) == 4 and capped[-1].endswith("…") and len(capped[-1]) <= 2000


def test_strip_self_mention() -> None:
    assert strip_self_mention("<@42> hi <@!42> there @Bot ok", ["Bot"], [42]) == "hi there ok"


async def test_jobs_schedule_run_and_stop(make_memory: Any, tmp_path: Any) -> None:
    memory = await make_memory(embeddings="none")
    jobs = Jobs(memory, timezone="Europe/Berlin", snapshot_interval_s=300, reindex_interval_min=0)
    jobs.start()
    assert jobs.scheduler is not None
    found = {j.id: j for j in jobs.scheduler.get_jobs()}
    # Re-index off; journal files written from the database where days are
    # rendered from it (PostgreSQL), owed journal lines written where they are
    # appended (SQLite).
    assert set(found) == {
        "snapshot",
        "journal_rollover",
        "action_log_prune",
        "retention",
        "consent_expiry",
        "review_expiry",
        "memory_upkeep",
        "episodes",
        "consolidation",
        "journal_files" if memory.journals.from_database else "journal_owed",
    }
    assert str(found["journal_rollover"].trigger.timezone) == "Europe/Berlin"
    assert found["snapshot"].trigger.interval.total_seconds() == 300

    await found["journal_rollover"].func()
    await found["snapshot"].func()
    await found["action_log_prune"].func()
    await found["memory_upkeep"].func()
    await found["episodes"].func()
    if not memory.journals.from_database:
        await found["journal_owed"].func()
    assert jobs.runs.pop("journal_owed", 0) == (0 if memory.journals.from_database else 1)
    assert jobs.runs == {
        "journal_rollover": 1,
        "snapshot": 1,
        "action_log_prune": 1,
        "memory_upkeep": 1,
        "episodes": 1,
    }
    assert memory.snapshot_path.exists()

    async def boom() -> None:
        raise RuntimeError("kaput")

    await jobs._wrap("boom", boom)()  # logged, not raised
    (entry,) = await memory.admin.action_log(kind="bot_error")
    assert entry.message.startswith("job_error: boom: kaput")
    await jobs.stop()
    assert jobs.scheduler is None


def test_run_without_token_explains(capsys: pytest.CaptureFixture[str]) -> None:
    from bot.commands.run import run

    code = run(argparse.Namespace(config=None, data_dir=None))
    err = capsys.readouterr().err
    assert code == 2
    assert "DISCORD_TOKEN" in err and "export DISCORD_TOKEN=" in err
    assert "guildlore demo" in err


def test_run_reports_settings_problems(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.commands.run import run

    monkeypatch.setenv("DISCORD_TOKEN", "x")
    monkeypatch.setenv("GUILDLORE_REPLY_TEMPERATURE", "hot")
    code = run(argparse.Namespace(config=None, data_dir=None))
    err = capsys.readouterr().err
    assert code == 2
    assert "1 problem in the configuration" in err and "reply.temperature" in err


async def test_missing_message_content_intent_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from bot.client import GuildloreBot, make_intents
    from bot.cogs.listener import MESSAGE_CONTENT_WARNING

    bot = GuildloreBot(memory=None, intents=make_intents(message_content=False))  # type: ignore[arg-type]
    with caplog.at_level("WARNING"):
        await bot.load_extension("bot.cogs.listener")
    assert MESSAGE_CONTENT_WARNING in caplog.text
    assert "Developer Portal" in MESSAGE_CONTENT_WARNING
    await bot.close()


async def test_the_members_intent_is_asked_for_only_when_configured(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from bot.client import GuildloreBot, make_intents
    from bot.settings import Settings

    assert not make_intents().members and make_intents(members=True).members
    assert Settings().discord_members_intent is False
    bot = GuildloreBot(memory=None, intents=make_intents())  # type: ignore[arg-type]
    with caplog.at_level("INFO"):
        await bot.load_extension("bot.cogs.lifecycle")
    assert "member_leave_policy has no effect" in caplog.text
    await bot.close()


async def test_gateway_errors_become_clear_messages(capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    import discord

    from bot.runtime import _gateway_outcome

    async def fail(exc: BaseException) -> None:
        raise exc

    for exc, needle in [
        (discord.PrivilegedIntentsRequired(None), "Message Content Intent"),
        (discord.LoginFailure("bad"), "rejected the token"),
    ]:
        task = asyncio.create_task(fail(exc))
        await asyncio.wait({task})
        assert _gateway_outcome(task) == 1
        assert needle in capsys.readouterr().err
