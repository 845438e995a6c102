"""The benches' PostgreSQL paths, at tiny sizes: the backend list, the
side-by-side verdict of ``bench/search.py --backends``, the ingest burst on
PostgreSQL, and ``bench/processes.py``'s engine processes sharing one
database, each processing only its own guilds' messages."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from bench._common import EXPORT
from bench._pg import PgServer, parse_backends
from bench._search_backends import comparison
from bench.processes import deal, guild_ids, run_config


def test_backends_parse_in_order_and_refuse_unknown_names() -> None:
    assert parse_backends("postgresql, sqlite,postgresql") == ["postgresql", "sqlite"]
    for bad in ("", "sqlite,mysql"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_backends(bad)


def _sizes(p95: dict[str, float]) -> dict[str, Any]:
    return {
        "sizes": {
            size: {
                "search": {"p50_ms": ms / 2, "p95_ms": ms},
                "slice": {"p50_ms": ms, "p95_ms": 2 * ms},
            }
            for size, ms in p95.items()
        }
    }


def test_the_verdict_is_postgresql_p95_over_sqlite_at_the_largest_size() -> None:
    sq = _sizes({"1000": 4.0, "100000": 10.0})
    within = comparison({"sqlite": sq, "postgresql": _sizes({"1000": 40.0, "100000": 19.0})})
    assert within["judged_at_facts"] == 100000
    assert within["facts"]["100000"]["search_p95_over_sqlite"] == 1.9
    assert within["facts"]["1000"]["search_p95_over_sqlite"] == 10.0
    assert within["meets_target"] is True
    over = comparison({"sqlite": sq, "postgresql": _sizes({"1000": 4.0, "100000": 21.0})})
    assert over["meets_target"] is False
    assert comparison({"sqlite": sq})["meets_target"] is None


def test_guilds_are_dealt_out_without_overlap() -> None:
    guilds = guild_ids(5)
    halves = deal(guilds, 2)
    assert [len(h) for h in halves] == [3, 2]
    assert sorted(halves[0] + halves[1]) == sorted(guilds)
    assert deal(guilds, 1) == [guilds]


async def test_the_ingest_burst_runs_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    from bench.ingest import burst

    out = await burst(40, tmp_path / "burst", EXPORT, pg_url)
    assert out["backend"] == "postgresql"
    assert out["processed"] == 40 and out["dropped_total"] == 0
    assert out["wal_peak_mib"] is None  # no SQLite file to sample


def test_two_engine_processes_share_one_database_and_keep_to_their_guilds(
    pg_server: Any, tmp_path: Path
) -> None:
    from bench.ingest import FakeServerThread
    from tests.fakeopenai import echo_facts_reply

    args = argparse.Namespace(
        guilds=3,
        channels=1,
        rate=30.0,
        seconds=2.5,
        warmup=0.5,
        embeddings="none",
        export=EXPORT,
    )
    with FakeServerThread(0.0, echo_facts_reply) as fake:
        run = run_config(2, 4, args, PgServer(pg_server), fake.base_url, tmp_path)
    assert [len(r["guilds"]) for r in run["per_process"]] == [2, 1]
    assert run["only_own_messages"] is True
    assert run["every_offered_message_stored"] is True
    for r in run["per_process"]:
        assert r["sent"] > 0 and r["dropped"] == 0 and r["drained"] is True
        assert r["processed_total"] == r["sent"]
        # The rate is made of two readings of one window, the warm-up's first.
        (t0, n0), (t1, n1) = r["reading_at_warmup"], r["reading_at_end"]
        assert t0 < t1 and 0 <= n0 <= n1 <= r["processed_total"]
        assert r["processed_rate"] == pytest.approx((n1 - n0) / (t1 - t0), rel=0.01)
    by_guild = run["messages_by_guild"]
    assert sum(g["sent"] for g in by_guild.values()) == sum(r["sent"] for r in run["per_process"])
    assert all(g.get("done", 0) + g.get("skipped", 0) == g["sent"] for g in by_guild.values())
