"""A member who forgot everything and opted out stays forgotten, checked on
disk (issue 31): through the real discord.py bot, after ``/memory
forget-me`` with "and stop remembering me", fifty more messages of theirs —
one mentioning the bot — leave no new row in any table and not one byte of
their text in the database file, its WAL, the journal or MEMORY.md, and no
vector. On PostgreSQL the files are the server's: there the check is that
no table gained or changed a row and no stored cell holds their text.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from bot.cogs.trust_commands import forget_me_prompt
from tests.bot.test_bot import Harness, open_harness, reply_json
from tests.fakeopenai import FakeOpenAI
from tests.helpers import inspect_db, table_names

AFTER = 50


@pytest_asyncio.fixture
async def harness(make_memory: Any, fake_openai: FakeOpenAI) -> AsyncIterator[Harness]:
    async for h in open_harness(make_memory, fake_openai):
        yield h


def _marker(i: int) -> str:
    return f"quorvanthel{i:04d}"


def _all_rows(h: Harness) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, as text (ordered, so two reads compare)."""
    con = inspect_db(h.memory)
    try:
        out: dict[str, list[tuple[Any, ...]]] = {}
        for table in table_names(con):
            try:
                rows = con.execute(f'SELECT * FROM "{table}"').fetchall()
            except Exception:  # a virtual table's shadow that cannot be read whole
                continue
            out[table] = sorted(tuple(repr(v) for v in r) for r in rows)
        return out
    finally:
        con.close()


def _files(h: Harness) -> list[Path]:
    data = h.memory.config.db_path.parent
    return [p for p in sorted(data.rglob("*")) if p.is_file()]


async def test_forgotten_and_opted_out_leaves_no_new_row_anywhere(harness: Harness) -> None:
    h = harness
    gid, uid = str(h.guild.id), str(h.alice.id)
    for i in range(10):
        await h.say(f"Before {i}: I love hiking in the Alps and my cat is called Pebble{i}.")
    await h.say("I love chess and sailing.", member=h.bob)
    await h.settle()

    prompt = forget_me_prompt(h.memory, h.guild, h.alice)
    assert prompt.view is not None
    answer = await prompt.view.stay_forgotten()  # type: ignore[attr-defined]
    assert "Deletion receipt `R-" in answer and "nothing they write here is remembered" in answer
    await h.settle()
    await h.memory.refresh_snapshot()
    before = _all_rows(h)
    assert before["member_opt_outs"]

    for i in range(AFTER):
        await h.say(f"After {i}: my secret word is {_marker(i)} and I love rowing.")
    await h.settle()
    await h.memory.refresh_snapshot()
    after = _all_rows(h)
    changed = {
        table: (len(before.get(table, [])), len(rows))
        for table, rows in after.items()
        if rows != before.get(table, [])
    }
    assert changed == {}, f"new or changed rows: {changed}"
    assert await h.memory.facts.find(gid, subject=uid, active=None) == []
    assert await h.memory.search(gid, "rowing secret word", scope="all") == []

    # She asks the bot: it answers, and keeps nothing of her words — new rows
    # are only the bot's own: its content-free ``reply`` entry, the traces of
    # the memories it used (other members' facts, none of her words), the
    # memory revision the channel's reply saw, and the operator's count of
    # the reply (the request log's row and the day's series: time, model,
    # tokens, outcome; no member, no text).
    h.fake.script_chat(reply_json("Hello!"))
    await h.say(f"{h.mention} hello, my secret word is {_marker(AFTER)}")
    assert [m.content for m in h.sent()] == ["Hello!"]
    await h.settle()
    replied = _all_rows(h)
    grown = {t for t, rows in replied.items() if rows != after.get(t, [])}
    assert grown <= {
        "action_log",
        "memory_traces",
        "channel_revisions",
        "request_log",
        "usage_daily",
        "usage_delta",
    }, grown
    for table in ("request_log", "usage_daily", "usage_delta"):
        added = [r for r in replied.get(table, []) if r not in after.get(table, [])]
        assert uid not in repr(added), (table, added)
    new_logs = [r for r in replied["action_log"] if r not in after["action_log"]]
    assert sorted(r[3] for r in new_logs) == ["'memory_trace'", "'reply'"], new_logs
    assert _marker(AFTER) not in repr(replied) and "rowing" not in repr(replied)

    if h.memory.config.database_url:
        return
    # SQLite: not one byte of what she wrote since, in any file of the data dir.
    for path in _files(h):
        data = path.read_bytes()
        leaked = [i for i in range(AFTER + 1) if _marker(i).encode() in data]
        assert not leaked, f"{path.name} holds {len(leaked)} of her later messages"
        assert b"rowing" not in data, path.name
