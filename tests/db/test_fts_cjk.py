"""Full-text search in scripts written without spaces (Japanese, Chinese, Korean).

SQLite's unicode61 tokenizer splits on spaces and punctuation only, so a
Japanese sentence would be one token and no word inside it could be found.
The index stores such runs as character bigrams (migration m017), the units a
query is split into. Real engines on tmp_path, real SQLite FTS5.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory.db.sqlite import driver as sqlite
from memory.db.sqlite.migrations import applied, migrate
from memory.retrieval.query import fts_match_expression
from memory.text import fts_index_text
from tests.helpers import ALICE, BOB, GUILD, fts_condition, fts_terms, msg

CAROL = "666666666666666666"

# (author, text): a Japanese guild with a Chinese and a Korean member.
MESSAGES = [
    (ALICE, "今度のオフ会は土曜日の午後六時に渋谷の居酒屋でやります"),
    (BOB, "誰か京都でおすすめの動物病院を知っていますか？猫の具合が悪くて"),
    (CAROL, "銀行でプログラマーとして働いて三年になります"),
    (ALICE, "夏に札幌から福岡へ引っ越すことになりました"),
    (BOB, "我们周六在北京的咖啡馆见面吧"),
    (CAROL, "내일 서울에서 회의가 있어요"),
    (ALICE, "明日の朝六時にサーバーを再起動します"),
    (BOB, "I bought a new keyboard yesterday, the switches are great"),
]


async def _ingest(mem: Any) -> dict[str, str]:
    """Ingest MESSAGES; returns text → message id."""
    ids = {}
    for author, text in MESSAGES:
        m = msg(text, author=author, name=f"m{author[-2:]}")
        ids[text] = m.id
        assert (await mem.ingest_message(m)).status == "queued"
    assert await mem.settle()
    return ids


async def _top_message(mem: Any, query: str) -> str | None:
    hits = await mem.search(GUILD, query, scope="messages", limit=3)
    return hits[0].text if hits else None


def test_spaceless_runs_are_indexed_as_bigrams() -> None:
    assert fts_index_text("明日は東京") == " 明日 日は は東 東京 "
    assert fts_index_text("Tokyo東京 猫!") == "Tokyo 東京   猫 !"
    # Full-width letters index as the ones a query types.
    assert fts_index_text("ＡＢＣ会議") == "ABC 会議 "
    assert fts_index_text("Grüße aus München") == "Grüße aus München"
    assert fts_index_text(None) is None
    # The query side makes the same units.
    assert fts_match_expression("東京の会議") == '"東京" OR "京の" OR "の会" OR "会議"'
    assert fts_match_expression("猫") == '"猫"*'


@pytest.mark.parametrize("embeddings", ["none", "local"])
async def test_a_word_inside_a_cjk_sentence_finds_its_message(
    make_memory: Any, embeddings: str
) -> None:
    mem = await make_memory(embeddings=embeddings)
    await _ingest(mem)
    assert await _top_message(mem, "渋谷") == MESSAGES[0][1]
    assert await _top_message(mem, "居酒屋はどこ") == MESSAGES[0][1]
    assert await _top_message(mem, "プログラマー") == MESSAGES[2][1]
    assert await _top_message(mem, "福岡") == MESSAGES[3][1]
    assert await _top_message(mem, "北京的咖啡馆") == MESSAGES[4][1]
    assert await _top_message(mem, "서울") == MESSAGES[5][1]
    assert await _top_message(mem, "猫") == MESSAGES[1][1]
    # Latin text is indexed as before.
    assert await _top_message(mem, "keyboard switches") == MESSAGES[7][1]


async def test_the_index_itself_matches_a_word_inside_a_sentence(make_memory: Any) -> None:
    mem = await make_memory(embeddings="none")
    await _ingest(mem)

    def matches(con: Any, *words: str) -> list[str]:
        match, expr = fts_condition(con, "messages_fts", words)
        return [
            r[0]
            for r in con.execute(
                "SELECT m.content FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid "
                f"WHERE {match} ORDER BY m.seq",
                (expr,),
            )
        ]

    assert await mem.db.read(matches, "渋谷") == [MESSAGES[0][1]]
    assert await mem.db.read(matches, "京都", "病院") == [MESSAGES[1][1]]
    # An edited message is indexed again.
    (seq,) = await mem.db.read(
        lambda con: con.execute(
            "SELECT seq FROM messages WHERE content = ?", (MESSAGES[6][1],)
        ).fetchone()
    )
    await mem.db.write(
        lambda con: con.execute(
            "UPDATE messages SET content = ? WHERE seq = ?", ("来週は大阪で会いましょう", seq)
        )
    )
    assert await mem.db.read(matches, "大阪") == ["来週は大阪で会いましょう"]
    assert await mem.db.read(matches, "再起") == []


@pytest.mark.sqlite_only("an upgrade of a SQLite file made before the bigram index")
async def test_an_upgraded_database_indexes_its_existing_cjk_text(
    tmp_path: Path, make_memory: Any
) -> None:
    data = tmp_path / "d"
    data.mkdir()
    con = sqlite.connect(data / "guildlore.sqlite3")
    migrate(con, upto="m013_decision")
    assert "m017_multilingual_fts" not in applied(con)
    con.execute(
        "INSERT INTO messages (id, guild_id, channel_id, author_id, author_name, content, "
        "created_at, source, state, journaled, received_at) VALUES "
        "('1', ?, '2', '3', 'Old Timer', ?, '2025-01-01T00:00:00.000Z', 'import', 'done', 1, "
        "'2025-01-01T00:00:00.000Z')",
        (GUILD, MESSAGES[0][1]),
    )
    # Before the migration the whole sentence is one token.
    assert (
        con.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH '渋谷'").fetchone()[
            0
        ]
        == 0
    )
    con.close()
    mem = await make_memory(data_dir=data, embeddings="none")
    assert await _top_message(mem, "渋谷") == MESSAGES[0][1]


async def test_deleted_and_forgotten_messages_leave_no_terms_in_the_index(
    make_memory: Any,
) -> None:
    mem = await make_memory(embeddings="none")
    ids = await _ingest(mem)

    def terms(con: Any) -> set[str]:
        return fts_terms(con, "messages_fts")

    before = await mem.db.write(terms)
    assert {"渋谷", "京都", "北京", "서울", "銀行"} <= before

    await mem.delete_messages(GUILD, [ids[MESSAGES[1][1]]])  # Bob's Kyoto message
    await mem.forget(GUILD, ALICE)
    after = await mem.db.write(terms)
    # Alice's words and Bob's deleted message are gone from the index itself…
    for gone in ("渋谷", "居酒", "札幌", "福岡", "再起", "京都", "病院"):
        assert gone not in after, gone
    # …the others' stay searchable.
    assert {"北京", "서울", "銀行", "keyboard"} <= after
    assert await _top_message(mem, "渋谷") is None
    assert await _top_message(mem, "京都") is None
    assert await _top_message(mem, "北京") == MESSAGES[4][1]
