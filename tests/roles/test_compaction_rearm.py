"""An erase committed while the debounced rewrite of the database runs is not
covered by that rewrite: the timer goes round once more, rather than leaving
the erased bytes on disk until the next erase or the shutdown (a catch-up
applies a delete and an edit back to back)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memory.store import erase
from tests.helpers import GUILD, ScriptedExtractor, echo_fact, eventually
from tests.ingest.test_erase_compaction import _on_disk, _stored


async def test_an_erase_during_the_rewrite_gets_a_rewrite_of_its_own(
    make_memory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = await make_memory(
        extractor=ScriptedExtractor(fn=echo_fact), embeddings="none", compaction_delay_s=0
    )
    first, second = await _stored(mem, 2)
    rewriting, go_on = asyncio.Event(), asyncio.Event()
    real = erase.compact_erased

    async def held_rewrite(db: Any) -> Any:
        # The first rewrite waits here until the second erase has committed.
        if not go_on.is_set():
            rewriting.set()
            await go_on.wait()
        return await real(db)

    monkeypatch.setattr(erase, "compact_erased", held_rewrite)
    runs = mem.compactor.runs
    await mem.delete_messages(GUILD, [first])
    await asyncio.wait_for(rewriting.wait(), 30)
    await mem.delete_messages(GUILD, [second])  # its request finds the timer busy
    go_on.set()

    assert await eventually(lambda: not mem.compactor.pending)
    assert mem.compactor.runs == runs + 2
    assert not _on_disk(mem)
