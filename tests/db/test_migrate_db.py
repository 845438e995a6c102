"""``guildlore migrate-db``: a SQLite memory built from the real export, copied
into a real PostgreSQL; counts, then the same searches on both."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from bench.migrate import searches
from bot.cli import main as cli_main
from memory.config import MemoryConfig
from memory.db.postgres import driver as postgres
from memory.db.sqlite import driver as sqlite
from tests.helpers import REAL_EXPORT


def _slice(tmp: Path, n: int) -> Path:
    """The real export's first ``n`` messages, as an export of its own."""
    doc = json.loads(REAL_EXPORT.read_text(encoding="utf-8"))
    doc["messages"] = doc["messages"][:n]
    path = tmp / "slice.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main(list(args))
    return code, out.getvalue()


def _counts_sqlite(path: Path, tables: list[str]) -> dict[str, int]:
    con = sqlite.connect(path, read_only=True)
    try:
        return {t: int(con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]) for t in tables}
    finally:
        con.close()


def _counts_pg(url: str, tables: list[str]) -> dict[str, int]:
    raw = postgres.connect_raw(url)
    try:
        return {t: int(postgres.scalar(raw, f'SELECT count(*) FROM "{t}"')) for t in tables}
    finally:
        raw.close()


@pytest.mark.timeout(900)
async def test_round_trip_of_the_real_export(
    tmp_path: Path, pg_url: str, local_embedder: Any
) -> None:
    data = tmp_path / "data"
    # The CLI runs its own event loop: on a thread, beside this test's.
    code, out = await asyncio.to_thread(
        _cli, "import", str(_slice(tmp_path, 600)), "--data-dir", str(data), "--json"
    )
    assert code == 0, out
    db = data / "guildlore.sqlite3"

    code, out = await asyncio.to_thread(
        _cli, "migrate-db", "--from", f"sqlite:///{db}", "--to", pg_url, "--json"
    )
    assert code == 0, out
    report = json.loads(out)
    assert report["ok"] and not report["resumed"]
    tables = sorted(report["tables"])
    assert {"messages", "memory_facts", "fact_history", "memory_fact_vectors"} <= set(tables)
    source, target = _counts_sqlite(db, tables), _counts_pg(pg_url, tables)
    assert source == target
    assert source["messages"] > 400 and source["memory_facts"] > 0
    assert source["message_vectors"] > 400
    # The KNN tables hold every message vector.
    knn_messages = sum(v for k, v in report["vectorIndexes"].items() if "messages" in k)
    assert knn_messages == source["message_vectors"]

    guild = json.loads(REAL_EXPORT.read_text(encoding="utf-8"))["guild"]["id"]
    on_sqlite = await searches(MemoryConfig.for_data_dir(data), local_embedder, guild)
    on_pg = await searches(
        MemoryConfig.for_data_dir(tmp_path / "pgdata", database_url=pg_url), local_embedder, guild
    )
    assert any(on_sqlite), "the sample searches found nothing: the test would prove nothing"
    assert on_pg == on_sqlite


def test_a_second_run_resumes_or_refuses(tmp_path: Path, pg_url: str) -> None:
    """A finished copy leaves the target full: copying again is refused, never merged."""
    data = tmp_path / "data"
    code, out = _cli(
        "import",
        str(_slice(tmp_path, 80)),
        "--data-dir",
        str(data),
        "--json",
        "--embeddings",
        "none",
    )
    assert code == 0, out
    db = data / "guildlore.sqlite3"
    assert _cli("migrate-db", "--from", str(db), "--to", pg_url, "--json")[0] == 0
    code, _ = _cli("migrate-db", "--from", str(db), "--to", pg_url, "--json")
    assert code == 1


def test_bad_arguments(tmp_path: Path) -> None:
    assert _cli("migrate-db", "--from", str(tmp_path / "nope.db"), "--to", "postgresql://x")[0] == 1
    (tmp_path / "a.db").write_bytes(b"")
    assert _cli("migrate-db", "--from", str(tmp_path / "a.db"), "--to", "mysql://x")[0] == 2
    assert _cli("migrate-db", "--from", "http://x/a.db", "--to", "postgresql://x")[0] == 2


class _Stop(Exception):
    pass


def test_an_interrupted_copy_resumes_where_it_stopped(tmp_path: Path, pg_url: str) -> None:
    from memory import copy_sqlite_to_postgres

    data = tmp_path / "data"
    code, out = _cli(
        "import",
        str(_slice(tmp_path, 300)),
        "--data-dir",
        str(data),
        "--json",
        "--embeddings",
        "none",
    )
    assert code == 0, out
    db = str(data / "guildlore.sqlite3")
    seen: list[tuple[str, int]] = []

    def stop_midway(table: str, done: int, total: int) -> None:
        seen.append((table, done))
        if table == "messages" and done >= 100:
            raise _Stop  # as a crash or Ctrl-C would, after a committed batch

    with pytest.raises(_Stop):
        copy_sqlite_to_postgres(db, pg_url, progress=stop_midway, batch=50)
    partial = _counts_pg(pg_url, ["messages"])["messages"]
    assert partial == 100  # two committed batches, nothing of the third

    resumed_from: list[int] = []

    def note(table: str, done: int, total: int) -> None:
        if table == "messages":
            resumed_from.append(done)

    report = copy_sqlite_to_postgres(db, pg_url, progress=note, batch=50)
    assert report.resumed and report.ok, report.mismatches()
    assert resumed_from[0] == 150  # went on after the last committed batch
    tables = sorted(report.tables)
    assert _counts_pg(pg_url, tables) == _counts_sqlite(Path(db), tables)


def test_fts_totals_follow_every_insert_update_and_delete(pg_url: str) -> None:
    """``fts_stats`` adds up to the index's rows and tokens whichever connection
    wrote them (BM25's N and mean length), after deletes too."""
    from memory.db.postgres.migrations import migrate

    raw = postgres.connect_raw(pg_url)
    other = postgres.connect_raw(pg_url)
    try:
        migrate(raw)
        for i, con in enumerate((raw, other, raw)):
            con.execute(
                "INSERT INTO messages (id, guild_id, channel_id, author_id, author_name, content, "
                "created_at, source, received_at) VALUES (%s, '1', '2', '3', 'a', %s, 't', 'text', 't')",
                (str(100 + i), "the ink on the scroll " * (i + 1)),
            )
        other.execute("UPDATE messages SET content = 'one word' WHERE id = '100'")
        raw.execute("DELETE FROM messages WHERE id = '101'")
        docs, tokens = raw.execute(
            "SELECT sum(docs), sum(tokens) FROM fts_stats WHERE tbl = 'messages_fts'"
        ).fetchone()
        real = raw.execute("SELECT count(*), sum(len) FROM messages_fts").fetchone()
        assert (docs, tokens) == tuple(real) == (2, 2 + 15)
    finally:
        raw.close()
        other.close()
