"""The in-memory BM25 index of a guild's messages (``memory.retrieval.lexicon``):
FTS5's own scores where the guild is the whole table, and following the
guild's messages as Discord changes them: new ones, edits, deletes, a
member's forget; built in the background for a big guild while FTS5
answers."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from memory.db.sqlite import driver as sqlite
from memory.retrieval.fts_words import parse_match, words
from memory.retrieval.lexicon import GuildLexicon
from memory.retrieval.lexicons import LexiconConfig
from memory.retrieval.query import fts_match_expression
from memory.retrieval.voice import first_person_share, statement_share
from memory.store import messages as store_messages
from memory.store.message_texts import guild_texts
from tests.helpers import BOB, GUILD, OTHER_GUILD, eventually, msg

VOCAB = (
    "garden tomato tomatoes harbour ferry violin lesson lessons marathon training pottery "
    "kiln camera lens recipe curry painting painted paint budget café naïve"
).split()


def _texts(rng: random.Random, n: int) -> list[str]:
    """Texts of different lengths that say some words several times, and
    repeats (equal scores)."""
    out = []
    for _ in range(n):
        k = rng.choice((1, 2, 5, 12, 30))
        out.append(" ".join(rng.choice(VOCAB) for _ in range(k)) + " and more filler words")
    return out + out[:15]


def test_words_and_queries() -> None:
    assert words("Café NAÏVE, don't_stop 2024-05-01") == [
        "cafe", "naive", "don", "t", "stop", "2024", "05", "01",
    ]  # fmt: skip
    assert words("東京タワー") == ["東京", "京タ", "タワ", "ワー"]
    match = fts_match_expression("Paintings of the café?", prefixes=True)
    assert match is not None
    phrases = parse_match(match)
    assert ("cafe", False) in [(p.word, p.prefix) for p in phrases]
    assert any(p.prefix and "painting".startswith(p.word) for p in phrases)
    assert [(p.word, p.prefix) for p in parse_match('"don\'t"*')] == [
        ("don", False),
        ("t", True),
    ]  # a phrase of several words counts as its words; the star stays on the last


def test_scores_are_fts5_bm25_when_the_guild_is_the_whole_table(tmp_path: Any) -> None:
    """One guild in the table: the guild's statistics are the table's, so
    every score equals FTS5's ``bm25()`` and the order (equal scores by seq)
    is FTS5's."""
    con = sqlite.connect(tmp_path / "t.sqlite3")
    try:
        from memory.db.sqlite.migrations import migrate

        migrate(con)
        rng = random.Random(7)
        msgs = [msg(t, id=f"m{i}") for i, t in enumerate(_texts(rng, 300))]
        store_messages.insert_messages(con, msgs, "2026-05-01T00:00:00Z")
        con.commit()
        lex = GuildLexicon(GUILD)
        lex.fill(guild_texts(con, GUILD))
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
            match = fts_match_expression(q, prefixes=True)
            assert match is not None
            want = [
                (int(r[0]), float(r[1]))
                for r in con.execute(
                    "SELECT rowid, bm25(messages_fts) AS rank FROM messages_fts "
                    "WHERE messages_fts MATCH ? ORDER BY rank, rowid",
                    (match,),
                )
            ]
            for limit in (1, 10, 200, 1000):
                got = lex.best(match, limit)
                assert [s for s, _ in got] == [s for s, _ in want[:limit]], (q, limit)
                for (_, a), (_, b) in zip(got, want[:limit], strict=True):
                    assert a == pytest.approx(b, rel=1e-9)
                compared += len(got)
        assert compared > 500
    finally:
        con.close()


def _lexicon(mem: Any) -> GuildLexicon | None:
    return mem.retriever.ctx.lexicons.index.get(GUILD)


async def _seqs(mem: Any, query: str) -> list[str]:
    hits = await mem.search(GUILD, query, scope="messages", gate=False, limit=20)
    return [h.id for h in hits if h.parts.bm25 > 0]


async def test_follows_new_edited_deleted_and_forgotten_messages(
    make_memory: Callable[..., Any],
) -> None:
    mem = await make_memory()
    for i in range(6):
        await mem.ingest_message(msg(f"the harbour ferry leaves at {i} o'clock", id=f"h{i}"))
    await mem.ingest_message(msg("my violin lesson with the zanzibar teacher", id="v1"))
    await mem.ingest_message(msg("Bob's kiln fired the quokka pottery", id="b1", author=BOB))
    await mem.ingest_message(msg("other guild quokka", id="o1", guild=OTHER_GUILD))
    await mem.settle()
    assert await _seqs(mem, "zanzibar violin")
    lex = _lexicon(mem)
    assert lex is not None and lex.rows == 8  # the guild's messages only
    assert lex.holds("zanzibar") and lex.holds("quokka")

    # A message stored after the lexicon was built is found by the next search.
    await mem.ingest_message(msg("the capybara joined the ferry", id="c1"))
    await mem.settle()
    assert "c1" in await _seqs(mem, "capybara")

    # An edit: found by its new words, no longer by its old ones.
    await mem.edit_message(GUILD, "v1", "my cello lesson with the new teacher")
    await mem.settle()
    assert "v1" in await _seqs(mem, "cello lesson")
    assert await _seqs(mem, "zanzibar") == []
    assert not lex.holds("zanzibar")  # the old text's words left memory

    # A delete: gone from the answers, the statistics and memory.
    await mem.delete_messages(GUILD, ["c1"])
    assert await _seqs(mem, "capybara") == []
    assert not lex.holds("capybara")
    assert lex.rows == 8
    # The newest message was deleted: SQLite gives the next one its seq.
    await mem.ingest_message(msg("a walrus on the ferry", id="w1"))
    await mem.settle()
    assert "w1" in await _seqs(mem, "walrus")

    # A member's forget.
    await mem.forget(GUILD, BOB)
    await mem.settle()
    assert await _seqs(mem, "quokka pottery") == []
    assert not lex.holds("quokka") and not lex.holds("kiln")
    assert _lexicon(mem) is lex  # followed, not rebuilt


async def test_big_guild_builds_in_the_background_and_answers_alike(
    make_memory: Callable[..., Any],
) -> None:
    """A guild above the inline size is answered by FTS5 while its lexicon is
    built, then by the lexicon: with one guild in the table, the same hits."""
    mem = await make_memory()
    rng = random.Random(3)
    for i, text in enumerate(_texts(rng, 60)):
        await mem.ingest_message(msg(text, id=f"t{i}"))
    await mem.settle()
    lexicons = mem.retriever.ctx.lexicons
    lexicons.index.cfg = LexiconConfig(build_inline_max=10)
    query = "violin lessons in the garden"
    first = await mem.search(GUILD, query, scope="messages", gate=False, limit=20)
    assert await eventually(lambda: _lexicon(mem) is not None)
    # Counted just after the lexicon turns ready (another thread): waited for.
    assert await eventually(lambda: lexicons.stats()["builds"] == 1)
    second = await mem.search(GUILD, query, scope="messages", gate=False, limit=20)
    assert [h.id for h in first] == [h.id for h in second]
    assert [h.parts.bm25 for h in first] == pytest.approx([h.parts.bm25 for h in second])


async def test_switched_off_fts5_answers(make_memory: Callable[..., Any]) -> None:
    mem = await make_memory()
    mem.retriever.ctx.lexicons.index.cfg = LexiconConfig(enabled=False)
    await mem.ingest_message(msg("the marathon training plan", id="m1"))
    await mem.settle()
    hits = await mem.search(GUILD, "marathon", scope="messages", gate=False)
    assert [h.id for h in hits] == ["m1"]
    assert _lexicon(mem) is None


async def test_guild_isolation_in_the_statistics(make_memory: Callable[..., Any]) -> None:
    """Another guild's messages change neither the guild's scores nor what it finds."""
    mem = await make_memory()
    await mem.ingest_message(msg("the ferry to the harbour", id="g1"))
    await mem.ingest_message(msg("a ferry ferry ferry timetable", id="g2"))
    for i in range(6):
        await mem.ingest_message(msg(f"nothing about boats {i}", id=f"n{i}"))
    await mem.settle()
    before = await mem.search(GUILD, "ferry harbour", scope="messages", gate=False)
    for i in range(40):
        await mem.ingest_message(msg(f"harbour {i}", id=f"x{i}", guild=OTHER_GUILD))
    await mem.settle()
    after = await mem.search(GUILD, "ferry harbour", scope="messages", gate=False)
    assert [(h.id, h.parts.bm25) for h in before] == [(h.id, h.parts.bm25) for h in after]


async def test_a_questions_parts_wait_for_the_same_build(make_memory: Callable[..., Any]) -> None:
    """The first search of a guild is a question in parts: the whole question
    and its parts, searched side by side, all wait for the one build and rank
    alike (FTS5, with another guild's statistics, would rank differently)."""
    mem = await make_memory()
    rng = random.Random(5)
    for i, text in enumerate(_texts(rng, 40)):
        await mem.ingest_message(msg(text, id=f"t{i}"))
    for i in range(30):
        await mem.ingest_message(msg(f"violin violin lesson {i}", id=f"x{i}", guild=OTHER_GUILD))
    await mem.settle()
    await mem.retriever.close()  # nothing built yet
    query = "Which came first, the violin lesson or the pottery kiln?"
    first = await mem.search(GUILD, query, scope="messages", gate=False, limit=20)
    assert mem.retriever.ctx.lexicons.stats()["builds"] == 1
    again = await mem.search(GUILD, query, scope="messages", gate=False, limit=20)
    assert [h.id for h in first] == [h.id for h in again]
    # (the first search's cosines come from the stored vectors, the matrix
    # loading: they differ in the 7th decimal)
    assert [h.parts.bm25 for h in first] == pytest.approx([h.parts.bm25 for h in again])


def test_held_voice_readings_follow_their_rows(tmp_path: Any) -> None:
    """Each row's statement and first-person shares are those of its text;
    another text under the same seq, a removed row, an edited one and rows
    renumbered by compaction are answered right (or not at all)."""
    con = sqlite.connect(tmp_path / "t.sqlite3")
    try:
        from memory.db.sqlite.migrations import migrate

        migrate(con)
        said = [
            "I finally signed up for a pottery class. Anyone else going?",
            "You'll love the kiln! When is the first lesson?",
            "my mum and I made curry",
            "",
        ]
        now = "2026-05-01T00:00:00Z"
        store_messages.insert_messages(con, [msg(t, id=f"m{i}") for i, t in enumerate(said)], now)
        con.commit()
        lex = GuildLexicon(GUILD)
        lex.fill(guild_texts(con, GUILD))

        def held() -> dict[int, str]:
            return {int(r[0]): r[1] for r in con.execute("SELECT seq, content FROM messages")}

        def expected(texts: dict[int, str]) -> dict[int, tuple[float, float]]:
            return {s: (statement_share(t), first_person_share(t)) for s, t in texts.items()}

        texts = held()
        assert lex.voices(texts.items()) == expected(texts)
        seq = {t: s for s, t in texts.items()}
        assert lex.voices([(seq[said[2]], "we made curry")]) == {}  # not the text it holds
        # A delete and an edit (the edit leaves its row at once, like a delete).
        con.execute("DELETE FROM messages WHERE seq = ?", (seq[said[0]],))
        con.execute(
            "UPDATE messages SET content = 'I changed my mind?' WHERE seq = ?", (seq[said[1]],)
        )
        store_messages.insert_messages(con, [msg("Did you go? I went.", id="m9")], now)
        con.commit()
        lex.removed([seq[said[0]], seq[said[1]]])
        assert set(lex.voices(texts.items())) == {seq[said[2]], seq[said[3]]}
        lex.refresh(con)  # reads the edit and the new message, compacts the deleted row away
        texts = held()
        assert len(texts) == 4 and lex.rows == 4
        assert lex.voices(texts.items()) == expected(texts)
    finally:
        con.close()


def test_a_quiet_guild_does_not_scan_a_busy_ones_messages(tmp_path: Any) -> None:
    """The refresh reads what was stored since the table's highest seq at the
    last one: another guild's talk is scanned once, not at every search."""
    con = sqlite.connect(tmp_path / "t.sqlite3")
    try:
        from memory.db.sqlite.migrations import migrate

        migrate(con)
        now = "2026-05-01T00:00:00Z"
        store_messages.insert_messages(con, [msg(f"quiet {i}", id=f"q{i}") for i in range(20)], now)
        con.commit()
        lex = GuildLexicon(GUILD)
        lex.fill(guild_texts(con, GUILD))
        busy = [msg(f"busy {i}", id=f"b{i}", guild=OTHER_GUILD) for i in range(2000)]
        store_messages.insert_messages(con, busy, now)
        con.commit()
        steps = 0

        def tick() -> int:
            nonlocal steps
            steps += 1
            return 0

        con.set_progress_handler(tick, 1)
        lex.refresh(con)
        first, steps = steps, 0
        lex.refresh(con)
        con.set_progress_handler(None, 1)
        assert first > 2000  # the new messages are read once
        assert steps < 200, steps
        assert lex.rows == 20
    finally:
        con.close()
