"""The PostgreSQL full-text index against SQLite's FTS5 tables, on a real
server: rows indexed and unindexed by the same statements, the index text
function equal to the Python one, and the store's MATCH expressions finding
the rows SQLite finds."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest

from memory.retrieval.query import fts_match_expression
from memory.text import fts_index_text
from tests import pg


def _fts_hits(sqlite_ref: Any, pg_conn: Any, table: str, term: str) -> tuple[list[int], list[int]]:
    """rowids matching one term (a word, or a bigram of a spaceless script)."""
    a = sqlite_ref.execute(
        f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rowid", (f'"{term}"',)
    ).fetchall()
    b = pg_conn.execute(
        f"SELECT rowid FROM {table} WHERE tsv @@ guildlore_fts_match(%s) ORDER BY rowid",
        (f'"{term}"',),
    ).fetchall()
    return [r[0] for r in a], [r[0] for r in b]


def _same_fts(sqlite_ref: Any, pg_conn: Any, table: str, terms: Sequence[str]) -> None:
    count = f"SELECT count(*) FROM {table}"
    assert sqlite_ref.execute(count).fetchone()[0] == pg_conn.execute(count).fetchone()[0]
    for term in terms:
        a, b = _fts_hits(sqlite_ref, pg_conn, table, term)
        assert a == b, (table, term, a, b)


_FACT_TERMS = ["alice", "paints", "birds", "tokyo", "evidence", "东京", "会议", "moved", "teal"]


def test_fact_fts_rows_follow_inserts_updates_and_deletes_as_in_sqlite(
    sqlite_ref: Any, pg_conn: Any
) -> None:
    steps: list[list[tuple[str, tuple]]] = [
        [
            pg.fact_row(1, "Alice paints birds", "she said she paints birds"),
            pg.fact_row(2, "Alice lives in Tokyo", None),
            pg.fact_row(3, "我住在东京", "明天在东京开会议"),
        ],
        [("UPDATE memory_facts SET fact = ? WHERE id = ?", ("Alice moved to Kyoto", 2))],
        [("UPDATE memory_facts SET evidence_text = ? WHERE id = ?", ("teal evidence", 1))],
        # Not an indexed column: the index is left as it is.
        [("UPDATE memory_facts SET is_active = 0, updated_at = 't1' WHERE id = ?", (3,))],
        [("UPDATE memory_facts SET evidence_text = NULL WHERE id = ?", (3,))],
        [("DELETE FROM memory_facts WHERE id = ?", (1,))],
    ]
    for step in steps:
        pg.both(sqlite_ref, pg_conn, step)
        _same_fts(sqlite_ref, pg_conn, "memory_facts_fts", _FACT_TERMS)
    assert _fts_hits(sqlite_ref, pg_conn, "memory_facts_fts", "东京") == ([3], [3])
    assert _fts_hits(sqlite_ref, pg_conn, "memory_facts_fts", "tokyo") == ([], [])


def test_message_fts_rows_follow_inserts_edits_and_deletes_as_in_sqlite(
    sqlite_ref: Any, pg_conn: Any
) -> None:
    terms = ["hello", "world", "meeting", "edited", "東京", "会議", "猫"]
    steps: list[list[tuple[str, tuple]]] = [
        [
            pg.message_row(1, "m1", "hello world"),
            pg.message_row(2, "m2", "明日は東京で会議"),
            pg.message_row(3, "m3", "猫"),
        ],
        [("UPDATE messages SET content = ? WHERE seq = ?", ("edited meeting", 1))],
        [("UPDATE messages SET state = 'done' WHERE seq = ?", (2,))],
        [("DELETE FROM messages WHERE seq = ?", (3,))],
    ]
    for step in steps:
        pg.both(sqlite_ref, pg_conn, step)
        _same_fts(sqlite_ref, pg_conn, "messages_fts", terms)


_SAMPLES = [
    "",
    "plain ASCII, with punctuation: yes!",
    "Café naïve résumé Ærøskøbing ß",
    "e\u0301 combining accent",  # NFKC composes it
    "ﬁ ligature, ｆｕｌｌ ｗｉｄｔｈ, ①②, ㌔",  # NFKC compatibility forms
    "明日は東京で会議",
    "我住在东京。他住在北京!",
    "猫",
    "ひらがな カタカナ ｶﾀｶﾅ",
    "한국어 텍스트 입니다",
    "ภาษาไทยไม่มีช่องว่าง",
    "emoji 😀🎉 and 👩\u200d👩\u200d👧 family",
    "mixed東京abc大阪123京都",
    "𠀋𠀌𠀍 extension B",
    "Привет мир, Γειά σου",
    "zero\u200bwidth and\ufeffbom",
    "ㄅㄆㄇ bopomofo",
    "မြန်မာ ខ្មែរ ລາວ",
]


def test_the_fts_text_function_is_the_python_one(pg_conn: Any) -> None:
    for text in [*_SAMPLES, None]:
        got = pg_conn.execute("SELECT guildlore_fts_text(%s)", (text,)).fetchone()[0]
        assert got == fts_index_text(text), text


def test_the_fts_text_function_is_the_python_one_on_random_mixed_text(pg_conn: Any) -> None:
    pieces = [
        "abc XYZ 12 ",
        "éèêëçñüÅØß",
        "東京大阪京都北京会议",
        "ひらがなカタカナｶﾀｶﾅ",
        "한국어텍스트",
        "ภาษาไทย",
        "😀🎉👍🤔🤡🤞🏻🥰",
        " .,!?-_'\"\t\n",
        "ﬁ①㌔ｆｕｌ",
        "\u200b\u200d\ufe0f",
    ]
    alphabet = "".join(pieces)
    rng = random.Random(16)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(400)]
    rows = pg_conn.execute(
        "SELECT guildlore_fts_text(t) FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n) "
        "ORDER BY n",
        (texts,),
    ).fetchall()
    assert [r[0] for r in rows] == [fts_index_text(t) for t in texts]


_TEXTS = [
    "Alice paints birds in the park",
    "The meeting moved to 2024-05-01 at 3.14pm, see x@y.com or https://a.b/c",
    "Crème brûlée at the CAFÉ with Zoë; naïve Ångström",
    "Straße und Größe",
    "v1.2.3 released; foo-bar o'reilly hello_world",
    "明日は東京で会議",
    "我住在东京。他住在北京!",
    "猫がいる",
    "한국어 텍스트 입니다",
    "Привет мир, Γειά σου κόσμε",
    "emoji 😀🎉 party",
    # Newer than SQLite's Unicode 6.1 tables: words there, so words here too.
    "I think 🤔 so 🤡, fingers crossed 🤞🏻 🥰",
    "ｆｕｌｌ ｗｉｄｔｈ ＡＢＣ",
]


_QUERIES = [
    "paint birds",
    "painting",
    "when is the meeting on 2024-05-01",
    "3.14",
    "x@y.com",
    "cafe creme brulee",
    "Café naïve",
    "angstrom zoe",
    "strasse größe",
    "v1.2.3 foo bar reilly",
    "hello world",
    "東京の会議",
    "北京",
    "猫",
    "한국어",
    "мир",
    "κόσμε",
    "full width abc",
    "party 🎉",
]


def test_a_match_expression_finds_the_rows_sqlite_finds(sqlite_ref: Any, pg_conn: Any) -> None:
    pg.both(
        sqlite_ref, pg_conn, [pg.message_row(i + 1, f"m{i}", text) for i, text in enumerate(_TEXTS)]
    )
    checked = 0
    for query in _QUERIES:
        for prefixes in (False, True):
            expr = fts_match_expression(query, prefixes=prefixes)
            assert expr is not None, query
            want = [
                r[0]
                for r in sqlite_ref.execute(
                    "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid",
                    (expr,),
                )
            ]
            got = [
                r[0]
                for r in pg_conn.execute(
                    "SELECT rowid FROM messages_fts WHERE tsv @@ guildlore_fts_match(%s) "
                    "ORDER BY rowid",
                    (expr,),
                )
            ]
            assert got == want, (query, expr)
            checked += bool(want)
    assert checked >= 20  # most queries find something


def test_a_match_expression_the_store_never_writes_is_refused(pg_conn: Any) -> None:
    with pytest.raises(psycopg.errors.RaiseException, match="not a quoted FTS phrase"):
        pg_conn.execute("SELECT guildlore_fts_match('alice AND bob')")


_LETTERS = (
    "Łódź Øresund Đorđe ħal ŧest æther œuvre Straße ı İstanbul ǅemal Ŀlum ĳssel þorn ð "
    "ǖber άλφα йод ёж naïve ÉCOLE Ångström ñandú Čeština ﬀ ① ２０２４年 ＡＢＣ"
)


def test_the_index_holds_the_words_sqlite_holds(sqlite_ref: Any, pg_conn: Any) -> None:
    texts = [*_TEXTS, *_LETTERS.split(), _LETTERS]
    pg.both(sqlite_ref, pg_conn, [pg.message_row(i + 1, f"m{i}", t) for i, t in enumerate(texts)])
    sqlite_ref.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, messages_fts, row)")
    want = sorted(r[0] for r in sqlite_ref.execute("SELECT term FROM temp.vocab"))
    got = sorted(
        r[0] for r in pg_conn.execute("SELECT word FROM ts_stat('SELECT tsv FROM messages_fts')")
    )
    assert got == want


def test_the_index_holds_the_words_sqlite_holds_for_random_mixed_script_text(
    sqlite_ref: Any, pg_conn: Any
) -> None:
    pieces = [
        "abc XYZ 12 ",
        "éèêëçñüÅØßŁÓ",
        "東京大阪京都北京会议",
        "ひらがなカタカナｶﾀｶﾅ",
        "한국어텍스트",
        "😀🎉👍🤔🤡🤞🏻🥰",
        " .,!?-_'\"\t\n@/:",
        "ﬁ①㌔ｆｕｌ",
        "\u200b\u200d\ufe0f",
        "άλφαйодё",
        "\u0301\u0308",  # combining marks standing alone
        "ที่นี่ภาษา",
        "हिन्दीभाषा",  # vowel signs and virama: SQLite splits words at them
        "العَرَبِيَّة",
        "עִבְרִית",
    ]
    alphabet = "".join(pieces)
    rng = random.Random(8)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(300)]
    pg.both(sqlite_ref, pg_conn, [pg.message_row(i + 1, f"m{i}", t) for i, t in enumerate(texts)])
    sqlite_ref.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, messages_fts, row)")
    want = sorted(r[0] for r in sqlite_ref.execute("SELECT term FROM temp.vocab"))
    got = pg_conn.execute("SELECT word FROM ts_stat('SELECT tsv FROM messages_fts')").fetchall()
    assert sorted(r[0] for r in got) == want


def test_every_row_is_as_long_as_in_sqlite(sqlite_ref: Any, pg_conn: Any) -> None:
    """BM25 divides by a row's length in words: the same on both sides."""
    pg.both(sqlite_ref, pg_conn, [pg.message_row(i + 1, f"m{i}", t) for i, t in enumerate(_TEXTS)])
    sqlite_ref.execute(
        "CREATE VIRTUAL TABLE temp.inst USING fts5vocab(main, messages_fts, instance)"
    )
    want = dict(sqlite_ref.execute("SELECT doc, count(*) FROM temp.inst GROUP BY doc").fetchall())
    got = dict(pg_conn.execute("SELECT rowid, len FROM messages_fts WHERE len > 0").fetchall())
    assert got == want


def test_ranking_fewer_rows_gives_exactly_the_full_ranking(pg_conn: Any) -> None:
    """``best_ranked`` ranks only the rows of the rarest phrases when that is
    provably enough: its answer must be the whole query's, row for row, for
    queries of rare words, common words and both, at several limits."""
    from memory.db.postgres import driver as postgres
    from memory.store.fts import best_ranked, fts_query

    rng = random.Random(11)
    common = ["the", "and", "garden", "music", "likes", "paint"]
    rare = [f"word{i}" for i in range(400)]
    rows = []
    for i in range(1, 1501):
        words = [rng.choice(common) for _ in range(rng.randint(3, 12))]
        words += [rng.choice(rare) for _ in range(rng.randint(0, 3))]
        rng.shuffle(words)
        rows.append(pg.message_row(i, f"m{i}", " ".join(words)))
    # A rarer word alone in long rows, and a commoner one said four times in
    # a short row: that row outranks every row of the rarer word, so the
    # rarer word's rows alone are not the answer.
    filler = " ".join(["the"] * 20)
    rows += [pg.message_row(2000 + i, f"a{i}", f"alpha {filler}") for i in range(60)]
    rows += [pg.message_row(3000 + i, f"b{i}", f"beta {filler}") for i in range(200)]
    rows.append(pg.message_row(4000, "b-many", "beta beta beta beta"))
    for sql, args in rows:
        pg_conn.execute(sql.replace("?", "%s"), args)
    pg_conn.row_factory = postgres.row_factory
    con = postgres.PgConnection(pg_conn, postgres.identity_columns(pg_conn))

    def run_with(limit: int) -> Any:
        def run(q: Any) -> list[tuple[int, float]]:
            found = con.execute(
                f"SELECT messages_fts.rowid, {q.rank} AS rank FROM {q.source} "
                f"WHERE {q.where} ORDER BY rank, messages_fts.rowid LIMIT ?",
                [*q.params, limit],
            ).fetchall()
            return [(int(r[0]), float(r[1])) for r in found]

        return run

    queries = [
        '"alpha" OR "beta"',
        '"the" OR "garden"',
        '"word7" OR "the"',
        '"word3" OR "word250" OR "music" OR "paint"*',
        '"likes" OR "word12"* OR "and"',
        '"nothingmatches" OR "the"',
    ]
    pruned = 0
    for match in queries:
        for limit in (1, 5, 40):
            run = run_with(limit)
            full = fts_query(con, "messages_fts", match)
            assert full is not None
            want = run(full)
            calls: list[int] = []

            def counting(q: Any, run: Any = run, calls: list[int] = calls) -> Any:
                calls.append(1)
                return run(q)

            got = best_ranked(con, "messages_fts", match, limit, counting, lambda r: r[1])
            assert got == want, (match, limit)
            pruned += len(calls) == 1 and match.count(" OR ") > 0
    assert pruned, "no query was answered from its rarest phrase: the pruning never ran"


def test_bm25_is_fts5s_own_for_words_said_once_or_often_and_for_prefixes(
    sqlite_ref: Any, pg_conn: Any
) -> None:
    """PostgreSQL's BM25 of every matching row equals FTS5's ``bm25()``: rows
    saying a word once, several times or not at all, of many lengths, for
    exact words (counted through ``ts_rank``) and prefixes (counted by
    expanding the row), alone and together."""
    from memory.db.postgres import driver as postgres
    from memory.store.fts import fts_query

    rng = random.Random(5)
    vocab = ["garden", "gardening", "music", "paint", "painted", "the", "river", "tokyo"]
    texts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 30))) for _ in range(300)]
    texts += ["paint " * 40, "garden garden garden", "music", "the river the river"]
    pg.both(sqlite_ref, pg_conn, [pg.message_row(i + 1, f"m{i}", t) for i, t in enumerate(texts)])
    pg_conn.row_factory = postgres.row_factory
    con = postgres.PgConnection(pg_conn, postgres.identity_columns(pg_conn))
    queries = [
        '"garden"',
        '"paint" OR "river"',
        '"tokyo" OR "the" OR "music"',
        '"paint"*',
        '"garden"* OR "music" OR "the"',
        '"paint" OR "paint"*',
    ]
    for match in queries:
        want = dict(
            sqlite_ref.execute(
                "SELECT rowid, bm25(messages_fts) FROM messages_fts WHERE messages_fts MATCH ?",
                (match,),
            ).fetchall()
        )
        q = fts_query(con, "messages_fts", match)
        assert q is not None
        got = dict(
            con.execute(
                f"SELECT messages_fts.rowid, {q.rank} FROM {q.source} WHERE {q.where}",
                list(q.params),
            ).fetchall()
        )
        assert want and set(got) == set(want), match
        for rowid, score in want.items():
            assert got[rowid] == pytest.approx(score, rel=1e-9, abs=1e-12), (match, rowid)


def test_the_pruning_bound_is_the_largest_part_a_row_gives_the_word(pg_conn: Any) -> None:
    """What ``best_ranked`` may stop on: a word's part of BM25 in any row is
    at most the bound ``bm25`` measured — the largest one over the table,
    not the ceiling k1 + 1 (which would stop it far later); a prefix keeps
    the ceiling."""
    from memory.db.postgres import driver as postgres
    from memory.store.fts import K1, B, bm25

    texts = ["beta", "beta beta beta beta", "alpha the the the", "beta gamma delta", "the"]
    for sql, args in [pg.message_row(i + 1, f"m{i}", t) for i, t in enumerate(texts)]:
        pg_conn.execute(sql.replace("?", "%s"), args)
    pg_conn.row_factory = postgres.row_factory
    con = postgres.PgConnection(pg_conn, postgres.identity_columns(pg_conn))
    lengths = [len(t.split()) for t in texts]
    avgdl = sum(lengths) / len(lengths)

    def part(f: int, dl: int) -> float:
        return f * (K1 + 1) / (f + K1 * (1 - B + B * dl / avgdl))

    stats = bm25(con, "messages_fts", '"beta" OR "the" OR "gamm"*')
    assert stats is not None
    most = {expr: m for expr, _, m in stats.phrases}
    assert most['"beta"'] == pytest.approx(max(part(1, 1), part(4, 4), part(1, 3)))
    assert most['"the"'] == pytest.approx(max(part(3, 4), part(1, 1)))
    assert most['"gamm"*'] == K1 + 1
