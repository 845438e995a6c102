"""Downtime is not silent loss: real ``guildlore run`` processes against the
local stand-in for Discord (tests/fakegateway.py), extraction through the
fake OpenAI server, on SQLite and on PostgreSQL.

- A process stopped (SIGTERM, or SIGKILL) while members talk, delete and
  edit catches up when it starts again: each message said meanwhile is
  stored and extracted exactly once; the deleted one is gone from the
  messages table, full-text search, the facts, the journal file and the
  database's bytes; the edited one holds its new text only. A third start
  reads the same history again and changes nothing.
- A gateway session Discord would not resume (the connection dropped, the
  RESUME refused) reads back what was said and never delivered.
- A clean stop hands its shard over at once: a process waiting for it
  connects long before the old claim could have expired.

Every wait is on a condition with a generous deadline; nothing asserts a
duration.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from memory import Memory, MemoryConfig
from memory.clock import DISCORD_EPOCH, parse_iso
from memory.store import lifecycle_events as store_events
from tests.fakegateway import FakeDiscord, FakeGuild
from tests.fakeopenai import FakeOpenAI, echo_facts_reply
from tests.helpers import eventually, every_cell_text, inspect_db, table_names
from tests.processes import Proc

ROOT = Path(__file__).resolve().parents[2]
GUILD = "810000000000000001"  # on shard 0 of 2: (id >> 22) % 2
CHANNEL_A = "810000000000000010"
CHANNEL_B = "810000000000000011"
QUIET = "810000000000000012"  # nothing said there since long before
THREAD = "810000000000000020"  # an active thread in CHANNEL_A
ALICE = "444444444444444444"
BOB = "555555555555555555"
WAIT_S = 120.0  # a condition's deadline: only reached when something is wrong
EXTRACTION_SCHEMAS = ("memory_facts", "memory_facts_batch")
MS = timedelta(milliseconds=1)

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Target:
    """Where every process keeps its memory, and the checking engine's config."""

    env: dict[str, str]
    config: MemoryConfig
    postgres: bool


@pytest.fixture
def target(tmp_path: Path, database_url_for: Callable[[Path], str | None]) -> Target:
    data = tmp_path / "data"
    db, journal = data / "guildlore.sqlite3", data / "memory_journal"
    url = database_url_for(data)
    env = {"GUILDLORE_DB_PATH": str(db), "GUILDLORE_JOURNAL_DIR": str(journal)}
    if url is not None:
        env["GUILDLORE_DATABASE_URL"] = url
    config = MemoryConfig(db_path=db, journal_dir=journal, database_url=url)
    return Target(env, config, url is not None)


Start = Callable[..., Awaitable[Proc]]


@pytest_asyncio.fixture
async def world(
    tmp_path: Path, target: Target
) -> AsyncIterator[tuple[FakeDiscord, FakeOpenAI, Start]]:
    guild = FakeGuild(
        GUILD, "Catch-up Guild", [CHANNEL_A, CHANNEL_B, QUIET], threads={THREAD: CHANNEL_A}
    )
    started: list[Proc] = []
    async with FakeDiscord([guild]) as discord_, FakeOpenAI(chat_handler=echo_facts_reply) as ai:

        async def start(name: str, *args: str, **env_more: str) -> Proc:
            env = {
                **os.environ,
                **target.env,
                "PYTHONPATH": str(ROOT),
                "DISCORD_TOKEN": "fake.discord.token",
                "GUILDLORE_DISCORD_API_BASE_URL": discord_.base_url,
                "GUILDLORE_DISCORD_SYNC_COMMANDS": "false",
                "GUILDLORE_DASHBOARD_ENABLED": "false",
                "GUILDLORE_LLM_BASE_URL": ai.base_url,
                "OPENAI_API_KEY": "test",
                "GUILDLORE_LLM_EXTRACTOR": "llm",
                "GUILDLORE_LLM_MAX_RETRIES": "0",
                "GUILDLORE_EMBEDDING_PROVIDER": "none",
                "GUILDLORE_VOICE_ENABLED": "false",
                # The file is rewritten right after a delete or an edit.
                "GUILDLORE_JOBS_COMPACTION_DELAY_S": "0",
                **env_more,
            }
            env.pop("GUILDLORE_CONFIG", None)
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bot",
                "run",
                *args,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                cwd=tmp_path,
            )
            p = Proc(name, proc)
            started.append(p)
            return p

        try:
            yield discord_, ai, start
        finally:
            for p in started:
                if p.proc.returncode is None:
                    p.proc.kill()
                    await p.proc.wait()


@pytest_asyncio.fixture
async def checker(target: Target) -> AsyncIterator[Memory]:
    """The test's own engine on the processes' database (no ingest)."""
    mem = await Memory.open(target.config, ingest=False)
    try:
        yield mem
    finally:
        await mem.close()


async def state(mem: Memory, message_id: str) -> str | None:
    stored = await mem.get_message(GUILD, message_id)
    return None if stored is None else stored.state


async def all_done(mem: Memory, ids: list[str]) -> bool:
    return all([await state(mem, i) == "done" for i in ids])


def extractions_of(ai: FakeOpenAI, text: str) -> int:
    """Extraction requests that carried ``text`` (a write decision's request
    quotes facts, not messages: left out)."""
    return sum(
        1
        for r in ai.chat_requests()
        if _schema(r.body) in EXTRACTION_SCHEMAS and text in json.dumps(r.body)
    )


def _schema(body: dict[str, Any]) -> str | None:
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and isinstance(fmt.get("json_schema"), dict):
        return str(fmt["json_schema"].get("name"))
    return None


def stored_count(target: Target, sql: str, *args: Any) -> int:
    con = inspect_db(target.config)
    try:
        return int(con.execute(sql, args).fetchone()[0])
    finally:
        con.close()


def journal_files_text(target: Target) -> str:
    folder = target.config.journal_dir
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(folder.glob("20*.md")))


def stored_anywhere(target: Target, word: str) -> bool:
    """Whether ``word`` is still kept: in the SQLite file and its WAL byte for
    byte; on PostgreSQL (whose files are the server's), in any cell of any table."""
    if target.postgres:
        con = inspect_db(target.config)
        try:
            return any(word in text for text in every_cell_text(con))
        finally:
            con.close()
    files = [p for p in target.config.db_path.parent.iterdir() if p.is_file()]
    return any(word.encode() in p.read_bytes() for p in files)


async def rows_with(target: Target, word: str) -> list[str]:
    """The rows still holding ``word`` (a failed check says where)."""
    con = inspect_db(target.config)
    try:
        return [
            f"{table}: {tuple(row)!r}"[:300]
            for table in table_names(con)
            if not table.startswith("vec_")
            for row in con.execute(f'SELECT * FROM "{table}"').fetchall()
            if word in repr(tuple(row))
        ]
    finally:
        con.close()


async def found_by_search(mem: Memory, word: str) -> bool:
    hits = await mem.search(GUILD, word, scope="all", gate=False)
    return any(word in json.dumps(h.text).lower() for h in hits)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
async def test_a_stopped_process_catches_up_on_what_was_said_deleted_and_edited(
    world: tuple[FakeDiscord, FakeOpenAI, Start], checker: Memory, target: Target, how: int
) -> None:
    discord_, ai, start = world
    first = await start("first")
    await first.line_with("logged in as")
    kept = await discord_.send_message(
        GUILD, CHANNEL_A, ALICE, "I keep bees on the roof", author_name="Alice"
    )
    doomed = await discord_.send_message(
        GUILD, CHANNEL_A, BOB, "My locker code nebulawombat seven", author_name="Bob"
    )
    changed = await discord_.send_message(
        GUILD, CHANNEL_B, ALICE, "I keep quokkalantern kayaks in sheds", author_name="Alice"
    )
    in_thread = await discord_.send_message(
        GUILD, THREAD, BOB, "I fix old radios every weekend", author_name="Bob"
    )
    live = [kept, doomed, changed, in_thread]
    assert await eventually(lambda: all_done(checker, live), timeout=WAIT_S), first.log()
    if target.postgres:
        # Journal files are rendered from the database by the journal job
        # (every minute): wait until the file holds the line to be erased.
        assert await eventually(
            lambda: "nebulawombat" in journal_files_text(target), timeout=WAIT_S
        ), first.log()
    else:
        assert "nebulawombat" in journal_files_text(target)
    assert stored_anywhere(target, "nebulawombat")

    late = unheard = None
    if how == signal.SIGKILL:
        unheard = await discord_.send_message(GUILD, CHANNEL_B, BOB, "I keep a ferret named Oboe")
        assert await eventually(lambda: all_done(checker, [unheard]), timeout=WAIT_S)
        # Sent as it dies: a message stored before the kill (the inbox
        # replays it) or not (catch-up reads it), either way once; a delete
        # applied before the kill, or not (catch-up finds it missing).
        late = await discord_.send_message(
            GUILD, CHANNEL_B, BOB, "I grow chillies on my balcony", author_name="Bob"
        )
        await discord_.delete_message(GUILD, CHANNEL_B, unheard)
    assert await first.stop(how) == (0 if how == signal.SIGTERM else -signal.SIGKILL), first.log()
    await discord_.wait_disconnected(0, 1)
    # New to the catch-up unless the killed process had stored it; missing
    # to it unless the killed process had received the delete.
    late_new = late is not None and await checker.get_message(GUILD, late) is None
    unheard_missing = unheard is not None and not await _delete_received(checker, unheard)

    # While it is down: members talk, one message is deleted, one edited.
    said = [
        await discord_.send_message(GUILD, channel, author, text, deliver=False)
        for channel, author, text in (
            (CHANNEL_A, ALICE, "I play chess every Sunday morning"),
            (CHANNEL_B, BOB, "I brew cider in the cellar"),
            (THREAD, ALICE, "I sail a dinghy on the lake"),
            (CHANNEL_A, BOB, "I collect vintage typewriters at home"),
            (CHANNEL_B, ALICE, "I bake sourdough bread on Fridays"),
        )
    ]
    await discord_.delete_message(GUILD, CHANNEL_A, doomed, deliver=False)
    await discord_.edit_message(
        GUILD, CHANNEL_B, changed, "My favourite drink is mango lassi", deliver=False
    )

    second = await start("second")
    await second.line_with("logged in as")
    expect = [*said, *([late] if late else [])]
    assert await eventually(lambda: all_done(checker, expect), timeout=WAIT_S), second.log()
    assert await eventually(lambda: _gone(checker, doomed), timeout=WAIT_S), second.log()
    assert await eventually(
        lambda: _says(checker, changed, "My favourite drink is mango lassi"), timeout=WAIT_S
    ), second.log()
    await second.line_with("catch-up of guild")

    # What was said meanwhile: stored once, extracted once.
    for mid, text in zip(
        said,
        [
            "I play chess every Sunday morning",
            "I brew cider in the cellar",
            "I sail a dinghy on the lake",
            "I collect vintage typewriters at home",
            "I bake sourdough bread on Fridays",
        ],
        strict=True,
    ):
        assert stored_count(target, "SELECT count(*) FROM messages WHERE id = ?", mid) == 1
        assert extractions_of(ai, text) == 1, text
    assert extractions_of(ai, "I keep bees on the roof") == 1
    assert extractions_of(ai, "I fix old radios every weekend") == 1
    if late is not None:
        assert stored_count(target, "SELECT count(*) FROM messages WHERE id = ?", late) == 1
        assert (
            stored_count(
                target, "SELECT count(*) FROM memory_facts WHERE fact LIKE ?", "%chillies%"
            )
            == 1
        )
    assert await state(checker, kept) == "done"
    if unheard is not None:
        assert await checker.get_message(GUILD, unheard) is None

    # The deleted message is gone everywhere, bytes included.
    assert not await found_by_search(checker, "nebulawombat")
    assert [f for f in await checker.facts.find(GUILD, limit=200) if "nebulawombat" in f.fact] == []
    # (Rendered from PostgreSQL, the file may wait for the journal job's
    # next round: two of them at most.)
    assert await eventually(
        lambda: "nebulawombat" not in journal_files_text(target), timeout=2 * WAIT_S
    )
    assert await eventually(lambda: not stored_anywhere(target, "nebulawombat"), timeout=WAIT_S), (
        rows_with(target, "nebulawombat")
    )
    # The edited one holds its new text only.
    assert not await found_by_search(checker, "quokkalantern")
    assert await eventually(lambda: not stored_anywhere(target, "quokkalantern"), timeout=WAIT_S), (
        rows_with(target, "quokkalantern")
    )
    assert "quokkalantern" not in journal_files_text(target)
    facts = [f.fact for f in await checker.facts.find(GUILD, limit=200)]
    assert any("mango lassi" in f for f in facts) and not any("quokkalantern" in f for f in facts)
    entry = (await checker.admin.action_log(kind="catch_up"))[0]
    assert entry.detail is not None
    assert (entry.detail["deleted"], entry.detail["edited"]) == (1 + int(unheard_missing), 1)
    assert entry.detail["ingested"] == len(said) + int(late_new)

    # A third start reads the same history again: nothing changes.
    extracted = len(ai.chat_requests())
    assert await second.stop() == 0, second.log()
    third = await start("third")
    assert "nothing new since" in await third.line_with("catch-up of guild"), third.log()
    assert len(ai.chat_requests()) == extracted
    assert len(await checker.admin.action_log(kind="catch_up")) == 1
    assert await third.stop() == 0, third.log()


async def _delete_received(mem: Memory, message_id: str) -> bool:
    """Whether a process applied the delete of a message, or recorded it to
    apply at its next start."""
    if await mem.get_message(GUILD, message_id) is None:
        return True
    events = await mem.db.read(store_events.unapplied_events)
    return any(e.kind == "delete" and message_id in e.message_ids for e in events)


async def _gone(mem: Memory, message_id: str) -> bool:
    return await mem.get_message(GUILD, message_id) is None


async def _says(mem: Memory, message_id: str, text: str) -> bool:
    stored = await mem.get_message(GUILD, message_id)
    return stored is not None and stored.content == text and stored.state == "done"


async def test_a_session_that_could_not_resume_reads_back_what_it_missed(
    world: tuple[FakeDiscord, FakeOpenAI, Start], checker: Memory
) -> None:
    discord_, _, start = world
    # Said a day ago, long before anything the bot will store.
    a_day_ago = ((datetime.now(UTC) - timedelta(days=1) - DISCORD_EPOCH) // MS) << 22
    await discord_.send_message(
        GUILD, QUIET, ALICE, "An old note", message_id=str(a_day_ago), deliver=False
    )
    bot = await start("bot")
    await bot.line_with("logged in as")
    first = await discord_.send_message(GUILD, CHANNEL_A, ALICE, "I keep bees on the roof")
    guarded = await discord_.send_message(GUILD, CHANNEL_A, BOB, "I keep goats in the yard")
    assert await eventually(lambda: all_done(checker, [first, guarded]), timeout=WAIT_S), bot.log()
    # The gateway loses these events (they are in the channel, never sent).
    missed = await discord_.send_message(
        GUILD, CHANNEL_B, BOB, "I brew cider in the cellar", deliver=False
    )
    # And CHANNEL_A's history is refused from now on: the message deleted
    # there cannot be seen missing, so it is not erased.
    discord_.forbidden.add(CHANNEL_A)
    await discord_.delete_message(GUILD, CHANNEL_A, guarded, deliver=False)
    reads = len(discord_.history)
    await discord_.drop(0, 1)  # it tries to resume, is refused, identifies afresh
    assert await eventually(lambda: all_done(checker, [missed]), timeout=WAIT_S), bot.log()
    assert "could not be read" in await bot.line_with("catch-up of guild"), bot.log()
    assert len(discord_.identified) == 2
    # The quiet channel's last message is older than the start: no request.
    assert {c for c, _ in discord_.history[reads:]} == {CHANNEL_A, CHANNEL_B, THREAD}
    assert await state(checker, guarded) == "done"
    [entry] = await checker.admin.action_log(kind="catch_up")
    assert entry.detail is not None
    assert (entry.detail["ingested"], entry.detail["failed"]) == (1, 1)
    assert await bot.stop() == 0, bot.log()


async def test_a_clean_stop_hands_its_shard_over_at_once(
    world: tuple[FakeDiscord, FakeOpenAI, Start], checker: Memory
) -> None:
    discord_, _, start = world
    shard = ("--shard-count", "2", "--shard-ids", "0")
    # A claim that would hold ten minutes without its holder giving it back.
    lease = {"GUILDLORE_DISCORD_SHARD_LEASE_S": "600"}
    old = await start("old", *shard, **lease)
    await old.line_with("logged in as")
    [held] = [x for x in await checker.leases.all() if x.name == "shard:0/2"]
    new = await start("new", *shard, **lease)
    await new.line_with("waiting for")
    assert len(discord_.identified) == 1  # the newcomer waits for the shard

    said = await discord_.send_message(GUILD, CHANNEL_A, ALICE, "I keep bees on the roof")
    assert await eventually(lambda: all_done(checker, [said]), timeout=WAIT_S), old.log()
    # Said after the old process stopped reading, before the new one connects.
    between = await discord_.send_message(
        GUILD, CHANNEL_B, BOB, "I brew cider in the cellar", deliver=False
    )
    assert await old.stop() == 0, old.log()

    await discord_.wait_identified(0, 2, timeout=WAIT_S)
    assert datetime.now(UTC) < parse_iso(held.expires_at)  # the old claim still ran
    assert await eventually(lambda: all_done(checker, [between]), timeout=WAIT_S), new.log()
    leases = await checker.leases.all()
    assert [x.holder for x in leases if x.name == "shard:0/2"] != [held.holder]
    assert [x for x in leases if x.holder == held.holder] == []  # job leases too
    assert await new.stop() == 0, new.log()
