"""``Memory.members``: a member's own view never hands them someone else's words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory.member_export import export_json
from tests.helpers import ALICE, BOB, GUILD, ScriptedExtractor, echo_fact, msg

MEMBERS_GUIDE = Path(__file__).resolve().parents[2] / "docs" / "members.md"


async def test_a_fact_about_a_member_from_someone_elses_message_quotes_nothing(
    make_memory: Any,
) -> None:
    mem = await make_memory(extractor=ScriptedExtractor(fn=echo_fact), embeddings="none")
    own = msg("I collect old maps of Lisbon", author=ALICE, name="Alice")
    told = msg("Alice told me she fears deep water", author=BOB, name="Bob")
    for m in (own, told):
        assert await (await mem.ingest_message(m)).wait()
    await mem.settle()

    def about_alice_from_bob(con: Any) -> None:
        con.execute(
            "UPDATE memory_facts SET subject = ? WHERE source_message_id = ?", (ALICE, told.id)
        )

    await mem.db.write(about_alice_from_bob)

    record = await mem.members.about(GUILD, ALICE, None)
    by_source = {f.fact: (f.source_message_id, f.evidence) for f in record.facts}
    assert len(by_source) == 2
    assert (own.id, own.content) in by_source.values()
    assert (None, None) in by_source.values()
    export = await mem.members.export(GUILD, ALICE, None)
    document = export_json(export)
    # The fact and its history's text ("add": the same words), never a quote.
    assert told.id not in document and document.count("fears deep water") == 2
    assert [m.id for m in export.messages] == [own.id]
    assert record.message_counts == {own.channel_id: 1}


async def test_the_members_guide_documents_every_field_of_the_export(make_memory: Any) -> None:
    from memory.member_export import SCHEMA, export_document

    mem = await make_memory(extractor=ScriptedExtractor(fn=echo_fact), embeddings="none")
    assert await (await mem.ingest_message(msg("I collect old maps of Lisbon"))).wait()
    await mem.settle()
    document = export_document(await mem.members.export(GUILD, ALICE, None))
    guide = MEMBERS_GUIDE.read_text(encoding="utf-8")
    section = guide[guide.index(SCHEMA) :]
    section = section.split("\n## ", 1)[0]
    keys = [*document, *document["facts"][0], *document["messages"][0]]
    assert [k for k in keys if f"`{k}`" not in section and f"`{k}[]`" not in section] == []
