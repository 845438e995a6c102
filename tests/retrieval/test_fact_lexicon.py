"""The in-memory BM25 index of a guild's facts (``memory.retrieval.fact_lexicon``):
FTS5's own scores and order where the guild is the whole table, among the
facts FTS5's query keeps (active, valid then); and following the facts as
they change — supersede, edit, archive, expiry, delete, forget, a deleted
message's quote — on both backends; built in the background for a big guild
while FTS5 answers."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from memory.clock import iso
from memory.db.sqlite import driver as sqlite
from memory.db.sqlite.migrations import migrate
from memory.retrieval.fact_lexicon import FactLexicon
from memory.retrieval.fts_words import words
from memory.retrieval.lexicons import LexiconConfig
from memory.retrieval.query import fts_match_expression
from memory.store import facts as store
from memory.store.search import fts_fact_ranks
from tests.helpers import ALICE, BOB, GUILD, OTHER_GUILD, eventually, msg

VOCAB = (
    "garden tomato tomatoes harbour ferry violin lesson lessons marathon training pottery "
    "kiln camera lens recipe curry painting painted paint budget café naïve"
).split()
TIMES = [f"202{y}-0{m}-01T00:00:00.000Z" for y in range(3) for m in (1, 4, 7)]


def _store_facts(con: Any, rng: random.Random, n: int) -> None:
    """Facts of different lengths that say words several times, some with an
    evidence quote, repeated texts (equal scores), some archived and some
    closed at different times."""
    texts = []
    for _ in range(n):
        k = rng.choice((1, 2, 5, 12))
        texts.append(" ".join(rng.choice(VOCAB) for _ in range(k)) + " and more")
    texts += texts[:15]
    for i, text in enumerate(texts):
        evidence = None
        if rng.random() < 0.5:
            evidence = " ".join(rng.choice(VOCAB) for _ in range(rng.choice((1, 3, 8))))
        start = rng.randrange(len(TIMES) - 1)
        f = store.upsert_fact(
            con,
            guild_id=GUILD,
            channel_id=None,
            subject=f"member{i % 40}",
            fact=text,
            fact_type="other",
            evidence=evidence,
            source_message_id=None,
            confidence=0.8,
            now="2026-01-01T00:00:00.000Z",
            actor="test",
            observed_at=TIMES[start],
        ).fact
        roll = rng.random()
        if roll < 0.15:
            store.set_fact_active(con, GUILD, f.id, False, "test", "2026-01-02T00:00:00.000Z")
        elif roll < 0.35:
            end = TIMES[rng.randrange(start + 1, len(TIMES))]
            con.execute("UPDATE memory_facts SET valid_to = ? WHERE id = ?", (end, f.id))
    con.commit()


def test_scores_are_fts5_bm25_when_the_guild_is_the_whole_table(tmp_path: Any) -> None:
    """One guild in the table: the statistics are the table's (archived and
    closed facts included, as FTS5 counts them), so every score equals
    FTS5's ``bm25()`` over fact and evidence, and the answer — the active
    facts valid then, equal scores by id — is the store's FTS query's."""
    con = sqlite.connect(tmp_path / "t.sqlite3")
    try:
        migrate(con)
        _store_facts(con, random.Random(11), 300)
        lex = FactLexicon(GUILD)
        lex.fill(lex.snapshot(con))
        queries = [
            "tomato",
            "the tomatoes in the garden",
            "violin lessons and pottery",
            "paintings of the cafe",
            "naive marathon training budget",
            "nothing matches this",
        ]
        compared = 0
        for q in queries:
            for prefixes in (False, True):
                match = fts_match_expression(q, prefixes=prefixes)
                assert match is not None
                for as_of in (None, TIMES[2], TIMES[5], "2019-01-01T00:00:00.000Z"):
                    for limit in (1, 10, 64, 1000):
                        want = fts_fact_ranks(con, GUILD, match, limit, as_of=as_of)
                        got = lex.best(match, limit, as_of)
                        assert [i for i, _ in got] == [i for i, _ in want], (q, as_of, limit)
                        for (_, a), (_, b) in zip(got, want, strict=True):
                            assert a == pytest.approx(b, rel=1e-9)
                        compared += len(got)
        assert compared > 3000
    finally:
        con.close()


# -- following the facts through the engine --------------------------------------------------


def _lexicon(mem: Any, guild: str = GUILD) -> FactLexicon | None:
    return mem.retriever.ctx.fact_lexicons.index.get(guild)


async def _found(mem: Any, query: str, **kw: Any) -> dict[str, float]:
    """Fact text → its BM25 part, for the facts the lexical side found (no
    vectors: embeddings are off)."""
    hits = await mem.search(GUILD, query, scope="facts", gate=False, limit=50, **kw)
    return {h.text: h.parts.bm25 for h in hits if h.kind == "fact" and h.parts.bm25 > 0}


async def _ingest(mem: Any, *items: Any) -> None:
    for m in items:
        out = await mem.ingest_message(m, backpressure=True)
        assert out.status == "queued", out
    assert await mem.settle(60)


async def _fact_id(mem: Any, text: str) -> int:
    found = [f for f in await mem.facts.find(GUILD, limit=200) if f.fact == text]
    assert len(found) == 1, [f.fact for f in await mem.facts.find(GUILD, limit=200)]
    return found[0].id


async def test_follows_supersede_edit_archive_and_delete(
    make_memory: Callable[..., Any],
) -> None:
    mem = await make_memory(embeddings="none")
    await _ingest(
        mem,
        msg("I live in Zanzibar", id="920000000000000001", created_at="2023-01-10T10:00:00.000Z"),
        msg("I play the ocarina", id="920000000000000002", created_at="2023-02-10T10:00:00.000Z"),
        msg("I love quokkas", id="920000000000000003", created_at="2023-03-10T10:00:00.000Z"),
        msg("I love capybaras", id="920000000000000004", created_at="2023-04-10T10:00:00.000Z"),
    )
    assert "Alice lives in Zanzibar." in await _found(mem, "Zanzibar")
    lex = _lexicon(mem)
    assert lex is not None and lex.rows == 4

    # Supersede: the old fact is closed (still active). Now it is not found;
    # as of a time it was true, it is, and the new one is not.
    await _ingest(
        mem,
        msg("I moved to Timbuktu", id="920000000000000005", created_at="2024-03-01T10:00:00.000Z"),
    )
    assert "Alice moved to Timbuktu." in await _found(mem, "Timbuktu")
    assert await _found(mem, "Zanzibar") == {}
    then = await _found(mem, "Zanzibar Timbuktu", as_of=_dt("2023-06-01T00:00:00"))
    assert set(then) == {"Alice lives in Zanzibar."}
    assert await _found(mem, "Zanzibar", as_of=_dt("2022-06-01T00:00:00")) == {}

    # An operator edit: found by its new words (and by its quote, which
    # stays), not by the words it no longer says, which leave memory.
    ocarina = await _fact_id(mem, "Alice plays the ocarina.")
    await mem.facts.edit(GUILD, ocarina, text="Alice plays the theremin.")
    assert "Alice plays the theremin." in await _found(mem, "theremin")
    assert "Alice plays the theremin." in await _found(mem, "ocarina")  # "I play the ocarina"
    await mem.facts.edit(GUILD, ocarina, text="Alice plays the sitar.")
    assert "Alice plays the sitar." in await _found(mem, "sitar")
    assert await _found(mem, "theremin") == {}
    assert not lex.holds("theremin")

    # Archive, then restore.
    quokka = await _fact_id(mem, "Alice loves quokkas.")
    await mem.facts.set_active(GUILD, quokka, False)
    assert await _found(mem, "quokkas") == {}
    await mem.facts.set_active(GUILD, quokka, True)
    assert "Alice loves quokkas." in await _found(mem, "quokkas")

    # A delete: gone from the answers, the statistics and memory.
    capybara = await _fact_id(mem, "Alice loves capybaras.")
    rows = lex.rows
    assert await mem.facts.delete(GUILD, capybara)
    assert await _found(mem, "capybaras") == {}
    assert not lex.holds("capybaras")
    assert lex.rows == rows - 1
    assert _lexicon(mem) is lex  # followed, not rebuilt


def _dt(text: str) -> Any:
    from datetime import UTC, datetime

    return datetime.fromisoformat(text).replace(tzinfo=UTC)


async def test_follows_expiry_forget_and_a_deleted_messages_quote(
    make_memory: Callable[..., Any], clock: Any
) -> None:
    mem = await make_memory(embeddings="none", clock=clock)
    at = iso(clock())
    await _ingest(
        mem,
        msg("I am working on the aqueduct project", id="930000000000000001", created_at=at),
        msg("I love wombats", id="930000000000000002", author=BOB, name="Bob", created_at=at),
        msg("I play the bagpipes", id="930000000000000003", created_at=at),
        msg("I play the bagpipes", id="930000000000000004", created_at=at),
    )
    found = await _found(mem, "wombats aqueduct bagpipes")
    assert {"Bob loves wombats.", "Alice plays the bagpipes."} <= set(found)
    lex = _lexicon(mem)
    assert lex is not None

    # A member's forget: their facts stop counting and leave memory.
    await mem.forget(GUILD, BOB)
    assert "Bob loves wombats." not in await _found(mem, "wombats")
    assert not lex.holds("wombats")

    # The quote of a deleted message leaves its fact's indexed text (the fact
    # stays: another message still says it).
    bagpipes = await _fact_id(mem, "Alice plays the bagpipes.")
    fact = await mem.facts.get(GUILD, bagpipes)
    assert fact is not None and fact.evidence_text
    others = [f for f in await mem.facts.find(GUILD, limit=100) if f.id != bagpipes]
    quote_words = set(words(fact.evidence_text)) - set(words(fact.fact))
    for f in others:
        quote_words -= {*words(f.fact), *words(f.evidence_text)}
    assert quote_words  # ("play")
    assert all(lex.holds(w) for w in quote_words)
    await mem.delete_messages(GUILD, [fact.source_message_id])
    after = await mem.facts.get(GUILD, bagpipes)
    assert after is not None and after.evidence_text is None
    assert "Alice plays the bagpipes." in await _found(mem, "bagpipes")
    for w in quote_words:
        assert not lex.holds(w), w

    # Expiry: a project fact unseen for its TTL is archived.
    for key in ("ttl_days_project", "ttl_days_other"):
        await mem.guilds.set_setting(GUILD, key, "1")
    clock.advance(days=3)
    assert await mem.upkeep.expire(GUILD) >= 1
    assert await _found(mem, "aqueduct") == {}


async def test_another_guilds_facts_neither_count_nor_show(
    make_memory: Callable[..., Any],
) -> None:
    mem = await make_memory(embeddings="none")
    await _ingest(
        mem,
        msg("I love ferries", id="940000000000000001"),
        msg("I love harbours", id="940000000000000002"),
        msg("I love gardens", id="940000000000000003"),
    )
    before = await _found(mem, "ferries harbours")
    await _ingest(
        mem,
        *[
            msg(f"I love ferries number {i}", id=f"94000000000000010{i}", guild=OTHER_GUILD)
            for i in range(6)
        ],
    )
    after = await _found(mem, "ferries harbours")
    assert before == after and set(after) == {"Alice loves ferries.", "Alice loves harbours."}
    lex = _lexicon(mem)
    assert lex is not None and lex.rows == 3


async def test_big_guild_builds_in_the_background_and_answers_alike(
    make_memory: Callable[..., Any],
) -> None:
    """A guild above the inline size is answered by FTS5 while its lexicon is
    built, then by the lexicon: with one guild in the table, the same hits."""
    mem = await make_memory(embeddings="none")
    lines = [f"I love {w}" for w in VOCAB[:14]] + [f"I play the {w}" for w in VOCAB[14:]]
    await _ingest(mem, *[msg(t, id=f"95000000000000{i:04d}") for i, t in enumerate(lines)])
    lexicons = mem.retriever.ctx.fact_lexicons
    lexicons.index.cfg = LexiconConfig(build_inline_max=5)
    query = "tomatoes garden violin paint lens"
    # Not waited for: FTS5 answers unless the background build won the race.
    first = await mem.search(GUILD, query, scope="facts", gate=False, limit=20)
    assert await eventually(lambda: lexicons.stats()["builds"] == 1)
    assert _lexicon(mem) is not None
    second = await mem.search(GUILD, query, scope="facts", gate=False, limit=20)
    assert [h.id for h in first] == [h.id for h in second]
    assert [h.parts.bm25 for h in first] == pytest.approx([h.parts.bm25 for h in second])
    assert sum(h.parts.bm25 > 0 for h in second) >= 4


async def test_switched_off_fts5_answers(make_memory: Callable[..., Any]) -> None:
    mem = await make_memory(embeddings="none")
    mem.retriever.ctx.fact_lexicons.index.cfg = LexiconConfig(enabled=False)
    await _ingest(mem, msg("I love marathons", id="960000000000000001", author=ALICE))
    assert "Alice loves marathons." in await _found(mem, "marathons")
    assert _lexicon(mem) is None


def _vm_steps(con: Any, run: Callable[[], object]) -> int:
    """SQLite virtual-machine steps ``run`` takes on ``con`` (a count, not a time)."""
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1
        return 0

    con.set_progress_handler(tick, 1)
    try:
        run()
    finally:
        con.set_progress_handler(None, 1)
    return steps


def test_a_quiet_guild_does_not_scan_a_busy_ones_facts(tmp_path: Any) -> None:
    """The refresh reads what was added since the table's highest id at the
    last one: another guild's facts are scanned once, not at every search."""
    con = sqlite.connect(tmp_path / "t.sqlite3")
    try:
        migrate(con)
        _store_facts(con, random.Random(3), 20)
        lex = FactLexicon(GUILD)
        lex.fill(lex.snapshot(con))
        con.executemany(
            "INSERT INTO memory_facts (guild_id, subject, fact, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?)",
            [(OTHER_GUILD, "m", f"busy fact {i}", TIMES[0], TIMES[0]) for i in range(2000)],
        )
        con.commit()
        first = _vm_steps(con, lambda: lex.refresh(con))
        again = _vm_steps(con, lambda: lex.refresh(con))
        assert first > 2000  # the new facts are read once
        assert again < 200, again
        assert lex.rows == 35  # the guild's own (20 and 15 repeats), no other's
    finally:
        con.close()
