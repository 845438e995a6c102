"""Two processes registering the same embedding model at once on PostgreSQL:
the second waits for the first's commit and finds its row."""

from __future__ import annotations

import threading
import time
from typing import Any

from memory.db.postgres import driver as postgres
from memory.db.postgres.migrations import migrate
from memory.store.vectors import ensure_model

MODEL = "local:test-model"


def test_a_model_registered_by_two_writers_at_once_is_one_row(pg_url: str) -> None:
    first = postgres.connect_raw(pg_url)
    migrate(first)
    a = postgres.connect(pg_url)
    b = postgres.connect(pg_url)
    got: dict[str, Any] = {}

    def second() -> None:
        b.execute("BEGIN")
        try:
            got["n"] = ensure_model(b, MODEL, 8, "2026-01-01T00:00:00Z")
            b.execute("COMMIT")
        except Exception as exc:
            got["error"] = exc
            b.execute("ROLLBACK")

    try:
        a.execute("BEGIN")
        n = ensure_model(a, MODEL, 8, "2026-01-01T00:00:00Z")
        other = threading.Thread(target=second)
        other.start()
        time.sleep(0.5)  # the second writer is now waiting on the first's transaction
        a.execute("COMMIT")
        other.join(30)
        assert not other.is_alive()
        assert got == {"n": n}
        rows = a.execute("SELECT count(*) AS c FROM embedding_models WHERE model = ?", (MODEL,))
        assert rows.fetchone()["c"] == 1
    finally:
        for con in (a, b):
            con.close()
        first.close()
