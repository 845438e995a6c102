"""The import embeds facts first and message vectors after (memory.importer.session).

Real engine, local MiniLM, the bundled sample guild (a few hundred messages of
the real export, pseudonymised).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.commands.import_report import summary
from memory import ImportStop, import_files

SAMPLE = Path(__file__).resolve().parents[2] / "bot" / "data" / "sample_guild.json"


def _counts(con: Any) -> tuple[int, int, int]:
    embeddable = con.execute(
        "SELECT count(*) FROM messages WHERE length(trim(content)) >= 2"
    ).fetchone()[0]
    msg_vectors = con.execute("SELECT count(*) FROM message_vectors").fetchone()[0]
    active = con.execute("SELECT count(*) FROM memory_facts WHERE is_active = 1").fetchone()[0]
    return int(embeddable), int(msg_vectors), int(active)


async def test_import_ends_with_every_fact_and_message_embedded(make_memory: Any) -> None:
    mem = await make_memory()
    report = await import_files(mem, [SAMPLE])
    assert report.settled and not report.interrupted and not report.errors
    assert not report.message_vectors_pending
    assert 0 < report.ready_seconds <= report.seconds
    embeddable, msg_vectors, active = await mem.db.read(_counts)
    assert active > 0 and report.fact_vectors >= active
    assert msg_vectors == embeddable == report.message_vectors
    # The importer's deferral is switched off again: live messages embed as before.
    assert mem.embeddings.defer_messages is False
    # Importing again finds nothing to embed.
    again = await import_files(mem, [SAMPLE])
    assert again.already == report.new and again.message_vectors == 0


async def test_deferred_messages_get_no_vector_until_back_filled(
    make_memory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory.importer.reader import iter_export

    mem = await make_memory()
    messages = [r.message for r in iter_export(SAMPLE) if r.message is not None][:120]
    mem.embeddings.defer_messages = True
    for m in messages:
        await mem.ingest_message(m)
    assert await mem.settle(timeout=60)
    embeddable, msg_vectors, _ = await mem.db.read(_counts)
    assert embeddable > 0 and msg_vectors == 0, "deferred: facts only"

    # A back-fill told to stop after its first call leaves the rest missing ...
    calls = 0

    def stop_after_one() -> bool:
        nonlocal calls
        calls += 1
        return calls > 1

    gid = messages[0].guild_id or ""
    from memory.embed import service as embedding_jobs

    monkeypatch.setattr(embedding_jobs, "MESSAGE_BACKFILL_CALL", 50)
    first = await mem.embeddings.reindex([gid], include_facts=False, should_stop=stop_after_one)
    assert first == {"facts": 0, "messages": 50}
    # ... and the next run embeds exactly the rest (texts too short to embed
    # are skipped, not retried for ever).
    second = await mem.embeddings.reindex([gid], include_facts=False)
    assert second["messages"] == embeddable - 50
    _, msg_vectors, _ = await mem.db.read(_counts)
    assert msg_vectors == embeddable


async def test_ctrl_c_while_embedding_messages_stops_and_reindex_finishes(
    make_memory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from bot.commands._common import Progress
    from memory.embed import service as embedding_jobs

    monkeypatch.setattr(embedding_jobs, "MESSAGE_BACKFILL_CALL", 40)
    stop = ImportStop()

    class CtrlCOnFirstBatch(Progress):
        """Presses Ctrl-C when the first batch of message vectors is reported."""

        def update(
            self, done_bytes: int, messages: int, note: str | None = None, **kw: Any
        ) -> None:
            if note and note.startswith("embedding messages"):
                stop.requested.set()
            super().update(done_bytes, messages, note, **kw)

    mem = await make_memory()
    progress = CtrlCOnFirstBatch(SAMPLE.stat().st_size, stream=io.StringIO(), tty=False)
    report = await import_files(mem, [SAMPLE], stop=stop, progress=progress)
    assert report.settled, "every message was processed before the vectors began"
    assert report.interrupted and report.message_vectors_pending
    assert report.message_vectors == 40
    assert "guildlore reindex" in summary(report)
    embeddable, msg_vectors, _ = await mem.db.read(_counts)
    assert msg_vectors == 40 < embeddable
    totals = await mem.admin.reindex()
    assert totals.messages == embeddable - 40


async def test_import_embeds_at_normal_priority_and_live_work_stays_niced(
    make_memory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Beside busy processes a nice-10 thread gets about a tenth of a core, so
    # an import (a foreground command) must not embed niced; live work must.
    import os
    import threading

    from memory.embed import local as embed_module
    from memory.embed.threads import BACKGROUND_NICE
    from tests.helpers import msg

    seen: list[int] = []
    run = embed_module._LoadedModel.run_encoded

    def spy(self: Any, *args: Any) -> Any:
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return run(self, *args)

    monkeypatch.setattr(embed_module._LoadedModel, "run_encoded", spy)
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    mem = await make_memory()
    report = await import_files(mem, [SAMPLE])
    assert report.message_vectors > 0 and seen
    assert set(seen) == {base}, "the import's embedding ran niced"
    assert mem.embeddings.low_priority is True, "switched back on after the import"

    seen.clear()
    await mem.ingest_message(msg("I am learning to play the bagpipes this winter."))
    assert await mem.settle(timeout=60)
    assert seen and set(seen) == {min(19, base + BACKGROUND_NICE)}
