"""Health (the real aiohttp app) and ``guildlore doctor`` see the disk under
the memory: pages of the database overwritten, the file replaced or deleted
under a running process, journal lines owed; a dashboard action on a disk
that refuses writes answers one line (503), not a 500 with a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from memory.db.sqlite import driver as sqlite
from tests.cli_runs import IMPORT, guildlore
from tests.helpers import msg
from tests.tmpfs import fill, tmpfs

ROOT = Path(__file__).resolve().parents[2]
Client = TestClient[web.Request, web.Application]
PAGE = 4096

DUMP = ROOT / "tests" / "data" / "api_dump"


def overwrite_pages(db: Path, first: int, count: int) -> None:
    """What a disk error or a stray program does: pages of the file replaced by
    junk (after the WAL is copied into the file, so the file is what is read)."""
    con = sqlite.connect(db)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
    with open(db, "r+b") as f:
        f.seek(PAGE * first)
        f.write(bytes((n * 37 + 11) % 256 for n in range(PAGE * count)))


async def filled_memory(make_memory: Callable[..., Any], data: Path) -> Any:
    mem = await make_memory(embeddings="none", data_dir=data)
    for n in range(300):
        await mem.ingest_message(
            msg(f"Message {n}: Ana keeps notebook number {n} in the blue shed " + "z" * 200)
        )
    assert await mem.settle()
    return mem


async def client_for(aiohttp_client: Any, mem: Any) -> Client:
    config = DashboardConfig()
    server = TestServer(create_app(mem, config))
    await server.start_server(**runner_options(config))
    client: Client = await aiohttp_client(server)
    return client


@pytest.mark.sqlite_only("the SQLite file under the process")
async def test_health_sees_damaged_replaced_and_deleted_files(
    tmp_path: Path, make_memory: Callable[..., Any], aiohttp_client: Any, store_backend: str
) -> None:
    data = tmp_path / "data"
    mem = await filled_memory(make_memory, data)
    mem.storage_health.check_every_s = 0  # a quick_check on every health call
    client = await client_for(aiohttp_client, mem)
    db = data / "guildlore.sqlite3"

    body = await (await client.get("/api/memory/health")).json()
    assert body["healthy"] is True, body["warnings"]
    assert body["storage"]["database_file"] == "ok"
    assert body["storage"]["quick_check"] == ["ok"]
    assert body["storage"]["journal_owed"] == 0
    metrics = await (await client.get("/metrics")).text()
    assert "guildlore_database_file_ok 1" in metrics
    assert "guildlore_journal_owed_lines 0" in metrics

    intact = tmp_path / "intact.sqlite3"
    shutil.copy(db, intact)
    overwrite_pages(db, 3, db.stat().st_size // PAGE - 4)
    r = await client.get("/api/memory/health")
    assert r.status == 200
    body = await r.json()
    assert body["healthy"] is False
    assert body["storage"]["quick_check"] != ["ok"]
    assert any("quick_check found the database file damaged" in w for w in body["warnings"])
    # Metrics still answer (a monitor must see the damage); pages that need
    # the damaged file answer one line, not a traceback.
    r = await client.get("/metrics")
    assert r.status == 200
    assert "guildlore_database_file_ok 0" in await r.text()
    r = await client.get("/api/guilds")
    assert r.status == 503
    assert "damaged database file" in (await r.json())["error"]

    os.replace(intact, db)  # a restore copied over it: the process has the old inode
    body = await (await client.get("/api/memory/health")).json()
    assert body["storage"]["database_file"] == "replaced"
    assert any(f"{db} was replaced under this process" in w for w in body["warnings"])

    db.unlink()
    body = await (await client.get("/api/memory/health")).json()
    assert body["healthy"] is False
    assert body["storage"]["database_file"] == "deleted"
    assert any(f"{db} was deleted under this process" in w for w in body["warnings"])


def doctor(data: Path) -> tuple[int, str]:
    code, out, err = guildlore("doctor", "--offline", "--data-dir", data)
    assert "Traceback" not in err, err
    return code, out


def imported(data: Path) -> Path:
    code, _, err = guildlore("import", DUMP, "--data-dir", data, *IMPORT)
    assert code == 0, err
    return data / "guildlore.sqlite3"


def test_doctor_reports_a_damaged_file_and_owed_lines(tmp_path: Path) -> None:
    data = tmp_path / "data"
    db = imported(data)
    con = sqlite.connect(db)
    try:
        con.execute("UPDATE messages SET journaled = 0 WHERE seq <= 3")
    finally:
        con.close()
    code, out = doctor(data)
    assert code == 0, out
    assert "ok    database file: PRAGMA quick_check finds it whole" in out
    assert "warn  journal: 3 journal lines are owed" in out

    overwrite_pages(db, 3, db.stat().st_size // PAGE - 4)
    code, out = doctor(data)
    assert code == 1, out
    assert f"FAIL  database file: PRAGMA quick_check finds {db} damaged" in out
    assert "restore a backup" in out
    assert "Everything required works" not in out


_HOLDER = textwrap.dedent(
    """
    import sqlite3, sys, time
    con = sqlite3.connect(sys.argv[1])
    con.execute("SELECT count(*) FROM messages").fetchone()
    print("open", flush=True)
    time.sleep(600)
    """
)


def test_doctor_names_a_process_writing_to_a_deleted_database(tmp_path: Path) -> None:
    data = tmp_path / "data"
    db = imported(data)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(db)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        shutil.copy(db, tmp_path / "copy.sqlite3")
        os.replace(tmp_path / "copy.sqlite3", db)
        code, out = doctor(data)
        assert code == 1, out
        assert f"FAIL  database file: process {holder.pid} (" in out
        assert f"was replaced at {db}" in out

        db.unlink()
        code, out = doctor(data)
        assert f"FAIL  database file: process {holder.pid} (" in out
        assert f"was deleted at {db}" in out
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


@pytest.mark.sqlite_only("the SQLite file under the process")
async def test_a_dashboard_action_on_a_full_disk_is_one_line(
    tmp_path: Path, make_memory: Callable[..., Any], aiohttp_client: Any, store_backend: str
) -> None:
    """(A disk cannot be remounted read-only while the process has files open
    for writing: the read-only case is the CLI's, tests/importer/test_disk_full.py.)"""
    with tmpfs(tmp_path / "disk", "40m") as disk:
        mem = await filled_memory(make_memory, disk / "data")
        client = await client_for(aiohttp_client, mem)
        csrf = await (await client.get("/api/csrf")).json()
        headers = {csrf["header"]: csrf["csrfToken"]}
        filler = fill(disk)
        r = await client.post("/api/memory/refresh", headers=headers)
        assert r.status == 503
        body = await r.json()
        assert body["ok"] is False
        assert body["error"].startswith("the disk holding ")
        assert "is full" in body["error"] and "free space" in body["error"]
        assert "\n" not in body["error"] and "Traceback" not in body["error"]
        filler.unlink()
        r = await client.post("/api/memory/refresh", headers=headers)
        assert r.status == 200
