"""Print the non-ASCII code points SQLite's FTS5 ``unicode61 remove_diacritics 2``
tokenizer keeps inside words, as ranges: the table frozen in
memory/db/postgres/schema/p004_token_chars.py (PostgreSQL splits words where
SQLite does). Each code point goes between two letters in an FTS5 table; the
row is one word (kept) or two (a separator). Takes a few minutes.

    .venv/bin/python scripts/fts_token_chars.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory.db.sqlite import driver as sqlite

BATCH = 50_000


def token_chars() -> list[tuple[int, int]]:
    con = sqlite.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE f USING fts5(x, tokenize='unicode61 remove_diacritics 2')")
    points = [c for c in range(0x80, 0x110000) if not 0xD800 <= c <= 0xDFFF]
    kept: set[int] = set()
    for i in range(0, len(points), BATCH):
        chunk = points[i : i + BATCH]
        con.execute("DELETE FROM f")
        con.executemany(
            "INSERT INTO f (rowid, x) VALUES (?, ?)", [(c, f"q{chr(c)}z") for c in chunk]
        )
        split = {int(r[0]) for r in con.execute("SELECT rowid FROM f WHERE f MATCH 'q'")}
        kept.update(c for c in chunk if c not in split)
    ranges: list[tuple[int, int]] = []
    for c in sorted(kept):
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1] = (ranges[-1][0], c)
        else:
            ranges.append((c, c))
    return ranges


if __name__ == "__main__":
    for lo, hi in token_chars():
        print(f"    (0x{lo:04X}, 0x{hi:04X}),")
