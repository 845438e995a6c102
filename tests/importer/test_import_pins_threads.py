"""Import: DiscordChatExporter's ``isPinned`` and ``timestampEdited``, the raw
API's ``pinned`` and ``edited_timestamp``, and raw API thread archives
(``{"thread": {...}, "messages": [...]}``, alone or in an array), with small
hand-written files through the real engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memory.engine import Memory
from memory.errors import ImportFormatError
from memory.importer.reader import iter_export, read_header
from memory.importer.session import import_files
from memory.models import LORE_SUBJECT
from tests.helpers import journal_text

GUILD, CHANNEL, THREAD = "810000000000000001", "820000000000000001", "830000000000000001"
ALICE, BOB = "840000000000000001", "840000000000000002"
RULE = "Raid night is on Friday at 8pm in the main hall."


def dce_message(mid: str, content: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": mid,
        "type": "Default",
        "timestamp": "2024-05-01T10:00:00+00:00",
        "timestampEdited": None,
        "isPinned": False,
        "content": content,
        "author": {"id": ALICE, "name": "alice", "nickname": "Alice", "isBot": False},
        **extra,
    }


def api_message(mid: str, content: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": mid,
        "type": 0,
        "channel_id": THREAD,
        "content": content,
        "timestamp": "2024-05-02T10:00:00.000000+00:00",
        "edited_timestamp": None,
        "pinned": False,
        "author": {"id": BOB, "username": "bob", "global_name": "Bob"},
        **extra,
    }


def thread(tid: str = THREAD, name: str = "Raid planning") -> dict[str, Any]:
    return {"id": tid, "name": name, "parent_id": CHANNEL, "guild_id": GUILD, "type": 11}


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


async def canon(mem: Memory) -> list[Any]:
    return await mem.facts.find(GUILD, subject=LORE_SUBJECT, fact_type="canon")


async def test_dce_pinned_and_edited(make_memory: Any, tmp_path: Path) -> None:
    export = {
        "guild": {"id": GUILD, "name": "Raiders"},
        "channel": {"id": CHANNEL, "type": "GuildTextChat", "name": "general"},
        "messages": [
            dce_message("850000000000000001", RULE, isPinned=True),
            dce_message(
                "850000000000000002",
                "I love hiking in the Alps.",
                timestampEdited="2024-05-01T11:30:00+00:00",
            ),
            dce_message("850000000000000003", "I work as a nurse in Berlin."),
        ],
        "messageCount": 3,
    }
    mem = await make_memory(embeddings="none")
    report = await import_files(mem, [write(tmp_path / "dce.json", export)])
    assert report.pinned == 1 and report.as_dict()["pinned"] == 1
    (fact,) = await canon(mem)
    assert fact.fact == f"Pinned: {RULE}" and fact.source_message_id == "850000000000000001"
    assert fact.observed_at == "2024-05-01T10:00:00.000Z"
    text = await journal_text(mem)
    assert "(edited) I love hiking in the Alps." in text
    assert "(edited) I work" not in text and "] I work as a nurse in Berlin." in text
    edited = await mem.get_message(GUILD, "850000000000000002")
    assert edited is not None and edited.edited_at == "2024-05-01T11:30:00.000Z"
    plain = await mem.get_message(GUILD, "850000000000000003")
    assert plain is not None and plain.edited_at is None
    # The edited message's facts are extracted as usual.
    facts = [f.fact for f in await mem.facts.find(GUILD, subject=ALICE)]
    assert "Alice loves hiking in the Alps." in facts
    # A second import changes nothing.
    again = await import_files(mem, [tmp_path / "dce.json"])
    assert again.already == 3 and len(await canon(mem)) == 1


async def test_a_thread_archive(make_memory: Any, tmp_path: Path) -> None:
    archive = {
        "thread": thread(),
        "messages": [
            api_message("860000000000000001", RULE, pinned=True),
            api_message(
                "860000000000000002",
                "I love climbing in Fontainebleau.",
                edited_timestamp="2024-05-02T12:00:00.000000+00:00",
            ),
        ],
    }
    path = write(tmp_path / "thread.json", archive)
    header = read_header(path)
    assert (header.format, header.guild_id, header.channel_id, header.channel_name) == (
        "thread",
        GUILD,
        THREAD,
        "Raid planning",
    )
    records = list(iter_export(path))
    assert [r.message.guild_id for r in records if r.message] == [GUILD, GUILD]
    mem = await make_memory(embeddings="none")
    report = await import_files(mem, [path])
    assert report.errors == [] and report.new == 2 and report.pinned == 1
    (fact,) = await canon(mem)
    assert fact.fact == f"Pinned: {RULE}" and fact.channel_id == THREAD
    assert "(edited) I love climbing in Fontainebleau." in await journal_text(mem)
    facts = [f.fact for f in await mem.facts.find(GUILD, subject=BOB)]
    assert facts == ["Bob loves climbing in Fontainebleau."]
    channels = {c["channel_id"]: c["name"] for c in await mem.guilds.channels(GUILD)}
    assert channels[THREAD] == "Raid planning"


async def test_an_array_of_thread_archives(make_memory: Any, tmp_path: Path) -> None:
    other = "830000000000000002"
    archives = [
        {"thread": thread(), "messages": [api_message("870000000000000001", RULE, pinned=True)]},
        {
            "thread": thread(other, "Recipes"),
            "messages": [
                api_message("870000000000000002", "I love baking sourdough.", channel_id=other)
            ],
        },
        {"not": "a thread"},
    ]
    path = write(tmp_path / "threads.json", archives)
    records = list(iter_export(path))
    assert [(r.index, r.message_id, r.skip_reason) for r in records] == [
        (0, "870000000000000001", None),
        (1, "870000000000000002", None),
        (2, None, "bad_record"),
    ]
    mem = await make_memory(embeddings="none")
    report = await import_files(mem, [path])
    assert report.errors == [] and report.new == 2 and report.pinned == 1
    assert report.stats.skipped == {"bad_record": 1}
    stored = await mem.get_message(GUILD, "870000000000000002")
    assert stored is not None and stored.channel_id == other
    assert [f.fact for f in await mem.facts.find(GUILD, subject=BOB)] == [
        "Bob loves baking sourdough."
    ]


def test_thread_messages_without_a_guild_take_the_default(tmp_path: Path) -> None:
    bare = {k: v for k, v in thread().items() if k != "guild_id"}
    path = write(
        tmp_path / "t.json", {"thread": bare, "messages": [api_message("1" * 18, "Hi there")]}
    )
    assert [r.skip_reason for r in iter_export(path)] == ["no_guild"]
    (record,) = iter_export(path, default_guild_id=GUILD)
    assert record.message is not None and record.message.guild_id == GUILD


def test_a_list_of_dce_exports_is_still_refused(tmp_path: Path) -> None:
    export = {"guild": {"id": GUILD}, "channel": {"id": CHANNEL}, "messages": []}
    path = write(tmp_path / "list.json", [export])
    with pytest.raises(ImportFormatError, match="list of DiscordChatExporter exports"):
        list(iter_export(path))


async def test_an_imported_edited_message_deleted_later_leaves_no_line(
    make_memory: Any, tmp_path: Path
) -> None:
    export = {
        "guild": {"id": GUILD, "name": "Raiders"},
        "channel": {"id": CHANNEL, "type": "GuildTextChat", "name": "general"},
        "messages": [
            dce_message(
                "880000000000000001",
                "I love hiking with my zanzibarquokka.",
                timestampEdited="2024-05-01T11:30:00+00:00",
            )
        ],
    }
    mem = await make_memory(embeddings="none")
    await import_files(mem, [write(tmp_path / "dce.json", export)])
    assert "(edited) I love hiking with my zanzibarquokka." in await journal_text(mem)
    await mem.delete_messages(GUILD, ["880000000000000001"])
    text = await journal_text(mem)
    # An appended line is marked deleted; a rendered day leaves it out.
    assert "zanzibarquokka" not in text and ("[deleted]" in text or mem.journals.from_database)


async def test_a_message_edited_twice_keeps_one_line_with_the_last_text(
    make_memory: Any, tmp_path: Path
) -> None:
    export = {
        "guild": {"id": GUILD, "name": "Raiders"},
        "channel": {"id": CHANNEL, "type": "GuildTextChat", "name": "general"},
        "messages": [dce_message("880000000000000002", "I love hiking in the Alps.")],
    }
    mem = await make_memory(embeddings="none")
    await import_files(mem, [write(tmp_path / "dce.json", export)])
    await mem.edit_message(GUILD, "880000000000000002", "I love sailing on lakes.")
    await mem.settle()
    await mem.edit_message(GUILD, "880000000000000002", "I love climbing in Fontainebleau.")
    await mem.settle()
    text = await journal_text(mem)
    assert "(edited) I love climbing in Fontainebleau." in text
    assert "sailing" not in text and "hiking" not in text
