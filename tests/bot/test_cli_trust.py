"""``guildlore forget --user ID --all-guilds`` (a deleted Discord account: one
erase across every guild, one receipt) and ``guildlore receipt ID`` (show a
receipt and check that what it erased is still gone)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bot.cli import main as cli_main
from memory.config import EmbeddingConfig, MemoryConfig
from memory.db.sqlite import driver as sqlite
from memory.engine import Memory
from tests.helpers import msg

ALICE = "444444444444444444"
GUILDS = ("111111111111111111", "222222222222222222")


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli_main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def _seed(data: Path) -> None:
    cfg = MemoryConfig.for_data_dir(data, embedding=EmbeddingConfig(provider="none"))
    mem = await Memory.open(cfg)
    try:
        for guild in GUILDS:
            for text, author in (
                ("I love hiking in the Alps.", ALICE),
                ("I love chess.", "5" * 18),
            ):
                assert await (
                    await mem.ingest_message(msg(text, author=author, guild=guild))
                ).wait()
        assert await mem.settle(30)
    finally:
        await mem.close()


def test_forget_all_guilds_with_one_receipt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    asyncio.run(_seed(data))
    with pytest.raises(SystemExit) as refused:  # argparse: one of them is required
        _run(capsys, "forget", "--user", ALICE, "--data-dir", str(data), "--yes")
    assert refused.value.code == 2
    assert "one of the arguments --guild --all-guilds is required" in capsys.readouterr().err

    code, out, _ = _run(
        capsys, "forget", "--user", ALICE, "--all-guilds", "--data-dir", str(data), "--yes"
    )
    assert code == 0, out
    assert f"Erased user {ALICE} from 2 guilds: 2 facts" in out
    receipt = out.rsplit("Deletion receipt: ", 1)[1].strip()
    assert receipt.startswith("R-")
    con = sqlite.connect(data / "guildlore.sqlite3", read_only=True)
    try:
        left = con.execute(
            "SELECT count(*) FROM messages WHERE author_id = ?", (ALICE,)
        ).fetchone()[0]
        others = con.execute("SELECT count(*) FROM messages").fetchone()[0]
        receipts = con.execute("SELECT guild_id, scope FROM deletion_receipts").fetchall()
    finally:
        con.close()
    assert left == 0 and others == 2
    assert [tuple(r) for r in receipts] == [(None, "everywhere")]

    code, out, _ = _run(capsys, "receipt", receipt.lower(), "--data-dir", str(data))
    assert code == 0
    assert f"Receipt {receipt}" in out and "every guild" in out
    assert "nothing from before the erase is in memory now" in out
    code, out, _ = _run(capsys, "receipt", receipt, "--json", "--data-dir", str(data))
    doc = json.loads(out)
    assert doc["clean"] and doc["counts"]["guilds"] == 2 and doc["counts"]["messages"] == 2
    assert "hiking" not in out
    code, _, err = _run(capsys, "receipt", "R-0000-0000-0000", "--data-dir", str(data))
    assert code == 1 and "no receipt" in err
