"""The CLI's answers to a wrong guild, member or file: a message and a
non-zero exit status, and nothing erased or created behind it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bot.cli import main as cli_main
from memory.db.sqlite import driver as sqlite

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "bot" / "data" / "sample_guild.json"
GUILD = "1200000000000000001"
DORIAN = "1210000000000031676"
NOBODY = "1299999999999999999"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli_main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("sample") / "data"
    args = ["import", str(SAMPLE), "--data-dir", str(data), "--embeddings", "none"]
    assert cli_main([*args, "--extractor", "rules"]) == 0
    return data


@pytest.fixture
def data(imported: Path, tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(imported, target)
    return target


def _counts(data: Path) -> dict[str, int]:
    con = sqlite.connect(data / "guildlore.sqlite3", read_only=True)
    try:
        return {
            t: int(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
            for t in ("messages", "memory_facts", "members", "fact_history")
        }
    finally:
        con.close()


def test_search_in_an_unknown_guild_fails_and_names_the_known_ones(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "search", "greek", "--guild", "999", "--data-dir", str(data))
    assert code == 1 and out == ""
    assert "no guild 999" in err and GUILD in err and "Traceback" not in err
    code, out, err = _run(
        capsys, "search", "greek", "--guild", "999", "--json", "--data-dir", str(data)
    )
    assert code == 1 and out == "" and "no guild 999" in err
    # A known guild without hits is still a success.
    code, out, _ = _run(capsys, "search", "zzqxv", "--guild", GUILD, "--data-dir", str(data))
    assert code == 0 and "no hits" in out


def test_forget_of_an_unknown_member_says_so_and_erases_nothing(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _counts(data)
    code, out, err = _run(
        capsys, "forget", "--guild", GUILD, "--user", NOBODY, "--yes", "--data-dir", str(data)
    )
    assert code == 1 and out == ""
    assert f"holds nothing of user {NOBODY}" in err and "nothing erased" in err
    assert _counts(data) == before  # not even a "forget" history row
    code, _, err = _run(
        capsys, "forget", "--guild", "999", "--user", DORIAN, "--yes", "--data-dir", str(data)
    )
    assert code == 1 and "no guild 999" in err
    assert _counts(data) == before
    # A known member is still erased.
    code, out, _ = _run(
        capsys,
        "forget",
        "--guild",
        GUILD,
        "--user",
        DORIAN,
        "--yes",
        "--json",
        "--data-dir",
        str(data),
    )
    assert code == 0 and json.loads(out)["messages"] >= 1


@pytest.mark.parametrize(
    "content",
    [
        "just some notes, not JSON\n",
        '{"name": "a JSON object that is not an export"}',
        "[1, 2, 3]",
        "",
    ],
)
def test_import_of_a_file_that_is_not_an_export_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    source = tmp_path / "notes.json"
    source.write_text(content)
    data = tmp_path / "data"
    code, out, err = _run(
        capsys, "import", str(source), "--data-dir", str(data), "--embeddings", "none"
    )
    assert code == 1 and "nothing created" in err and "notes.json" in err
    assert "Traceback" not in err
    assert not data.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.json"]


def test_import_of_an_export_beside_a_file_that_is_not_one_imports_the_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "notes.json"
    bad.write_text("not json")
    data = tmp_path / "data"
    code, _, err = _run(
        capsys,
        "import",
        str(bad),
        str(SAMPLE),
        "--data-dir",
        str(data),
        "--embeddings",
        "none",
        "--extractor",
        "rules",
    )
    assert code == 1 and "notes.json" in err
    assert _counts(data)["messages"] > 0
