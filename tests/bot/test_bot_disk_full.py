"""The running bot on a full disk: a message that cannot be stored is one
logged line for the whole episode, not a traceback per message, and the
count of the others comes with the line that says storing works again."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import discord.ext.test as dpytest
import pytest

from memory.db.sqlite import driver as sqlite
from tests.bot.test_bot import make_harness
from tests.fakeopenai import FakeOpenAI
from tests.tmpfs import fill, tmpfs


@pytest.mark.sqlite_only("a full disk under the SQLite file")
async def test_messages_on_a_full_disk_are_one_line_then_counted(
    make_memory: Any,
    fake_openai: FakeOpenAI,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    store_backend: str,
) -> None:
    with tmpfs(tmp_path / "disk", "40m") as disk:
        memory = await make_memory(data_dir=disk / "data", embeddings="none")
        h = await make_harness(memory, fake_openai, chat=False)
        try:
            await h.say("I keep bees on my roof.")
            await h.settle()
            # An empty WAL: the next commit must grow it, and the disk is full.
            con = sqlite.connect(disk / "data" / "guildlore.sqlite3")
            try:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                con.close()
            filler = fill(disk)
            caplog.clear()
            caplog.set_level(logging.INFO, logger="bot.cogs.listener")
            for n in range(3):
                await h.say(f"Message {n}: I also keep chickens in the yard.")
            mine = [r for r in caplog.records if r.name == "bot.cogs.listener"]
            errors = [r for r in mine if r.levelno >= logging.ERROR]
            assert len(errors) == 1, [r.getMessage() for r in mine]
            assert errors[0].getMessage().startswith("storing incoming messages: the disk")
            assert "is full" in errors[0].getMessage()
            assert not [r for r in mine if r.exc_info]

            filler.unlink()
            await h.say("I grow basil on the balcony.")
            said = [r.getMessage() for r in caplog.records if r.name == "bot.cogs.listener"]
            assert "storing incoming messages works again (2 more failures meanwhile)" in said
            await h.settle()
        finally:
            await dpytest.empty_queue()
            h.bot.accepting = False
