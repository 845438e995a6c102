"""Members in control, in the engine (issue 31), on both backends: opt-outs
enforced at admission for every way in, deletion receipts (one guild, every
guild, one fact) an operator can check, corrections rewritten like any fact,
fact history, the daily write caps, a message withheld while its sensitive
fact waits for consent, and the memory tool's ``about: "me"``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory.engine import Memory
from memory.errors import InvalidInput
from memory.ingest.write_caps import CapReached
from memory.models import LORE_SUBJECT
from memory.reply.memory_query import QueryScope, run_query
from memory.roles.members import FactHidden, FactMissing, NotYours
from tests.helpers import ALICE, BOB, CHANNEL, GUILD, OTHER_GUILD, inspect_db, journal_text, msg

OTHER_CHANNEL = "333333333333333334"


async def say(mem: Memory, text: str, **kw: Any) -> Any:
    m = msg(text, **kw)
    assert await (await mem.ingest_message(m)).wait()
    assert await mem.settle(30)
    return m


def rows(mem: Memory, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    con = inspect_db(mem)
    try:
        return [tuple(r) for r in con.execute(sql, params)]
    finally:
        con.close()


async def fact_with(mem: Memory, word: str, subject: str = ALICE, guild: str = GUILD) -> Any:
    found = await mem.facts.find(guild, subject=subject, active=None, limit=200)
    return next(f for f in found if word in f.fact)


# -- opt-out -------------------------------------------------------------------------------


async def test_opted_out_messages_are_rejected_at_admission_on_every_path(
    make_memory: Any,
) -> None:
    mem = await make_memory(embeddings="none")
    await say(mem, "I love hiking in the Alps.")
    assert await mem.opt_outs.change(GUILD, ALICE, True)
    assert not await mem.opt_outs.change(GUILD, ALICE, True)  # already
    assert await mem.opt_outs.is_out(GUILD, ALICE) and mem.opt_outs.known_out(GUILD, ALICE)

    # Live text, an imported message and a voice utterance: all rejected.
    for source in ("text", "import", "voice"):
        m = msg(f"I love sailing number {source}.", source=source)
        outcome = await mem.ingest_message(m)
        assert outcome.status == "rejected" and outcome.reason is not None
        assert "opted out" in outcome.reason
        assert await mem.get_message(GUILD, m.id) is None
    # Bob and Alice elsewhere are untouched.
    assert (await mem.ingest_message(msg("I love chess.", author=BOB))).status == "queued"
    elsewhere = msg("I love baking.", guild=OTHER_GUILD)
    assert (await mem.ingest_message(elsewhere)).status == "queued"
    assert await mem.settle(30)
    # Her name is not recorded either.
    await mem.guilds.set_names(GUILD, members={ALICE: "Alice", BOB: "Bob"})
    names = {str(m["user_id"]) for m in await mem.guilds.members(GUILD)}
    assert BOB in names

    assert await mem.opt_outs.change(GUILD, ALICE, False)
    resumed = await say(mem, "I love kayaking.")
    assert await mem.get_message(GUILD, resumed.id) is not None
    assert any("kayaking" in f.fact for f in await mem.facts.find(GUILD, subject=ALICE))


async def test_an_edit_by_an_opted_out_member_removes_the_stored_copy(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    old = await say(mem, "I love hiking in the Alps.")
    await mem.opt_outs.change(GUILD, ALICE, True)
    report = await mem.edit_message(GUILD, old.id, "I love climbing now.")
    assert report.applied and report.facts_retracted == 1
    assert await mem.get_message(GUILD, old.id) is None
    assert await mem.facts.find(GUILD, subject=ALICE) == []
    assert "climbing" not in await journal_text(mem)


async def test_a_reply_keeps_no_lore_line_of_an_opted_out_member(make_memory: Any) -> None:
    from memory.reply.conversation import ReplyRequest, compose_reply
    from tests.fakeopenai import FakeOpenAI

    mem = await make_memory(embeddings="none")
    await mem.opt_outs.change(GUILD, ALICE, True)
    async with FakeOpenAI() as fake:
        from memory.llm import ChatModel

        fake.script_chat(json.dumps({"text": "Noted.", "memoryLine": "the raid is on friday"}))
        chat = ChatModel(fake.client(), "gpt-4o-mini", timeout_s=2.0)
        request = ReplyRequest(
            guild_id=GUILD,
            guild_name="G",
            channel_id=CHANNEL,
            channel_name="general",
            author_id=ALICE,
            author_name="Alice",
            message_id="999000000000000001",
            text="remember the raid is on friday",
            visible_channels=frozenset({CHANNEL}),
            channel_names={CHANNEL: "general"},
        )
        result = await compose_reply(
            mem, chat, request, persona="p", temperature=0.0, max_tokens=100
        )
        await chat.client.close()
    assert result.text == "Noted." and result.stored == ()
    assert await mem.facts.find(GUILD, subject=LORE_SUBJECT) == []


# -- receipts ---------------------------------------------------------------------------------


async def test_forget_gives_a_receipt_without_text_that_an_operator_can_check(
    make_memory: Any,
) -> None:
    mem = await make_memory()
    await say(mem, "I love hiking in the Alps.")
    await say(mem, "I work as a nurse in Berlin.")
    report = await mem.forget(GUILD, ALICE, actor=f"user:{ALICE}", opt_out=True)
    assert report.receipt_id is not None and report.receipt_id.startswith("R-")
    assert report.opted_out and await mem.opt_outs.is_out(GUILD, ALICE)

    found = await mem.receipts.verify(report.receipt_id.lower())  # typed in any case
    assert found is not None and found.clean
    r = found.receipt
    assert (r.guild_id, r.user_id, r.scope, r.actor) == (GUILD, ALICE, "member", f"user:{ALICE}")
    assert r.counts["facts"] == 2 and r.counts["messages"] == 2 and r.counts["vectors"] >= 2
    stored = rows(mem, "SELECT counts FROM deletion_receipts WHERE id = ?", (r.id,))
    assert "hiking" not in json.dumps(stored) and "nurse" not in json.dumps(stored)
    assert await mem.receipts.get("R-0000-0000-0000") is None
    assert await mem.receipts.get("not a receipt") is None

    # An old message of hers imported again after the erase: the check says so.
    await mem.opt_outs.change(GUILD, ALICE, False)
    await say(mem, "I love sailing.", created_at="2020-01-01T00:00:00Z")
    again = await mem.receipts.verify(r.id)
    assert again is not None and not again.clean and again.remaining["messages"] == 1


async def test_forget_everywhere_erases_every_guild_with_one_receipt(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    await say(mem, "I love hiking in the Alps.")
    await say(mem, "I love baking bread.", guild=OTHER_GUILD)
    await say(mem, "I love chess.", author=BOB)
    report = await mem.erasure.forget_everywhere(ALICE, actor="operator:cli")
    assert report.guilds == 2 and report.messages == 2 and report.facts == 2
    for guild in (GUILD, OTHER_GUILD):
        assert await mem.facts.find(guild, subject=ALICE, active=None) == []
    assert await mem.facts.find(GUILD, subject=BOB)
    assert report.receipt_id is not None
    found = await mem.receipts.verify(report.receipt_id)
    assert found is not None and found.clean
    assert found.receipt.guild_id is None and found.receipt.scope == "everywhere"
    assert found.receipt.counts["guilds"] == 2
    assert [r.id for r in await mem.receipts.recent(GUILD)] == [report.receipt_id]


def test_receipt_ids_are_read_back_however_they_are_typed() -> None:
    from memory.roles.receipts import new_receipt_id, normalise_receipt_id

    for rid in ("R-RRGW-FRPH-4FZD", "R-0000-1111-RRRR", new_receipt_id()):
        assert normalise_receipt_id(rid) == rid
        assert normalise_receipt_id(rid.lower()) == rid
        assert normalise_receipt_id(rid.replace("-", "")) == rid
        assert normalise_receipt_id(" " + rid[2:] + " ") == rid
    assert normalise_receipt_id("r-1o1o-1111-2222") == "R-1010-1111-2222"
    assert normalise_receipt_id("R-UUUU-1111-2222") == ""
    assert normalise_receipt_id("R-1234") == ""


# -- corrections and forgetting one fact -------------------------------------------------------


async def test_a_correction_is_rewritten_like_a_fact_with_the_correction_as_evidence(
    make_memory: Any,
) -> None:
    mem = await make_memory(embeddings="none")
    await say(mem, "I am a PhD student in papyrology at Leiden.")
    await say(mem, "I live in Berlin.")
    old = await fact_with(mem, "Berlin")
    said = "Actually I moved: I live in Leiden now."
    new = await mem.corrections.correct(GUILD, ALICE, old.id, said, {CHANNEL}, name="Alice")
    assert new.fact == "Alice lives in Leiden now."  # third person, the extractor's words
    assert new.evidence_text == said  # the correction, never the old quote
    assert new.source_message_id is None and new.subject == ALICE
    closed = await mem.facts.get(GUILD, old.id)
    assert closed is not None and closed.valid_to is not None
    # The other fact is untouched (the misquote came from editing the wrong one).
    phd = await fact_with(mem, "PhD")
    assert (
        phd.valid_to is None and phd.evidence_text == "I am a PhD student in papyrology at Leiden."
    )

    record = await mem.members.about(GUILD, ALICE, {CHANNEL})
    shown = {f.id: f for f in record.facts}
    assert shown[new.id].corrected and shown[new.id].evidence == said
    assert [(e.event, e.by) for e in shown[new.id].history][-1] == ("supersede", "you")
    assert shown[old.id].valid_to is not None
    assert [e.event for e in shown[old.id].history] == ["add", "supersede"]
    assert shown[old.id].history[-1].new_text == new.fact

    # Refusals say what is true for her.
    with pytest.raises(InvalidInput, match="couldn't read a fact"):
        await mem.corrections.correct(GUILD, ALICE, new.id, "I think so maybe", {CHANNEL})
    with pytest.raises(InvalidInput, match="already what I remember"):
        await mem.corrections.correct(GUILD, ALICE, new.id, new.fact, {CHANNEL})


async def test_refusals_tell_missing_forgotten_hidden_and_not_yours_apart(
    make_memory: Any,
) -> None:
    mem = await make_memory(embeddings="none")
    await say(mem, "I love hiking in the Alps.")
    await say(mem, "I work as a nurse in Berlin.", channel=OTHER_CHANNEL)
    await say(mem, "I love chess.", author=BOB)
    mine = await fact_with(mem, "hiking")
    hidden = await fact_with(mem, "nurse")
    bobs = await fact_with(mem, "chess", BOB)

    with pytest.raises(FactMissing) as unknown:
        await mem.corrections.forget_fact(GUILD, ALICE, 987654321, {CHANNEL})
    assert unknown.value.forgotten_at is None
    with pytest.raises(NotYours) as other:
        await mem.corrections.forget_fact(GUILD, ALICE, bobs.id, {CHANNEL})
    assert not isinstance(other.value, FactHidden)
    with pytest.raises(FactHidden):
        await mem.corrections.correct(GUILD, ALICE, hidden.id, "I am a teacher.", {CHANNEL})

    gone = await mem.corrections.forget_fact(GUILD, ALICE, mine.id, {CHANNEL})
    assert gone.fact.id == mine.id and gone.receipt.scope == f"fact:{mine.id}"
    assert gone.receipt.counts["facts"] == 1
    checked = await mem.receipts.verify(gone.receipt.id)
    assert checked is not None and checked.clean
    with pytest.raises(FactMissing) as again:
        await mem.corrections.forget_fact(GUILD, ALICE, mine.id, {CHANNEL})
    assert again.value.forgotten_at is not None  # "already forgotten (since …)"
    with pytest.raises(FactMissing) as correct_gone:
        await mem.corrections.correct(GUILD, ALICE, mine.id, "I love sailing.", {CHANNEL})
    assert correct_gone.value.forgotten_at is not None
    # Bob learns nothing of her erased fact: for him it is simply missing.
    with pytest.raises(FactMissing) as for_bob:
        await mem.corrections.forget_fact(GUILD, BOB, mine.id, {CHANNEL})
    assert for_bob.value.forgotten_at is None


# -- poisoning limits ------------------------------------------------------------------------------


async def test_daily_caps_hold_back_lore_and_facts_about_others_for_moderators(
    make_memory: Any,
) -> None:
    mem = await make_memory(embeddings="none")
    await mem.guilds.set_setting(GUILD, "daily_cap_lore_lines", "2")
    await mem.guilds.set_setting(GUILD, "daily_cap_facts_about_others", "1")
    for line in ("The raid is on Friday.", "The guild was founded in 2019."):
        assert await mem.lore.remember(GUILD, line, source_text=line, author_id=BOB)
    with pytest.raises(CapReached) as capped:
        goose = "The server mascot is a goose."
        await mem.lore.remember(GUILD, goose, source_text=goose, author_id=BOB)
    assert capped.value.limit == 2
    # Without an author (a pin, the operator) nothing is capped; Alice has her own count.
    wiki = "The wiki lives on the forum."
    assert await mem.lore.remember(GUILD, wiki, source_text=wiki)
    line = "Meetups are in Leiden."
    assert await mem.lore.remember(GUILD, line, source_text=line, author_id=ALICE)

    await say(mem, "I love hiking in the Alps.")
    await say(mem, "I love chess.")
    hiking, chess = await fact_with(mem, "hiking"), await fact_with(mem, "chess")
    first = await mem.corrections.correct_other(
        GUILD, BOB, hiking.id, "Alice loves hiking in Norway.", {CHANNEL}, moderator=False
    )
    assert first.subject == ALICE and first.evidence_text == "Alice loves hiking in Norway."
    with pytest.raises(CapReached):
        await mem.corrections.correct_other(
            GUILD, BOB, chess.id, "Alice hates chess.", {CHANNEL}, moderator=False
        )
    assert (await mem.facts.get(GUILD, chess.id)).valid_to is None  # type: ignore[union-attr]
    # A moderator is not capped.
    await mem.corrections.correct_other(
        GUILD, BOB, chess.id, "Alice loves blitz chess.", {CHANNEL}, moderator=True
    )

    held = await mem.admin.action_log(kind="memory_cap", guild_id=GUILD)
    assert [(e.detail or {}).get("kind") for e in held] == ["other_member", "lore"]
    assert [(e.detail or {}).get("text") for e in held] == [
        "Alice hates chess.",
        "Memory line: The server mascot is a goose.",
    ]
    assert all((e.detail or {}).get("author_id") == BOB for e in held)
    assert await mem.facts.find(GUILD, subject=LORE_SUBJECT, limit=10) != []
    assert not any("goose" in f.fact for f in await mem.facts.find(GUILD, subject=LORE_SUBJECT))
    # Forgetting Bob erases what the caps kept of him.
    await mem.forget(GUILD, BOB)
    assert await mem.admin.action_log(kind="memory_cap", guild_id=GUILD) == []
    assert rows(mem, "SELECT count(*) FROM write_quota WHERE author_id = ?", (BOB,)) == [(0,)]


# -- a message waits with its sensitive fact ----------------------------------------------------


SENSITIVE = "I am a practising Catholic. I love chess."


async def test_a_message_waits_for_consent_with_its_sensitive_fact(make_memory: Any) -> None:
    mem = await make_memory()
    m = await say(mem, SENSITIVE)
    (item,) = await mem.consent.pending(GUILD, ALICE)
    stored = await mem.get_message(GUILD, m.id)
    assert stored is not None and stored.content == ""  # withheld
    assert rows(mem, "SELECT count(*) FROM held_messages") == [(1,)]
    assert await mem.search(GUILD, "practising Catholic", scope="messages") == []
    journal = await journal_text(mem)
    assert "Catholic" not in journal
    # Journal files (SQLite) say the line is withheld; days rendered from the
    # database (PostgreSQL) leave the empty message out.
    assert not journal or "withheld until its author answers" in journal
    for day in await mem.journal_days():
        entries = await mem.journal_entries(day.day) or []
        assert "Catholic" not in json.dumps([e.__dict__ for e in entries], default=str)
    assert any("chess" in f.fact for f in await mem.facts.find(GUILD, subject=ALICE))
    found = await mem.provenance.for_message(GUILD, m.id)
    assert found.held and found.pending == 1

    assert await mem.consent.accept(GUILD, ALICE, item.id) is not None
    assert await mem.settle(30)
    back = await mem.get_message(GUILD, m.id)
    assert back is not None and back.content == SENSITIVE
    assert rows(mem, "SELECT count(*) FROM held_messages") == [(0,)]
    hits = await mem.search(GUILD, "practising Catholic", scope="messages")
    assert [h.id for h in hits] == [m.id]


async def test_a_refused_sensitive_fact_takes_its_message_text_with_it(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    m = await say(mem, SENSITIVE)
    (item,) = await mem.consent.pending(GUILD, ALICE)
    assert await mem.consent.reject(GUILD, ALICE, item.id)
    stored = await mem.get_message(GUILD, m.id)
    assert stored is not None and stored.content == ""
    con_text = json.dumps(rows(mem, "SELECT * FROM held_messages"))
    assert "Catholic" not in con_text
    assert await mem.search(GUILD, "Catholic", scope="all") == []


async def test_a_withheld_message_goes_with_its_delete_and_its_author(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    m = await say(mem, SENSITIVE)
    await mem.delete_messages(GUILD, [m.id])
    assert rows(mem, "SELECT count(*) FROM held_messages") == [(0,)]
    await say(mem, SENSITIVE)
    await mem.forget(GUILD, ALICE)
    assert rows(mem, "SELECT count(*) FROM held_messages") == [(0,)]


# -- the model's memory tool -------------------------------------------------------------------


async def test_the_memory_tool_accepts_about_me(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    await say(mem, "I love hiking in the Alps.")
    await say(mem, "I love hiking in Norway.", author=BOB, name="Bob")
    scope = QueryScope(GUILD, CHANNEL, frozenset({CHANNEL}), author_id=ALICE)
    call = await run_query(
        mem, scope, {"query": "hiking", "about": ["me"]}, via="tool", render=lambda h: h.text
    )
    assert call.error is None
    assert [h.subject for h in call.hits] == [ALICE]
    # Numbered on from an earlier call's bullets.
    later = await run_query(
        mem, scope, {"query": "hiking", "about": ["me"]}, via="tool", render=str, start=4
    )
    assert later.result.splitlines()[1].startswith("[M4] ") and later.citation(4) is not None
    nobody = QueryScope(GUILD, CHANNEL, frozenset({CHANNEL}))
    refused = await run_query(
        mem, nobody, {"query": "hiking", "about": ["me"]}, via="tool", render=str
    )
    assert refused.error is not None and "names nobody" in refused.error
