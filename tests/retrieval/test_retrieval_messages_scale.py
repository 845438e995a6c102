"""Message search in big guilds, kept exact: the FTS query ranks on the index
alone and tests the guild for its best matches only, a big guild's query runs
as two seq ranges on two reader threads, and messages are read by primary
key. Each must give what the plain statements gave.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from memory.clock import iso
from memory.db.sql import dialect_of
from memory.db.sqlite import driver as sqlite
from memory.embed.base import vector_to_blob
from memory.models import IncomingMessage
from memory.retrieval import messages as message_search
from memory.retrieval.lexicons import LexiconConfig
from memory.retrieval.query import fts_match_expression
from memory.store import message_fts
from memory.store import messages as store_messages
from memory.store import vectors as store_vectors
from memory.store.fts import fts_query
from tests.helpers import CHANNEL, GUILD, OTHER_GUILD, eventually, inspect_db

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
WORDS = (
    "garden tomatoes harbour ferry violin lesson marathon training pottery kiln "
    "camera lens recipe curry laptop repair concert tickets budget spreadsheet"
).split()
QUERIES = [
    "what did we say about the garden tomatoes",
    "anyone going to the concert? tickets",
    "the marathon training plan",
    "camera lens repair",
    "violin lesson",
]


def _texts(rng: random.Random, n: int, short: bool) -> list[str]:
    out = []
    for i in range(n):
        words = rng.sample(WORDS, 2 if short else 6)
        filler = "" if short else " and then we talked about the weekend for a while" * 3
        out.append(f"{' '.join(words)}{filler} ({i})")
    return out


async def _interleaved(mem: Any, embedder: Any) -> dict[str, list[int]]:
    """Messages of two guilds written in alternating blocks (a real database's
    seqs interleave guilds). The other guild's are short, so its matches
    rank first: the walk must test and skip them. Some texts repeat, so
    equal ranks occur. Returns the seqs by guild."""
    rng = random.Random(4)
    model = mem.embeddings.model_for_guild(GUILD)
    dims = int((await embedder.embed(["probe"])).shape[1])
    seqs: dict[str, list[int]] = {GUILD: [], OTHER_GUILD: []}
    t = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    for block in range(6):
        for guild, short, n in ((OTHER_GUILD, True, 60), (GUILD, False, 90)):
            texts = _texts(rng, n, short)
            texts += texts[:10]  # repeats: ties in bm25
            msgs = []
            for i, text in enumerate(texts):
                t += 600
                msgs.append(
                    IncomingMessage(
                        id=f"{guild[:3]}{block:02d}{i:04d}",
                        guild_id=guild,
                        channel_id=CHANNEL,
                        author_id="444444444444444444",
                        author_name="Ana",
                        content=text,
                        created_at=iso(datetime.fromtimestamp(t, UTC)),
                        source="import",
                    )
                )
            vecs = np.random.default_rng(block).normal(size=(len(msgs), dims))
            vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)

            def work(con: Any, msgs: list[IncomingMessage] = msgs, vecs: Any = vecs) -> list[int]:
                now = iso(NOW)
                store_messages.insert_messages(con, msgs, now)
                store_messages.mark_messages(con, [m.id for m in msgs], "done", now)
                got = [
                    int(con.execute("SELECT seq FROM messages WHERE id = ?", (m.id,)).fetchone()[0])
                    for m in msgs
                ]
                rows = [
                    (s, m.guild_id, vector_to_blob(v))
                    for s, m, v in zip(got, msgs, vecs, strict=True)
                ]
                store_vectors.put_message_vectors(con, model, dims, rows, now)
                return got

            seqs[guild] += await mem.db.write(work)
    return seqs


def _joined(
    con: Any, guild: str, match: str, limit: int, lo: int | None = None, hi: int | None = None
) -> list[tuple[int, float]]:
    """The plain statement: every match joined to its row, the guild filtered
    (and the seqs to ``[lo, hi)``)."""
    q = fts_query(con, "messages_fts", match)
    assert q is not None
    seqs = " AND m.seq >= ?" if lo is not None else ""
    seqs += " AND m.seq < ?" if hi is not None else ""
    bounds = [b for b in (lo, hi) if b is not None]
    rows = con.execute(
        f"SELECT m.seq, {q.rank} AS rank FROM {q.source} "
        "JOIN messages m ON m.seq = messages_fts.rowid "
        f"WHERE {q.where} AND m.guild_id = ?{seqs} ORDER BY rank, m.seq LIMIT ?",
        (*q.params, guild, *bounds, limit),
    ).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


def _best_of_all_guilds(con: Any, match: str) -> int:
    """The best match's seq, whichever guild it is in."""
    q = fts_query(con, "messages_fts", match)
    assert q is not None
    return int(
        con.execute(
            f"SELECT messages_fts.rowid, {q.rank} AS rank FROM {q.source} "
            f"WHERE {q.where} ORDER BY rank LIMIT 1",
            q.params,
        ).fetchone()[0]
    )


def _merged(parts: list[list[tuple[int, Any, float]]], limit: int) -> list[tuple[int, float]]:
    rows = sorted(((s, raw) for part in parts for s, _, raw in part), key=lambda r: (r[1], r[0]))
    return rows[:limit]


async def test_fts_walk_and_its_seq_ranges_equal_the_joined_query(
    make_memory: Callable[..., Any], local_embedder: Any
) -> None:
    mem = await make_memory()
    seqs = await _interleaved(mem, local_embedder)
    mine = sorted(seqs[GUILD])
    con = inspect_db(mem)
    try:
        ties = foreign_first = 0
        for q in QUERIES:
            match = fts_match_expression(q, prefixes=True)
            assert match is not None
            for limit in (1, 7, 60, 200, 5000):
                whole = message_fts.search_messages_fts(con, GUILD, match, limit)
                assert [(s, raw) for s, _, raw in whole] == _joined(con, GUILD, match, limit)
                assert all(m.guild_id == GUILD for _, m, _ in whole)
                ties += len(whole) - len({raw for _, _, raw in whole})
                for split in (mine[0], mine[1], mine[len(mine) // 3], mine[-1] + 1):
                    lower = message_fts.search_messages_fts(con, GUILD, match, limit, None, split)
                    upper = message_fts.search_messages_fts(con, GUILD, match, limit, split)
                    assert all(s < split for s, _, _ in lower)
                    assert all(s >= split for s, _, _ in upper)
                    assert _merged([lower, upper], limit) == [(s, raw) for s, _, raw in whole]
            foreign_first += _best_of_all_guilds(con, match) in seqs[OTHER_GUILD]
        # The other guild's matches came first (the walk skipped them), and
        # equal ranks occurred (their order is part of the answer).
        assert foreign_first == len(QUERIES)
        assert ties > 0
    finally:
        con.close()


async def test_fts_bounded_sort_equals_the_joined_query(
    make_memory: Callable[..., Any], local_embedder: Any
) -> None:
    """With the guild's size the FTS query first sorts a bounded list of the
    best matches; too narrow a list (the other guild's matches rank first)
    falls back to ranking every match. Either way the answer is the joined
    query's, ties included."""
    mem = await make_memory()
    seqs = await _interleaved(mem, local_embedder)
    mine = sorted(seqs[GUILD])
    con = inspect_db(mem)
    sqlite_db = dialect_of(con) == "sqlite"
    statements: list[str] = []
    if sqlite_db:
        con.set_trace_callback(statements.append)
    alone = fell_back = 0
    try:
        # The guild's true size; a size that claims every message (the
        # narrowest list); one so small no bounded sort is tried.
        for rows in (len(mine), 10**9, 1):
            for q in QUERIES:
                match = fts_match_expression(q, prefixes=True)
                assert match is not None
                for limit in (1, 7, 60, 200):
                    for lo, hi in ((None, None), (None, mine[len(mine) // 3])):
                        statements.clear()
                        got = message_fts.search_messages_fts(
                            con, GUILD, match, limit, lo, hi, rows
                        )
                        ranked = [x for x in statements if "bm25(messages_fts)" in x]
                        want = _joined(con, GUILD, match, limit, lo, hi)
                        assert [(s, raw) for s, _, raw in got] == want, (q, limit, rows)
                        assert all(m.guild_id == GUILD for _, m, _ in got)
                        alone += len(ranked) == 1 and "LIMIT" in ranked[0]
                        fell_back += len(ranked) == 2 and "LIMIT" in ranked[0]
    finally:
        if sqlite_db:
            con.set_trace_callback(None)
        con.close()
    if sqlite_db:  # both ways were taken
        assert alone > 0 and fell_back > 0, (alone, fell_back)


def test_fts_window_follows_the_guilds_share(tmp_path: Any) -> None:
    con = sqlite.connect(tmp_path / "w.sqlite3")
    try:
        con.execute("CREATE TABLE messages (seq INTEGER PRIMARY KEY)")
        con.executemany("INSERT INTO messages (seq) VALUES (?)", [(i,) for i in range(1, 1001)])
        assert message_fts.fts_window(con, 1000, 200) == 400  # the only guild: 2 × limit
        assert message_fts.fts_window(con, 250, 200) == 1600  # a quarter of the messages
        assert message_fts.fts_window(con, 5000, 200) == 400  # more than seq says: all
        assert message_fts.fts_window(con, 10, 200) is None  # too small a share
        assert message_fts.fts_window(con, 0, 200) is None
    finally:
        con.close()


@pytest.mark.sqlite_only("SQLite's query plan for a long IN list")
async def test_messages_by_seq_reads_rows_by_primary_key(
    make_memory: Callable[..., Any], local_embedder: Any
) -> None:
    mem = await make_memory()
    seqs = await _interleaved(mem, local_embedder)
    con = sqlite.connect(mem.config.db_path)
    statements: list[str] = []
    try:
        con.set_trace_callback(statements.append)
        got = store_messages.messages_by_seq(con, GUILD, seqs[GUILD] + seqs[OTHER_GUILD])
        con.set_trace_callback(None)
        assert sorted(got) == sorted(seqs[GUILD])  # the guild's only
        # A long IN list: without statistics SQLite would walk the guild's
        # author index, a cost that grows with the guild.
        plan = con.execute("EXPLAIN QUERY PLAN " + statements[0]).fetchall()
        detail = " ".join(str(r[3]) for r in plan)
        assert "PRIMARY KEY" in detail and "messages_guild" not in detail, detail
    finally:
        con.close()


async def test_message_search_with_the_split_equals_search_without(
    make_memory: Callable[..., Any], local_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = await make_memory(clock=lambda: NOW)
    # The split is FTS5's (a guild whose lexicon is too big or still building).
    mem.retriever.ctx.lexicons.index.cfg = LexiconConfig(enabled=False)
    await _interleaved(mem, local_embedder)
    await mem.retriever.warm(GUILD)

    async def run() -> list[list[tuple[str, float]]]:
        out = []
        for q in QUERIES:
            for scope in ("messages", "all"):
                hits = await mem.retriever.search(
                    GUILD, q, channel_id=CHANNEL, limit=25, gate=False, scope=scope
                )
                out.append([(h.id, h.score) for h in hits])
        return out

    monkeypatch.setattr(message_search, "FTS_SPLIT_MIN_ROWS", 10**9)
    whole = await run()
    assert all(whole)
    monkeypatch.setattr(message_search, "FTS_SPLIT_MIN_ROWS", 1)
    calls: list[tuple[Any, ...]] = []
    real = message_fts.search_messages_fts

    def spy(*args: Any) -> list[tuple[int, Any, float]]:
        calls.append((*args[1:], None, None)[:5])  # (guild, match, limit, lo, hi)
        return real(*args)

    monkeypatch.setattr(message_fts, "search_messages_fts", spy)
    assert await run() == whole
    # It did split: every search ran a lower and an upper range.
    assert len(calls) == 2 * 2 * len(QUERIES)
    assert all((c[3] is None) != (c[4] is None) for c in calls)
    assert await eventually(lambda: mem.retriever.messages.offers_pending == 0)


def _statement_share_by_characters(text: str) -> float:
    """statement_share spelled out: split after ".", "!", "?" and newlines,
    keep the pieces with a letter or digit, count those ending with "?"."""
    pieces, cur = [], ""
    for i, ch in enumerate(text):
        cur += ch
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if ch == "\n" or (ch in ".!?" and nxt not in ".!?"):
            pieces.append(cur.rstrip("\n"))
            cur = ""
    pieces.append(cur)
    kept = [p.strip() for p in pieces if any(c.isalnum() for c in p)]
    if not kept:
        return 1.0
    return 1.0 - sum(p.endswith("?") for p in kept) / len(kept)


def test_statement_share_counts_asking_sentences() -> None:
    from memory.retrieval.voice import statement_share

    assert statement_share("We moved to Porto. Did you like it? Yes!") == pytest.approx(2 / 3)
    assert statement_share("what?\n\nwhy ?? ok") == pytest.approx(1 / 3)
    assert statement_share("_? ... ?") == 1.0  # no sentence with a letter or digit
    assert statement_share("²?") == 0.0  # a superscript digit is a digit
    assert statement_share("") == 1.0
    rng = random.Random(7)
    alphabet = "ab1_ ?!.\n\té²½-"
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(40)))
        assert statement_share(text) == pytest.approx(_statement_share_by_characters(text)), text
