"""Channel objects in a Discord API dump are channel metadata, not a schema error.

``tests/data/api_dump`` is a small dump written for these tests: the forum
channel (``channel_data.json``, a ``GET /channels/{id}`` answer with its name
and topic), its threads (``threads.json``, channel objects) and their
messages (``messages.json``, raw API messages).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

from bot.cli import main as cli_main
from memory.db.sqlite import driver as sqlite
from memory.importer.reader import iter_export, read_header

DUMP = Path(__file__).resolve().parents[1] / "data" / "api_dump"
GUILD = "1200000000000000001"
FORUM = "1200000000000000100"


def _import(data_dir: Path, *paths: Path, extra: tuple[str, ...] = ()) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(
            [
                "import",
                *map(str, paths),
                "--data-dir",
                str(data_dir),
                "--json",
                "--embeddings",
                "none",
                "--extractor",
                "rules",
                *extra,
            ]
        )
    return code, json.loads(out.getvalue()), err.getvalue()


def _channel_names(data_dir: Path) -> dict[tuple[str, str], str]:
    con = sqlite.connect(data_dir / "guildlore.sqlite3", read_only=True)
    try:
        rows = con.execute("SELECT guild_id, channel_id, name FROM channels").fetchall()
    finally:
        con.close()
    return {(str(r[0]), str(r[1])): str(r[2]) for r in rows}


def test_the_dump_imports_with_its_channels_named(tmp_path: Path) -> None:
    code, report, err = _import(tmp_path, DUMP)
    assert code == 0, err
    assert report["errors"] == []
    assert report["messages"] == 5 and report["new"] == 5
    assert report["channels"] == 3
    assert report["skipped"] == {}
    names = _channel_names(tmp_path)
    assert names[(GUILD, FORUM)] == "bread-lab"
    assert names[(GUILD, "1200000000000000200")] == "Rye starter, day 9"
    assert names[(GUILD, "1200000000000000201")] == "Dense crumb again"


def test_a_channel_object_is_read_with_its_topic() -> None:
    header = read_header(DUMP / "channel_data.json")
    assert (header.format, header.guild_id, header.channel_id, header.channel_name) == (
        "channel",
        GUILD,
        FORUM,
        "bread-lab",
    )
    (record,) = list(iter_export(DUMP / "channel_data.json"))
    assert record.message is None and not record.skipped
    assert record.channel is not None
    assert record.channel.topic == "One post per bake: recipe, crumb photo, what went wrong."
    assert (record.channel.type, record.channel.parent_id) == (15, "1200000000000000010")


def test_channels_without_a_guild_take_the_given_one_and_dms_are_skipped(
    tmp_path: Path,
) -> None:
    dump = tmp_path / "channels.json"
    dump.write_text(
        json.dumps(
            [
                {"id": "1300000000000000001", "type": 0, "name": "general", "topic": None},
                {"id": "1300000000000000002", "type": 1, "recipients": []},
            ]
        ),
        encoding="utf-8",
    )
    records = list(iter_export(dump))
    assert [r.skip_reason for r in records] == ["no_guild", "dm"]
    records = list(iter_export(dump, default_guild_id="1300000000000000000"))
    assert records[0].channel is not None and records[0].channel.name == "general"
    assert records[1].skip_reason == "dm"

    code, report, err = _import(tmp_path / "data", dump, extra=("--guild", "1300000000000000000"))
    assert code == 0, err
    assert report["channels"] == 1 and report["skipped"] == {"dm": 1}
    assert _channel_names(tmp_path / "data") == {
        ("1300000000000000000", "1300000000000000001"): "general"
    }


def test_an_object_that_is_no_channel_is_still_refused(tmp_path: Path) -> None:
    bad = tmp_path / "odd.json"
    bad.write_text('{"id": "5", "name": "no type"}', encoding="utf-8")
    code, report, err = _import(tmp_path / "data", bad)
    assert code == 1
    assert "wrong schema" in report["errors"][0]
