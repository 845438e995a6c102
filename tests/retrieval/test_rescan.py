"""Where an in-memory index's next read starts (``memory.retrieval.rescan``)."""

from __future__ import annotations

from memory.retrieval.rescan import RescanWindow


class _Con:
    def __init__(self, dialect: str) -> None:
        self.dialect = dialect


def test_sqlite_starts_at_the_watermarks_postgresql_at_the_oldest_held() -> None:
    sqlite_window, pg_window = RescanWindow(), RescanWindow()
    assert sqlite_window.start(_Con("sqlite"), (5, 9)) == (5, 9)
    assert sqlite_window.start(_Con("sqlite"), (7, 9)) == (7, 9)
    pg = _Con("postgresql")
    assert pg_window.start(pg, (5, 9)) == (5, 9)  # nothing held yet
    assert pg_window.start(pg, (7, 9)) == (5, 9)  # read again from the older marks
    assert pg_window.start(pg, (8, 10)) == (5, 9)
