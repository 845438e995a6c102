"""The change header: a guild's revision moves with every change to memory
(in the change's own transaction, whatever the write path), and a reply's
memory section starts with "Memory updates since rev N:" and at most three
bullets when something its channel may see changed since the channel's
previous reply."""

from __future__ import annotations

from typing import Any

import pytest

from memory.engine import Memory
from memory.reply.conversation import assemble_prompt
from memory.store.facts import add_history
from memory.store.revisions import current_rev
from tests.helpers import CHANNEL, GUILD
from tests.reply.test_conversation import PERSONA, PRIVATE, request

HEADER = "Memory updates since rev"


async def system_of(mem: Memory, message_id: str) -> str:
    prompt = await assemble_prompt(mem, request("hello", message_id=message_id), persona=PERSONA)
    return str(prompt.messages[0]["content"])


async def lore(mem: Memory, line: str, channel: str = CHANNEL) -> None:
    assert await mem.lore.remember(GUILD, line, source_text=line, channel_id=channel) is not None


async def rev(mem: Memory) -> int:
    return await mem.db.read(current_rev, GUILD)


def header_lines(system: str) -> list[str]:
    lines = system.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(HEADER))
    out = [lines[at]]
    for line in lines[at + 1 :]:
        if not line.startswith("- "):
            break
        out.append(line)
    return out


async def test_the_header_appears_only_after_a_change_with_at_most_three_bullets(
    make_memory: Any,
) -> None:
    mem = await make_memory(embeddings="none")
    await lore(mem, "the summer meetup is in Zermatt")
    assert HEADER not in await system_of(mem, "900000000000000001")  # the channel's first reply
    assert HEADER not in await system_of(mem, "900000000000000002")  # nothing changed
    seen = await rev(mem)
    for line in (
        "the guild's favourite game is Valheim",
        "the raid night is on Friday",
        "the server was founded in 2019",
        "the guild mascot is a red fox",
    ):
        await lore(mem, line)
    assert await rev(mem) == seen + 4
    system = await system_of(mem, "900000000000000003")
    lines = header_lines(system)
    assert lines[0] == f"{HEADER} {seen}:"
    assert len(lines) == 4  # the header line and three bullets, newest first
    assert lines[1].startswith("- +added: ") and "red fox" in lines[1]
    assert "founded in 2019" in lines[2] and "raid night" in lines[3]
    # The header opens the memory section: before the first memory block.
    assert system.index(HEADER) < system.index("Known facts about this user:")
    assert HEADER not in await system_of(mem, "900000000000000004")


async def test_a_noop_does_not_move_the_revision_and_a_supersede_is_named(
    make_memory: Any,
) -> None:
    mem = await make_memory(embeddings="none")
    await lore(mem, "the guild's favourite game is Valheim")
    await system_of(mem, "900000000000000001")
    before = await rev(mem)
    await lore(mem, "the guild's favourite game is Valheim")  # the same text: a noop
    assert await rev(mem) == before
    assert HEADER not in await system_of(mem, "900000000000000002")
    await lore(mem, "the guild's favourite game is Elden Ring")
    # The new fact's add, and a supersede row on each side.
    assert await rev(mem) == before + 3
    lines = header_lines(await system_of(mem, "900000000000000003"))
    assert lines[1:] == ["- ↻superseded: Memory line: the guild's favourite game is Elden Ring."]


async def test_edits_archives_and_deletes_move_the_revision(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    await lore(mem, "the raid night is on Friday")
    (fact,) = await mem.facts.find(GUILD)
    await system_of(mem, "900000000000000001")
    start = await rev(mem)
    await mem.facts.set_active(GUILD, fact.id, False)
    assert await rev(mem) == start + 1
    lines = header_lines(await system_of(mem, "900000000000000002"))
    assert lines == [f"{HEADER} {start}:", "- −archived: Memory line: the raid night is on Friday."]
    await mem.facts.delete(GUILD, fact.id)
    assert await rev(mem) == start + 2
    # A deleted fact has no text left to name: no bullet, no header.
    assert HEADER not in await system_of(mem, "900000000000000003")


async def test_changes_in_a_channel_the_reply_may_not_show_stay_out(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    await system_of(mem, "900000000000000001")
    await lore(mem, "the mods meet on Sunday", channel=PRIVATE)
    assert HEADER not in await system_of(mem, "900000000000000002")


async def test_the_revision_moves_with_its_change_or_not_at_all(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    await lore(mem, "the raid night is on Friday")
    start = await rev(mem)

    def change_then_fail(con: Any) -> None:
        add_history(con, GUILD, None, None, "archive", None, None, "test", now="2026-11-22")
        assert current_rev(con, GUILD) == start + 1  # seen inside the transaction
        raise RuntimeError("the change fails after its history row")

    with pytest.raises(RuntimeError):
        await mem.db.write(change_then_fail)
    assert await rev(mem) == start  # rolled back with the change
