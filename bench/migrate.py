"""``guildlore migrate-db`` on the whole real export: SQLite → PostgreSQL.

Imports the real DiscordChatExporter export (tests/data) into a SQLite
memory with the bundled MiniLM, copies it into a fresh PostgreSQL database
(the ``pgserver`` wheel's server, started here), compares every table's row
count, and runs the same searches on both — facts and messages, every query
of the list — reporting how many return identical hits in identical order.

    .venv/bin/python bench/migrate.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import EXPORT, print_table, write_json

QUERIES = (
    "papyrus scrolls from Herculaneum",
    "ink detection model",
    "who is working on segmentation",
    "the prize for reading the first words",
    "CT scan resolution",
    "Philodemus",
    "volunteer annotation",
    "carbonized",
    "open source code release",
    "virtual unwrapping",
    "fiber orientation",
    "Greek letters",
    "the grand prize deadline",
    "machine learning team",
    "scroll fragments photographed",
    "Vesuvius eruption",
    "surface volume",
    "crackle pattern",
    "tutorial for beginners",
    "submissions and judging",
)


async def searches(cfg: Any, embedder: Any, guild: str) -> list[list[tuple[str, str]]]:
    """Every query of ``QUERIES`` on facts and on messages: (kind, id) of each
    hit, best first, no relevance gate (so the rankings themselves compare)."""
    from memory import Memory
    from memory.extract.rules.extractor import RuleExtractor

    mem = await Memory.open(cfg, extractor=RuleExtractor(), embedder=embedder)
    try:
        out = []
        for q in QUERIES:
            for scope in ("facts", "messages"):
                hits = await mem.search(guild, q, scope=scope, gate=False, limit=10)
                out.append([(h.kind, str(h.id)) for h in hits])
        return out
    finally:
        await mem.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--export", type=Path, default=EXPORT)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    import pgserver

    from bot.cli import main as cli_main
    from memory import MemoryConfig, copy_sqlite_to_postgres
    from memory.db.postgres import driver as postgres
    from memory.db.sqlite import driver as sqlite
    from memory.embed.local import LocalMiniLMEmbedder

    work = Path(tempfile.mkdtemp(prefix="guildlore-pg-"))
    work.chmod(0o755)
    server = pgserver.get_server(work / "pg", cleanup_mode="stop")
    try:
        raw = postgres.connect_raw(server.get_uri())
        raw.execute("CREATE DATABASE guildlore")
        raw.close()
        url = server.get_uri("guildlore")
        data = work / "data"
        t0 = time.perf_counter()
        code = cli_main(["import", str(args.export), "--data-dir", str(data), "--json"])
        imported_s = time.perf_counter() - t0
        if code != 0:
            print("import failed", file=sys.stderr)
            return 1
        db = data / "guildlore.sqlite3"
        t0 = time.perf_counter()
        report = copy_sqlite_to_postgres(str(db), url)
        copy_s = time.perf_counter() - t0
        src = sqlite.connect(db, read_only=True)
        rows = sum(s for s, _ in report.tables.values())
        src.close()

        guild = json.loads(args.export.read_text(encoding="utf-8"))["guild"]["id"]
        embedder = LocalMiniLMEmbedder()
        embedder.load()
        on_sqlite = asyncio.run(searches(MemoryConfig.for_data_dir(data), embedder, guild))
        on_pg = asyncio.run(
            searches(MemoryConfig.for_data_dir(work / "pgdata", database_url=url), embedder, guild)
        )
        same = sum(a == b for a, b in zip(on_sqlite, on_pg, strict=True))
        same_top = sum(a[:1] == b[:1] for a, b in zip(on_sqlite, on_pg, strict=True))
        payload = {
            "export": args.export.name,
            "tables": len(report.tables),
            "rows": rows,
            "counts_equal": report.ok,
            "mismatches": report.mismatches(),
            "vector_index_rows": report.vectors,
            "import_s": round(imported_s, 1),
            "copy_s": round(copy_s, 1),
            "searches": len(on_sqlite),
            "identical": same,
            "identical_first_hit": same_top,
            "searches_with_hits": sum(bool(a) for a in on_sqlite),
        }
        print_table(
            ["tables", "rows", "counts equal", "copy s", "searches", "identical", "same 1st"],
            [
                [
                    payload["tables"],
                    rows,
                    report.ok,
                    payload["copy_s"],
                    payload["searches"],
                    same,
                    same_top,
                ]
            ],
        )
        path = write_json("migrate-db", payload, args.json)
        print(f"wrote {path}")
        return 0 if report.ok else 1
    finally:
        server.cleanup()


if __name__ == "__main__":
    sys.exit(main())
